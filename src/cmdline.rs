//! A process's command line as evidence: where it came from, whether it was cut, and how it
//! is shown so that a cut can be neither hidden nor forged.
//!
//! Two sources, of different worth:
//!
//! - [`ArgvSource::Exec`]: the argument strings as `execve` laid them out on the new
//!   program's stack, copied by the kernel into a `sched:sched_process_exec` sample (its user
//!   stack, from the new stack pointer up) inside the `execve` call, before any instruction
//!   of the new program ran. The program cannot have rewritten them; the caller of `execve`
//!   chose them freely (argv\[0\] is any string it likes). [`from_exec_stack`] reads them.
//! - [`ArgvSource::Proc`]: `/proc/PID/cmdline`, read after the exec was seen. By then the
//!   program may have rewritten its own argument area (`setproctitle`, `prctl(PR_SET_MM)`),
//!   so this shows what the process says about itself.
//!
//! At most [`MAX_ARGV`] bytes are kept; the rest is counted, and every output marks the cut
//! with `…[+N bytes]`. A `…` inside an argument is written `\u{2026}` (see [`escape_arg`]), so
//! that the mark cannot be typed into a command line to fake one.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Bytes of a command line kept at most (NUL-separated, without the last NUL).
pub const MAX_ARGV: usize = 4096;

/// How far above the stack pointer arguments are looked for: the kernel places the strings
/// up to 8 KiB (a random gap, `arch_align_stack`) plus the pointer arrays and the auxiliary
/// vector above it.
pub(crate) const STACK_DUMP: u32 = 16384;

/// Where a command line was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgvSource {
    /// The kernel's copy of the new stack at the exec (see the module's doc).
    Exec,
    /// `/proc/PID/cmdline`, after the exec.
    Proc,
    /// Not read: the process had exited or exec'd again first.
    Gone,
}

impl ArgvSource {
    /// The name `--json` and scripts give it.
    pub fn name(self) -> &'static str {
        match self {
            ArgvSource::Exec => "exec",
            ArgvSource::Proc => "proc",
            ArgvSource::Gone => "gone",
        }
    }
}

/// A command line (untrusted bytes), as read from one of its sources.
#[derive(Clone, PartialEq, Eq)]
pub struct CmdLine {
    /// The arguments, each followed by a NUL but the last (the layout of
    /// `/proc/PID/cmdline` less its final NUL), at most [`MAX_ARGV`] bytes.
    bytes: Box<[u8]>,
    /// Bytes of the command line that were not kept.
    cut: u64,
    from: ArgvSource,
}

impl std::fmt::Debug for CmdLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CmdLine({:?}, {}, {:?})",
            self.line(),
            self.cut,
            self.from
        )
    }
}

impl CmdLine {
    /// The start `raw` of an area in the layout of `/proc/PID/cmdline` (every argument
    /// NUL-terminated) and the count of its `more` bytes that were not read: kept up to
    /// [`MAX_ARGV`] bytes, the rest counted (the final NUL is not part of the command line).
    pub fn new(raw: &[u8], more: u64, from: ArgvSource) -> CmdLine {
        let total = raw.len() as u64 + more;
        let ends_in_nul = more > 0 || raw.last() == Some(&0);
        let body = if ends_in_nul { total - 1 } else { total };
        let kept = (raw.len() as u64).min(body).min(MAX_ARGV as u64) as usize;
        CmdLine {
            bytes: raw[..kept].into(),
            cut: body - kept as u64,
            from,
        }
    }

    /// The marker of a process gone before its command line could be read.
    pub fn gone() -> CmdLine {
        CmdLine {
            bytes: Box::default(),
            cut: 0,
            from: ArgvSource::Gone,
        }
    }

    /// As an `Arc`, the way the process model shares it.
    pub fn shared(self) -> Arc<CmdLine> {
        Arc::new(self)
    }

    pub fn source(&self) -> ArgvSource {
        self.from
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.from == ArgvSource::Gone
    }

    /// Bytes that were not kept (0: the whole command line is here).
    pub fn cut(&self) -> u64 {
        self.cut
    }

    /// The kept bytes, NUL-separated (untrusted).
    pub fn raw(&self) -> &[u8] {
        &self.bytes
    }

    /// The arguments (raw, untrusted); none when gone.
    pub fn args(&self) -> impl Iterator<Item = &[u8]> {
        let none = self.is_gone();
        self.bytes
            .split(|&b| b == 0)
            .take(if none { 0 } else { usize::MAX })
    }

    /// The mark of a cut, `…[+N bytes]`, when something was not kept.
    pub(crate) fn cut_mark(&self) -> Option<String> {
        (self.cut > 0).then(|| format!("…[+{} bytes]", self.cut))
    }

    /// Each argument escaped ([`escape_arg`]), the last one followed by the cut mark.
    pub(crate) fn escaped_args(&self) -> Vec<String> {
        let mut v: Vec<String> = self.args().map(escape_arg).collect();
        if let (Some(mark), Some(last)) = (self.cut_mark(), v.last_mut()) {
            last.push_str(&mark);
        }
        v
    }

    /// For a screen: the escaped arguments joined by spaces, with the cut mark.
    pub fn line(&self) -> String {
        self.escaped_args().join(" ")
    }

    /// As [`CmdLine::line`], the first argument without its directory (`spin -x` for
    /// `/usr/local/bin/spin -x`): for a column too narrow for the whole line.
    pub(crate) fn short_line(&self) -> String {
        let mut args = self.escaped_args();
        if let Some(first) = args.first_mut() {
            if let Some((_, base)) = first.rsplit_once('/').filter(|(_, b)| !b.is_empty()) {
                *first = base.to_string();
            }
        }
        args.join(" ")
    }

    /// The line for a column `width` characters wide: the whole line when it fits, else
    /// [`CmdLine::short_line`].
    pub(crate) fn line_within(&self, width: usize) -> String {
        let line = self.line();
        if line.chars().count() <= width {
            line
        } else {
            self.short_line()
        }
    }

    /// For Python: each argument decoded (undecodable bytes as U+FFFD), the last one
    /// followed by the cut mark.
    pub fn lossy_args(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .args()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if let (Some(mark), Some(last)) = (self.cut_mark(), v.last_mut()) {
            last.push_str(&mark);
        }
        v
    }
}

/// An argument as the screen and `--json` show it: escaped as every untrusted text
/// ([`crate::text::escape`]), and a `…` of its own written `\u{2026}`, so that only perfwatch
/// writes the cut mark.
pub(crate) fn escape_arg(arg: &[u8]) -> String {
    let s = crate::text::escape(arg);
    if s.contains('…') {
        s.replace('…', "\\u{2026}")
    } else {
        s
    }
}

/// The command line of `pid` from `/proc/PID/cmdline` (under `root`), at most [`MAX_ARGV`]
/// bytes kept and the rest counted: for a cut one, the length of the argument area comes from
/// `/proc/PID/stat` (one read, however long the command line), else from reading on. `None`
/// when it cannot be read or is empty (a kernel thread, a zombie).
pub(crate) fn read_proc(root: &Path, pid: u32) -> Option<CmdLine> {
    let dir = root.join(pid.to_string());
    let mut f = std::fs::File::open(dir.join("cmdline")).ok()?;
    let mut buf = Vec::with_capacity(256);
    (&mut f)
        .take(MAX_ARGV as u64 + 1)
        .read_to_end(&mut buf)
        .ok()?;
    if buf.is_empty() {
        return None;
    }
    let mut more = 0;
    if buf.len() > MAX_ARGV {
        let span = std::fs::read(dir.join("stat"))
            .ok()
            .and_then(|s| parse_arg_span(&s));
        more = match span {
            Some(n) if n > buf.len() as u64 => n - buf.len() as u64,
            _ => std::io::copy(&mut f, &mut std::io::sink()).unwrap_or(0),
        };
    }
    Some(CmdLine::new(&buf, more, ArgvSource::Proc))
}

/// The length of the argument area (`arg_end - arg_start`, fields 48 and 49 of
/// `/proc/PID/stat`, shown to a reader allowed to trace the process).
pub(crate) fn parse_arg_span(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    // Field 3 (the state) is the first after the name: fields 48 and 49 are the 46th and
    // 47th after it.
    let mut f = rest.split_ascii_whitespace().skip(45);
    let (start, end): (u64, u64) = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
    end.checked_sub(start).filter(|n| *n > 0)
}

/// `AT_EXECFN`: the auxiliary vector's pointer to the file name string, which follows the
/// environment strings (and so ends the arguments when there is no environment).
const AT_EXECFN: u64 = 31;
/// Arguments read from a stack at most (a bound on the pointer walk, not on the kernel).
const MAX_ARGS: u64 = 1 << 20;

/// The command line from the user stack of an exec: `dump` holds the bytes from the new
/// stack pointer `sp` up (as `PERF_SAMPLE_STACK_USER` copies them), with pointers of 8
/// bytes (`wide`) or 4 (a 32-bit program). The stack starts with `argc`, the argument
/// pointers and a NULL, the environment pointers and a NULL, then the auxiliary vector; the
/// argument strings lie one after the other above them, followed by the environment strings
/// and the file name. `None` when the dump does not hold that shape, or holds none of the
/// strings (the caller then reads `/proc`).
pub(crate) fn from_exec_stack(dump: &[u8], sp: u64, wide: bool) -> Option<CmdLine> {
    let w = if wide { 8 } else { 4 };
    let word = |i: u64| -> Option<u64> {
        let at = usize::try_from(i.checked_mul(w)?).ok()?;
        let b = dump.get(at..at + w as usize)?;
        Some(if wide {
            u64::from_le_bytes(b.try_into().ok()?)
        } else {
            u32::from_le_bytes(b.try_into().ok()?) as u64
        })
    };
    let argc = word(0)?;
    if argc == 0 || argc > MAX_ARGS {
        return None;
    }
    let first = word(1)?;
    let last = word(argc)?;
    if word(argc + 1)? != 0 {
        return None;
    }
    // The end of the argument strings: the first environment string, else the file name.
    let mut i = argc + 2;
    let env0 = word(i)?;
    while word(i)? != 0 {
        i += 1;
        if i - argc > MAX_ARGS {
            return None;
        }
    }
    let end = if env0 != 0 {
        env0
    } else {
        let mut at = i + 1;
        loop {
            let (key, val) = (word(at)?, word(at + 1)?);
            match key {
                0 => return None,
                AT_EXECFN => break val,
                _ => at += 2,
            }
        }
    };
    if first < sp || last < first || end <= last {
        return None;
    }
    let start = usize::try_from(first - sp).ok()?;
    let total = end - first;
    let have = dump.len().checked_sub(start).filter(|n| *n > 0)?;
    let take = (total as usize).min(have).min(MAX_ARGV + 1);
    let raw = &dump[start..start + take];
    // The kernel NUL-terminates every argument: the last byte of the area is a NUL.
    if take as u64 == total && raw.last() != Some(&0) {
        return None;
    }
    Some(CmdLine::new(raw, total - take as u64, ArgvSource::Exec))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack as the kernel builds it at `sp`: argc, pointers, auxv, a gap, then the
    /// strings; pointer width `w`.
    fn stack(sp: u64, args: &[&[u8]], env: &[&[u8]], gap: usize, w: usize) -> Vec<u8> {
        let words = 1 + args.len() + 1 + env.len() + 1 + 4;
        let strings_at = sp + (words * w + gap) as u64;
        let mut strings = Vec::new();
        let mut ptrs = Vec::new();
        for a in args.iter().chain(env) {
            ptrs.push(strings_at + strings.len() as u64);
            strings.extend_from_slice(a);
            strings.push(0);
        }
        let execfn = strings_at + strings.len() as u64;
        strings.extend_from_slice(b"/bin/x\0");
        let mut out = Vec::new();
        let mut push = |v: u64| {
            if w == 8 {
                out.extend_from_slice(&v.to_le_bytes())
            } else {
                out.extend_from_slice(&(v as u32).to_le_bytes())
            }
        };
        push(args.len() as u64);
        for p in &ptrs[..args.len()] {
            push(*p);
        }
        push(0);
        for p in &ptrs[args.len()..] {
            push(*p);
        }
        push(0);
        for v in [AT_EXECFN, execfn, 0, 0] {
            push(v);
        }
        out.resize(words * w + gap, 0xaa);
        out.extend_from_slice(&strings);
        out
    }

    const SP: u64 = 0x7ffd_0000_1000;

    #[test]
    fn arguments_come_from_the_exec_stack_whole() {
        let s = stack(SP, &[b"/bin/echo", b"a b", b""], &[b"HOME=/root"], 100, 8);
        let c = from_exec_stack(&s, SP, true).unwrap();
        assert_eq!(c.raw(), b"/bin/echo\0a b\0");
        assert_eq!(c.escaped_args(), ["/bin/echo", "a b", ""]);
        assert_eq!((c.cut(), c.source()), (0, ArgvSource::Exec));
        assert_eq!(c.line(), "/bin/echo a b ");
        // Without an environment the file name ends them; a 32-bit stack too.
        let s = stack(0x1000, &[b"sh", b"-c", b"true"], &[], 8, 4);
        let c = from_exec_stack(&s, 0x1000, false).unwrap();
        assert_eq!(c.escaped_args(), ["sh", "-c", "true"]);
    }

    #[test]
    fn a_long_command_line_is_cut_with_the_exact_count() {
        let pad = vec![b'p'; 5000];
        let s = stack(
            SP,
            &[b"rm", &pad, b"--really-delete-everything"],
            &[b"A=1"],
            0,
            8,
        );
        let c = from_exec_stack(&s, SP, true).unwrap();
        assert_eq!(c.raw().len(), MAX_ARGV);
        // rm\0 + 5000 + \0 + 26, less what was kept.
        assert_eq!(c.cut(), (3 + 5001 + 26 - MAX_ARGV) as u64);
        let args = c.escaped_args();
        assert!(
            args[1].ends_with(&format!("p…[+{} bytes]", c.cut())),
            "{args:?}"
        );
        assert!(c.line().ends_with(" bytes]"));
        // Past the end of the dump: what the dump holds, and the count of the rest.
        let short = &s[..s.len() - 3000];
        let c = from_exec_stack(short, SP, true).unwrap();
        assert_eq!(c.cut() + c.raw().len() as u64, (3 + 5001 + 26) as u64);
    }

    #[test]
    fn stacks_of_another_shape_are_refused() {
        let good = stack(SP, &[b"a"], &[b"E=1"], 0, 8);
        assert!(from_exec_stack(&good, SP, true).is_some());
        for bad in [
            &good[..4],      // not even argc
            &good[..16],     // argv but no NULL
            &[0u8; 64][..],  // argc 0
            &[0xff; 64][..], // absurd argc
        ] {
            assert_eq!(from_exec_stack(bad, SP, true), None, "{bad:?}");
        }
        // Pointers below the stack pointer, or strings beyond the dump.
        assert_eq!(from_exec_stack(&good, SP + 0x100000, true), None);
        let far = stack(SP, &[b"a"], &[b"E=1"], 20000, 8);
        assert_eq!(from_exec_stack(&far[..STACK_DUMP as usize], SP, true), None);
        // A last argument without its NUL.
        let mut open = stack(SP, &[b"abc"], &[b"E=1"], 0, 8);
        let at = open.len() - b"E=1\0/bin/x\0".len() - 1;
        open[at] = b'x';
        assert_eq!(from_exec_stack(&open, SP, true), None);
    }

    #[test]
    fn marks_cannot_be_forged_and_hostile_bytes_are_escaped() {
        let c = CmdLine::new(
            b"echo\0x\xe2\x80\xa6[+5 bytes]\0\x1b[2J\0",
            0,
            ArgvSource::Proc,
        );
        assert_eq!(c.cut_mark(), None);
        assert_eq!(c.line(), "echo x\\u{2026}[+5 bytes] \\x1b[2J");
        assert_eq!(c.lossy_args()[1], "x…[+5 bytes]");
        let cut = CmdLine::new(&vec![b'a'; MAX_ARGV + 10], 5, ArgvSource::Proc);
        // 10 bytes past the kept ones, 5 unread, the last of which is the final NUL.
        assert_eq!(cut.cut(), 14);
        assert_eq!(cut.lossy_args()[0].len(), MAX_ARGV + "…[+14 bytes]".len());
        let long = CmdLine::new(
            b"/usr/local/bin/spin\0--threads\x001\0",
            0,
            ArgvSource::Exec,
        );
        assert_eq!(long.line_within(40), "/usr/local/bin/spin --threads 1");
        assert_eq!(long.line_within(20), "spin --threads 1");
        assert_eq!(
            CmdLine::new(b"dir/\0x\0", 0, ArgvSource::Exec).short_line(),
            "dir/ x"
        );
        let g = CmdLine::gone();
        assert!(g.is_gone() && g.args().next().is_none() && g.line().is_empty());
    }
}
