//! The vDSO: the kernel maps the same image into every process of one ABI, so perfwatch can
//! read its own copy instead of another process's memory. Whether a process's `[vdso]` is the
//! same image is checked, not assumed: by build id when the mapping carries one, else by
//! comparing the process's copy (`/proc/PID/mem`) while it lives. A vDSO that cannot be checked
//! stays `[unknown]`.
// Still its own `unsafe` (reads this process's vDSO image in place):
// not moved into src/sys/ yet (issue 24).
#![allow(unsafe_code)]

use std::sync::OnceLock;

/// perfwatch's own vDSO image, as mapped into this process.
pub(crate) fn own_image() -> Option<&'static [u8]> {
    static IMAGE: OnceLock<Option<&'static [u8]>> = OnceLock::new();
    *IMAGE.get_or_init(|| {
        let base = crate::sys::getauxval(libc::AT_SYSINFO_EHDR) as u64;
        if base == 0 {
            return None;
        }
        let maps = std::fs::read("/proc/self/maps").ok()?;
        let (start, end) = maps.split(|&b| b == b'\n').find_map(|line| {
            if !line.ends_with(b"[vdso]") {
                return None;
            }
            let range = line.split(|&b| b == b' ').next()?;
            let dash = range.iter().position(|&b| b == b'-')?;
            let s = u64::from_str_radix(std::str::from_utf8(&range[..dash]).ok()?, 16).ok()?;
            let e = u64::from_str_radix(std::str::from_utf8(&range[dash + 1..]).ok()?, 16).ok()?;
            Some((s, e))
        })?;
        if start != base || end <= start || end - start > 1 << 20 {
            return None;
        }
        // SAFETY: the kernel maps the vDSO readable at [start, end) for the life of the
        // process, and nothing in perfwatch unmaps it.
        Some(unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) })
    })
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
