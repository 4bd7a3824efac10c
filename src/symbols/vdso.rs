//! The vDSO: the kernel maps the same image into every process of one ABI, so perfwatch can
//! read its own copy instead of another process's memory. Whether a process's `[vdso]` is the
//! same image is checked, not assumed: by build id when the mapping carries one, else by
//! comparing the process's copy (`/proc/PID/mem`) while it lives. A vDSO that cannot be checked
//! stays `[unknown]`.
use std::sync::OnceLock;

/// perfwatch's own vDSO image, as mapped into this process.
pub(crate) fn own_image() -> Option<&'static [u8]> {
    crate::sys::vdso_image()
}

/// The build id of perfwatch's own vDSO.
pub(crate) fn own_build_id() -> Option<super::BuildId> {
    static ID: OnceLock<Option<super::BuildId>> = OnceLock::new();
    *ID.get_or_init(|| {
        let img = own_image()?;
        let mut builder = super::table::TableBuilder::new(0);
        let want = super::elf::Want {
            symtab: false,
            dynsym: false,
            runtime: false,
        };
        super::elf::read(img, want, &mut builder, 0).ok()?.build_id
    })
}

/// Read `len` bytes of process `pid` at `addr` (its vDSO), for comparison with ours.
pub(crate) fn read_process_memory(pid: u32, addr: u64, len: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    if len == 0 || len > 1 << 20 {
        return None;
    }
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_vdso_is_an_elf_image() {
        let Some(img) = own_image() else {
            crate::skip_test(
                "symbols::vdso::tests::our_vdso_is_an_elf_image",
                "no vDSO in this process",
            );
            return;
        };
        assert_eq!(&img[..4], b"\x7fELF");
        // Our own memory, read through /proc, is the same image.
        if let Some(copy) =
            read_process_memory(std::process::id(), img.as_ptr() as u64, img.len() as u64)
        {
            assert_eq!(copy, img);
        }
    }
}
