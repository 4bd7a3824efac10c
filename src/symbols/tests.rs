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

#[test]
fn a_miss_where_no_symbols_will_ever_be_is_answered_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    // kptr_restrict's kallsyms: every address 0, so the kernel has no symbols, for good.
    let mut s = Symbolizer::new(crate::testkit::symbols::kernel(
        dir.path(),
        "0000000000000000 T _stext\n0000000000000000 T do_one\n",
    ));
    let r = Request::kernel(0xffffffff81000010);
    let first = s.resolve_one(&r);
    assert!(!first.is_known());
    assert_eq!(s.stats().cache_hits, 0);
    for _ in 0..3 {
        assert_eq!(s.resolve_one(&r).to_string(), first.to_string());
    }
    assert_eq!(s.stats().cache_hits, 3, "{:?}", s.stats());
    assert_eq!(s.stats().loads, 1);
}

#[test]
fn a_binary_that_will_never_be_read_answers_every_address_without_caching_each() {
    let dir = tempfile::tempdir().unwrap();
    // kptr_restrict's kallsyms: no kernel symbols, for good.
    let mut s = Symbolizer::new(crate::testkit::symbols::kernel(
        dir.path(),
        "0000000000000000 T _stext\n0000000000000000 T do_one\n",
    ));
    let first = s.resolve_one(&Request::kernel(0xffffffff81000010));
    assert!(!first.is_known());
    let cached = s.stats().cached_results;
    let requests: Vec<Request> = (0..5000u64)
        .map(|i| Request::kernel(0xffffffff81000000 + i * 16))
        .collect();
    let mut out = Vec::new();
    s.resolve(&requests, &mut out);
    assert_eq!(out.len(), requests.len());
    assert!(out.iter().all(|a| a.to_string() == first.to_string()));
    assert!(
        out.iter()
            .all(|a| std::sync::Arc::ptr_eq(a.symbol(), first.symbol()))
    );
    // Answered from the binary's state: no entry per address.
    assert_eq!(s.stats().cached_results, cached, "{:?}", s.stats());
    assert_eq!(s.stats().loads, 1);
}

#[test]
fn a_miss_where_a_read_may_still_succeed_is_never_served_stale() {
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("kallsyms");
    let mut s = Symbolizer::new(Config {
        kallsyms: k.clone(),
        modules: dir.path().join("none"),
        ..Config::default()
    });
    let r = Request::kernel(0xffffffff81000010);
    assert!(!s.resolve_one(&r).is_known());
    assert!(!s.resolve_one(&r).is_known());
    // The failure (no such file) is worth trying again: its unknown was not kept.
    assert_eq!(s.stats().cache_hits, 0, "{:?}", s.stats());
    std::fs::write(&k, "ffffffff81000000 T _stext\nffffffff81001000 T do_one\n").unwrap();
    // The retry is timed (once a second); the file is there now, so the name comes.
    let until = Instant::now() + RETRY_AFTER * 5;
    let mut named = s.resolve_one(&r);
    while !named.is_known() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        named = s.resolve_one(&r);
    }
    assert_eq!(named.to_string(), "_stext+0x10", "{:?}", s.stats());
}
