//! The user registers and the copy of the user stack that `--call-graph dwarf` asks the
//! kernel for with each sample (PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER).
//!
//! A sample carries them from the reader to the unwind step, which turns them into the user
//! part of the sample's call chain and then drops them: 8 KiB a sample is too much to keep
//! in a history or hand to a script.

/// The user registers the unwinder starts from (x86_64: `bp`, `sp`, `ip`, the ones perf's
/// `PERF_REG_X86_{BP,SP,IP}` bits ask for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserRegs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// What a sample brought for unwinding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserStack {
    /// The registers; `None` when the sample has none (a kernel thread: ABI none) or they
    /// were cut short.
    pub regs: Option<UserRegs>,
    /// The bytes of the stack from `regs.sp` up, as many as the kernel could copy
    /// (`dyn_size`; empty when it could copy none).
    pub stack: Box<[u8]>,
}

impl UserStack {
    /// The 8 bytes at address `addr` of the copied stack, if the copy holds them.
    #[inline]
    pub(crate) fn read_u64(&self, addr: u64) -> Option<u64> {
        let sp = self.regs?.sp;
        let off = usize::try_from(addr.checked_sub(sp)?).ok()?;
        let b = self.stack.get(off..off.checked_add(8)?)?;
        Some(u64::from_ne_bytes(b.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_inside_the_copy() {
        let mut stack = vec![0u8; 24];
        stack[8..16].copy_from_slice(&0x1234u64.to_ne_bytes());
        let s = UserStack {
            regs: Some(UserRegs {
                ip: 1,
                sp: 0x1000,
                bp: 0,
            }),
            stack: stack.into(),
        };
        assert_eq!(s.read_u64(0x1008), Some(0x1234));
        assert_eq!(s.read_u64(0x1010), Some(0));
        assert_eq!(s.read_u64(0x1011), None);
        assert_eq!(s.read_u64(0xff8), None);
        assert_eq!(s.read_u64(u64::MAX), None);
        let none = UserStack {
            regs: None,
            stack: Box::new([0; 8]),
        };
        assert_eq!(none.read_u64(0), None);
    }
}
