//! Tests of the symbolizer's caches and its kernel table.
// Still its own `unsafe` (test set-up (mkfifo)): not moved into src/sys/ yet (issue 24).
#![allow(unsafe_code)]

use super::*;

#[test]
fn the_symbolizer_moves_to_its_thread() {
    fn send<T: Send>() {}
    send::<Symbolizer>();
    send::<Symbolized>();
    send::<Request>();
    fn sync<T: Sync>() {}
    sync::<Symbolized>();
}

#[test]
fn the_memory_bound_counts_every_cache() {
    let c = Config::default();
    assert!(c.memory_bound() > c.table_budget);
    assert!(c.memory_bound() < 48 << 20, "{}", c.memory_bound());
}

#[test]
fn the_kernel_can_be_read_before_the_first_request() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("kallsyms");
    std::fs::write(&k, "ffffffff81000000 T _stext\nffffffff81001000 T do_one\n").unwrap();
    let mut s = Symbolizer::new(Config {
        kallsyms: k,
        preload_kernel: true,
        ..Config::default()
    });
    assert_eq!(s.stats().loads, 1);
    assert_eq!(
        s.resolve_one(&Request::kernel(0xffffffff81000010))
            .to_string(),
        "_stext+0x10"
    );
    assert_eq!(s.stats().loads, 1);
    assert_eq!(s.stats().loaded_binaries, 1);
}

#[test]
fn a_kallsyms_that_never_answers_holds_up_neither_the_start_nor_the_first_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("kallsyms");
    let c = std::ffi::CString::new(k.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let t0 = Instant::now();
    let mut s = Symbolizer::new(Config {
        kallsyms: k,
        preload_kernel: true,
        load_timeout: Duration::from_millis(300),
        ..Config::default()
    });
    assert!(
        t0.elapsed() < Duration::from_millis(200),
        "{:?}",
        t0.elapsed()
    );
    let a = s.resolve_one(&Request::kernel(0xffffffff81000010));
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(a.to_string(), UNKNOWN);
    let notes = s.take_notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    // Refused as what it is, or given up at the deadline: either way, said once.
    assert!(
        notes[0].message.contains("longer than") || notes[0].message.contains("FIFO"),
        "{}",
        notes[0]
    );
}

#[test]
fn unknown_kernel_without_kallsyms_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Symbolizer::new(Config {
        kallsyms: dir.path().join("none"),
        modules: dir.path().join("none"),
        ..Config::default()
    });
    let a = s.resolve_one(&Request::kernel(0xffffffff81000000));
    assert!(!a.is_known());
    assert_eq!(a.dso().name(), "[kernel.kallsyms]");
    assert!(a.is_kernel());
    let _ = s.resolve_one(&Request::kernel(0xffffffff81000010));
    let notes = s.take_notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0]
            .to_string()
            .starts_with("[kernel.kallsyms]: cannot read")
    );
}
