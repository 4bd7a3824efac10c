//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::sync::OnceLock;

/// True when this process may open system-wide perf events. When the kernel refuses, the
/// test that asked is skipped with a loud message, except under `CI=true`, where a refusal
/// is a failure: CI runs as root and must exercise the real kernel.
pub fn perf_allowed() -> bool {
    static ALLOWED: OnceLock<Result<(), String>> = OnceLock::new();
    let r = ALLOWED.get_or_init(|| {
        let mut attr = perf_event_open_sys::bindings::perf_event_attr {
            type_: perf_event_open_sys::bindings::PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<perf_event_open_sys::bindings::perf_event_attr>() as u32,
            config: perf_event_open_sys::bindings::PERF_COUNT_SW_DUMMY as u64,
            ..Default::default()
        };
        attr.set_disabled(1);
        // SAFETY: a valid attr; the fd is closed right away.
        let fd = unsafe { perf_event_open_sys::perf_event_open(&mut attr, -1, 0, -1, 0) };
        if fd >= 0 {
            unsafe { libc::close(fd) };
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().to_string())
        }
    });
    match r {
        Ok(()) => true,
        Err(e) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(!ci, "CI=true but perf_event_open is refused ({e}): CI must run these tests for real, as root");
            eprintln!(
                "\n!!!!!!!! SKIPPING: perf_event_open refused ({e}). Run as root or with \
                 kernel.perf_event_paranoid <= 0 to run this test. !!!!!!!!\n"
            );
            false
        }
    }
}

/// Skip the calling test (return early) unless perf events may be opened.
#[macro_export]
macro_rules! require_perf {
    () => {
        if !common::perf_allowed() {
            return;
        }
    };
}
