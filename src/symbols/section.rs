//! The bottom of the ELF reader: a section's bytes within a bound, and why a file gave no
//! symbols. Both the symbol-table parser (`elf.rs`) and the PLT reader (`plt.rs`) use these,
//! so that neither imports the other's half.

use object::elf;
use object::read::ReadRef;
use object::read::elf::{FileHeader, SectionHeader};

/// Why a file gave no symbols.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfError {
    NotElf,
    /// An ELF file, but not an executable or shared object (a core file, an object file).
    NotLoadable,
    /// Headers or tables that point outside the file or contradict each other.
    Corrupt(&'static str),
    /// The symbol tables exceed the memory perfwatch gives the symbol cache (`limit` bytes).
    TooLarge {
        limit: u64,
    },
    Io(String),
}

impl std::fmt::Display for ElfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ElfError::NotElf => f.write_str("not an ELF file"),
            ElfError::NotLoadable => f.write_str("not an ELF executable or shared object"),
            ElfError::Corrupt(what) => write!(f, "corrupt ELF file ({what})"),
            ElfError::TooLarge { limit } => write!(
                f,
                "symbol tables too large for the symbol cache ({})",
                human(*limit)
            ),
            ElfError::Io(e) => write!(f, "read error: {e}"),
        }
    }
}

/// `12 MiB`, `40 KiB`, `64 bytes`.
pub(crate) fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// A section's bytes, refused beyond `max` (so a crafted header cannot make perfwatch
/// allocate what the file claims).
pub(crate) fn section_bytes<'d, Elf: FileHeader, R: ReadRef<'d>>(
    sh: &Elf::SectionHeader,
    endian: Elf::Endian,
    data: R,
    max: u64,
) -> Result<&'d [u8], ElfError> {
    if sh.sh_type(endian) == elf::SHT_NOBITS {
        return Ok(&[]);
    }
    let size: u64 = sh.sh_size(endian).into();
    if size > max {
        return Err(ElfError::TooLarge { limit: max });
    }
    sh.data(endian, data)
        .map_err(|_| ElfError::Corrupt("section outside the file"))
}
