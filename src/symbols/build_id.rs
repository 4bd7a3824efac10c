//! A binary's GNU build id: how a mapping names its file beyond its path (an MMAP2 record
//! carries it) and how a debug file is found for it.

use std::fmt;

/// A GNU build id (the ELF `NT_GNU_BUILD_ID` note) as an MMAP2 record carries it: at most
/// 20 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BuildId {
    len: u8,
    bytes: [u8; 20],
}

impl BuildId {
    /// The most an MMAP2 record holds.
    pub const MAX: usize = 20;

    /// A build id from its bytes (longer ones keep their first 20); `None` when empty.
    pub fn new(b: &[u8]) -> Option<BuildId> {
        if b.is_empty() {
            return None;
        }
        let len = b.len().min(Self::MAX);
        let mut bytes = [0; Self::MAX];
        bytes[..len].copy_from_slice(&b[..len]);
        Some(BuildId {
            len: len as u8,
            bytes,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Lower-case hex, as in `/usr/lib/debug/.build-id/xx/yyyy.debug`.
    pub(crate) fn to_hex(self) -> String {
        self.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BuildId({})", self.to_hex())
    }
}
