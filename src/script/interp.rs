//! The embedded interpreter, started the way `python3 -I -P` starts, before anything else in
//! perfwatch touches Python.
//!
//! perfwatch runs as root and runs Python. An interpreter started with the defaults reads
//! `PYTHONPATH`, `PYTHONHOME`, `PYTHONSTARTUP`-like variables, adds the user's site-packages
//! and (for a script) the script's directory at the front of `sys.path`: any of these lets
//! another user's file be imported as root, even by perfwatch's own later imports (formatting
//! a traceback imports `traceback` and `linecache`). So the interpreter is started from an
//! isolated `PyConfig`:
//!
//! - `isolated`, no environment variables, no user site directory, no script directory
//!   (`safe_path` is part of the isolated configuration from Python 3.11 on; earlier versions
//!   never add one when embedded);
//! - `home` pinned to the prefix of the interpreter perfwatch was built against (from
//!   build.rs), so that neither a `pyvenv.cfg` near the binary nor a stray landmark decides
//!   where the standard library comes from;
//! - no signal handlers: perfwatch owns SIGINT and the other signals;
//! - started on the thread that loads the scripts, before the Python thread exists, so that
//!   the Python thread is not Python's "main thread" and `signal.signal()` refuses there.
//!
//! pyo3's `auto-initialize` is off: a `Python::attach` before [`init`] panics instead of
//! starting an interpreter with the defaults.
// Still its own `unsafe` (the Python C API (pyo3's ffi)): not moved into src/sys/ yet (issue 24).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;

/// The build interpreter's `sys.base_prefix` (build.rs).
const BUILD_HOME: Option<&str> = option_env!("PERFWATCH_PYTHON_HOME");
/// The build interpreter's `sys.executable` (build.rs).
const BUILD_EXECUTABLE: Option<&str> = option_env!("PERFWATCH_PYTHON_EXECUTABLE");
/// `X.Y` of the build interpreter.
const BUILD_VERSION: Option<&str> = option_env!("PERFWATCH_PYTHON_VERSION");

/// Start the interpreter once per process (later calls return the first outcome).
pub fn init() -> Result<(), String> {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    STARTED
        .get_or_init(|| {
            // SAFETY: called once (OnceLock), before any other use of the Python C API in
            // this process (pyo3's auto-initialize is off, so nothing else starts it).
            unsafe { start_isolated() }?;
            Python::attach(contain)
                .map_err(|e| format!("cannot set up the Python interpreter: {e}"))
        })
        .clone()
}

/// The directory to use as Python's home: the build's prefix, when the standard library is
/// still there.
fn home() -> Option<&'static str> {
    let home = BUILD_HOME?;
    let version = BUILD_VERSION?;
    std::path::Path::new(home)
        .join(format!("lib/python{version}/os.py"))
        .is_file()
        .then_some(home)
}

unsafe fn set(
    config: *mut ffi::PyConfig,
    field: *mut *mut libc::wchar_t,
    value: &str,
) -> Result<(), String> {
    let c = CString::new(value).map_err(|_| format!("bad Python path '{value}'"))?;
    // SAFETY: config is initialised, field points into it, c is NUL-terminated.
    let status = unsafe { ffi::PyConfig_SetBytesString(config, field, c.as_ptr()) };
    check(status)
}

fn check(status: ffi::PyStatus) -> Result<(), String> {
    // SAFETY: reading a status the C API returned.
    if unsafe { ffi::PyStatus_Exception(status) } == 0 {
        return Ok(());
    }
    let msg = if status.err_msg.is_null() {
        "unknown error".to_string()
    } else {
        // SAFETY: err_msg is a static NUL-terminated C string when set.
        unsafe { std::ffi::CStr::from_ptr(status.err_msg) }
            .to_string_lossy()
            .into_owned()
    };
    Err(format!("cannot start the Python interpreter: {msg}"))
}

unsafe fn start_isolated() -> Result<(), String> {
    let mut config = std::mem::MaybeUninit::<ffi::PyConfig>::zeroed();
    let c = config.as_mut_ptr();
    // SAFETY: c points to writable memory for a PyConfig, which this initialises.
    unsafe { ffi::PyConfig_InitIsolatedConfig(c) };
    let result = (|| {
        // SAFETY: c was initialised above; the fields are plain ints or owned strings.
        unsafe {
            (*c).isolated = 1;
            (*c).use_environment = 0;
            (*c).user_site_directory = 0;
            (*c).install_signal_handlers = 0;
            (*c).parse_argv = 0;
            (*c).configure_c_stdio = 0;
            (*c).pathconfig_warnings = 0;
            (*c).faulthandler = 0;
            (*c).write_bytecode = 0;
            if let Some(h) = home() {
                set(c, &raw mut (*c).home, h)?;
            }
            if let Some(exe) = BUILD_EXECUTABLE.filter(|e| std::path::Path::new(e).is_file()) {
                set(c, &raw mut (*c).program_name, exe)?;
            }
            check(ffi::Py_InitializeFromConfig(c))?;
            // Like pyo3's own start-up: the thread that started it lets go of the GIL.
            ffi::PyEval_SaveThread();
        }
        Ok(())
    })();
    // SAFETY: c was initialised; clearing frees the strings set above.
    unsafe { ffi::PyConfig_Clear(c) };
    result
}

/// Why each function is taken away from scripts: a fork leaves a copy of perfwatch holding
/// its perf events, its stdout and the terminal (`perfwatch | wc -l` never ends); `_exit`
/// ends perfwatch at once without its summary, with buffered output lost and the terminal
/// broken; an exec replaces perfwatch. `subprocess` and `os.posix_spawn` still work: they
/// start a new program at once.
const CONTAIN: &std::ffi::CStr = cr#"
def _contain(perfwatch):
    import os, posix

    class Unavailable(RuntimeError):
        """An os function a script cannot call inside perfwatch."""

    Unavailable.__module__ = "perfwatch"
    Unavailable.__qualname__ = "Unavailable"
    perfwatch.Unavailable = Unavailable
    fork = ("a copy of perfwatch would keep its perf events, its output and the terminal; "
            "use subprocess, which starts a new program at once")
    exec_ = "it would replace perfwatch; use subprocess"
    why = {
        "fork": fork,
        "forkpty": fork,
        "_exit": ("it would end perfwatch at once, without its summary and with output "
                  "lost; return from the handler or raise an exception instead"),
        "execv": exec_,
        "execve": exec_,
    }
    for name, reason in why.items():
        def refuse(*args, _name=name, _reason=reason, **kwargs):
            raise Unavailable(f"os.{_name}() is not available inside perfwatch: {_reason}")
        refuse.__name__ = name
        refuse.__qualname__ = name
        for mod in (os, posix):
            if hasattr(mod, name):
                setattr(mod, name, refuse)
"#;

/// Put the `perfwatch` module in place and take away what would let a script take the
/// monitor down.
fn contain(py: Python<'_>) -> PyResult<()> {
    super::module::install(py)?;
    let globals = pyo3::types::PyDict::new(py);
    py.run(CONTAIN, Some(&globals), None)?;
    let perfwatch = py.import("perfwatch")?;
    globals
        .get_item("_contain")?
        .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("no _contain"))?
        .call1((perfwatch,))?;
    Ok(())
}
