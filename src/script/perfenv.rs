//! The environment `perf script -s` gives a script, given by perfwatch to a script written
//! for it (see [`super::perfstyle`] for how one is told apart):
//!
//! - `PERF_EXEC_PATH`, which every shipped script reads to find perf's helpers: the
//!   installed perf's directory (`/usr/lib/perf-core` on Debian) when its Perf-Trace-Util
//!   library is there and passes the same ownership walk as a script
//!   ([`super::safety::open_script`]); the library's directory goes on `sys.path` too;
//! - where it is not installed (or does not pass), perfwatch's own `Core` and `Util` modules
//!   and `EventClass` (`perf_trace/*.py`, in the binary) answer `from Core import *` and the
//!   like, through an importer of perfwatch's own last on `sys.meta_path`, and `PERF_EXEC_PATH` names a directory under `/usr/lib` that
//!   nobody but root can create;
//! - `perf_trace_context`, perfwatch's own module: `common_pc`, `common_flags`,
//!   `common_lock_depth` of the tracepoint record being handled, `perf_script_context`,
//!   and the Intel PT helpers, which answer that there is nothing;
//! - `sys.argv`: the script's path, then every `--script-arg`.
//!
//! `PERF_EXEC_PATH` is put in `os.environ`'s mapping without `putenv`: the process's own
//! environment stays as it was (a command perfwatch starts does not inherit it, and no
//! other thread can be reading the environment while it changes).

use std::cell::Cell;
use std::path::Path;
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyModule};

/// Where Debian's perf keeps its scripts' helpers, as perf's `PERF_EXEC_PATH`.
pub const PERF_EXEC_PATH: &str = "/usr/lib/perf-core";
/// The helpers' directory under it.
const TRACE_UTIL: &str = "scripts/python/Perf-Trace-Util/lib/Perf/Trace";
/// Set (to anything) to serve perfwatch's own modules even where perf's are installed
/// (what a machine without them sees; the tests use it). It only narrows what is imported.
pub const BUILTIN_ENV: &str = "PERFWATCH_BUILTIN_PERF_TRACE";

const CORE_PY: &str = include_str!("perf_trace/Core.py");
const UTIL_PY: &str = include_str!("perf_trace/Util.py");
const EVENT_CLASS_PY: &str = include_str!("perf_trace/EventClass.py");

/// Which helpers serve the perf scripts of this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Library {
    /// perf's, in this directory (it passed the ownership walk).
    Installed(String),
    /// perfwatch's own; the reason perf's is not used, when it is there.
    Builtin(Option<String>),
}

/// Decide once per run.
pub fn library() -> &'static Library {
    static LIB: OnceLock<Library> = OnceLock::new();
    LIB.get_or_init(|| {
        if std::env::var_os(BUILTIN_ENV).is_some() {
            return Library::Builtin(None);
        }
        let dir = Path::new(PERF_EXEC_PATH).join(TRACE_UTIL);
        judge_library(&dir, super::safety::Invoker::current())
    })
}

/// Perf-Trace-Util in `dir`, if its modules and `dir` pass the walk a script passes (and
/// `dir` is one that could go on the import path).
pub fn judge_library(dir: &Path, who: super::safety::Invoker) -> Library {
    if !dir.join("Core.py").exists() {
        return Library::Builtin(None);
    }
    for m in ["Core.py", "Util.py"] {
        match super::safety::open_script(&dir.join(m), false, who) {
            Ok(s) if s.import_dir.is_some() => {}
            Ok(s) => return Library::Builtin(s.import_note),
            Err(e) => return Library::Builtin(Some(e.to_string())),
        }
    }
    Library::Installed(dir.to_string_lossy().into_owned())
}

thread_local! {
    /// common_preempt_count, common_flags, common_lock_depth of the tracepoint record whose
    /// handler is running on this thread (-1: none, or the record has no such field).
    static COMMON: Cell<[i64; 3]> = const { Cell::new([-1; 3]) };
}

/// Set what `common_pc(context)` and the others answer, before a handler is called.
pub fn set_common(pc: i64, flags: i64, lock_depth: i64) {
    COMMON.with(|c| c.set([pc, flags, lock_depth]));
}

fn common(i: usize) -> i64 {
    COMMON.with(|c| c.get()[i])
}

/// The `context` every handler is given (perf's is a capsule of its scripting context):
/// the functions of `perf_trace_context` take it and read the record being handled.
#[pyclass(module = "perf_trace_context", name = "Context", frozen)]
pub struct Context;

#[pyfunction]
fn common_pc(_context: &Bound<'_, PyAny>) -> i64 {
    common(0)
}

#[pyfunction]
fn common_flags(_context: &Bound<'_, PyAny>) -> i64 {
    common(1)
}

#[pyfunction]
fn common_lock_depth(_context: &Bound<'_, PyAny>) -> i64 {
    common(2)
}

/// Intel PT's instruction bytes: perfwatch records no AUX data, so there are none.
#[pyfunction]
fn perf_sample_insn<'py>(py: Python<'py>, _context: &Bound<'py, PyAny>) -> Bound<'py, PyByteArray> {
    PyByteArray::new(py, &[])
}

/// Intel PT's decoding options: nothing to decode here (perf's answers -1 when it cannot).
#[pyfunction]
fn perf_set_itrace_options(_context: &Bound<'_, PyAny>, _options: &Bound<'_, PyAny>) -> i64 {
    -1
}

/// Source lines are not looked up: (None, 0), as perf gives for an unknown line.
#[pyfunction]
fn perf_sample_srcline(_context: &Bound<'_, PyAny>) -> (Option<String>, i64) {
    (None, 0)
}

#[pyfunction]
fn perf_sample_srccode(_context: &Bound<'_, PyAny>) -> (Option<String>, i64, Option<String>) {
    (None, 0, None)
}

/// `perf_trace_context`, registered in `sys.modules` (once).
fn install_context(py: Python<'_>) -> PyResult<()> {
    let modules = py.import("sys")?.getattr("modules")?;
    if modules.contains("perf_trace_context")? {
        return Ok(());
    }
    let m = PyModule::new(py, "perf_trace_context")?;
    m.add(
        "__doc__",
        "perfwatch's perf_trace_context, for scripts written for perf script",
    )?;
    m.add_class::<Context>()?;
    m.add("perf_script_context", Py::new(py, Context)?)?;
    m.add_function(wrap_pyfunction!(common_pc, &m)?)?;
    m.add_function(wrap_pyfunction!(common_flags, &m)?)?;
    m.add_function(wrap_pyfunction!(common_lock_depth, &m)?)?;
    m.add_function(wrap_pyfunction!(perf_sample_insn, &m)?)?;
    m.add_function(wrap_pyfunction!(perf_set_itrace_options, &m)?)?;
    m.add_function(wrap_pyfunction!(perf_sample_srcline, &m)?)?;
    m.add_function(wrap_pyfunction!(perf_sample_srccode, &m)?)?;
    modules.set_item("perf_trace_context", m)?;
    Ok(())
}

/// The `context` object handlers are given.
pub fn context(py: Python<'_>) -> PyResult<Py<PyAny>> {
    install_context(py)?;
    Ok(py
        .import("perf_trace_context")?
        .getattr("perf_script_context")?
        .unbind())
}

/// The importer of perfwatch's own modules: found when imported (last on `sys.meta_path`,
/// as perf's library is last on `sys.path`), run only then.
const FINDER: &std::ffi::CStr = cr#"
def _install(sources):
    import importlib.abc, importlib.util, sys

    class PerfTraceUtil(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """perfwatch's own Core, Util and EventClass for perf scripts."""

        def find_spec(self, name, path=None, target=None):
            if name not in sources:
                return None
            return importlib.util.spec_from_loader(name, self, origin="<perfwatch>/%s.py" % name)

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            code = compile(sources[module.__name__], module.__spec__.origin, "exec")
            exec(code, module.__dict__)

    if not any(type(f).__name__ == "PerfTraceUtil" for f in sys.meta_path):
        sys.meta_path.append(PerfTraceUtil())
"#;

/// perfwatch's own Core, Util and EventClass, importable from then on.
fn install_builtin(py: Python<'_>) -> PyResult<()> {
    let globals = pyo3::types::PyDict::new(py);
    py.run(FINDER, Some(&globals), None)?;
    let sources = pyo3::types::PyDict::new(py);
    sources.set_item("Core", CORE_PY)?;
    sources.set_item("Util", UTIL_PY)?;
    sources.set_item("EventClass", EVENT_CLASS_PY)?;
    if let Some(f) = globals.get_item("_install")? {
        f.call1((sources,))?;
    }
    Ok(())
}

const SET_ENV: &std::ffi::CStr = cr#"
def _set_env(key, value):
    import os
    try:
        # The mapping only: os.environ[key] = value would putenv() as well.
        os.environ._data[os.environ.encodekey(key)] = os.environ.encodevalue(value)
    except Exception:
        os.environ[key] = value
"#;

/// Give the Python interpreter perf script's environment, for the script at `path` with
/// `args` (its `sys.argv[1:]`), before the script's code runs.
pub fn prepare(py: Python<'_>, path: &Path, args: &[String]) -> PyResult<()> {
    install_context(py)?;
    let sys = py.import("sys")?;
    let exec_path = match library() {
        Library::Installed(dir) => {
            let sys_path = sys.getattr("path")?;
            if !sys_path.contains(dir.as_str())? {
                sys_path.call_method1("append", (dir.as_str(),))?;
            }
            PERF_EXEC_PATH.to_string()
        }
        Library::Builtin(_) => {
            install_builtin(py)?;
            // A directory under /usr/lib that is not there: a script that puts
            // `$PERF_EXEC_PATH/...` on sys.path adds a place only root could fill.
            "/usr/lib/perfwatch-no-perf-core".to_string()
        }
    };
    let globals = pyo3::types::PyDict::new(py);
    py.run(SET_ENV, Some(&globals), None)?;
    if let Some(set) = globals.get_item("_set_env")? {
        set.call1(("PERF_EXEC_PATH", exec_path))?;
    }
    let mut argv = vec![path.to_string_lossy().into_owned()];
    argv.extend(args.iter().cloned());
    sys.setattr("argv", argv)?;
    Ok(())
}

/// What to say once at start about the helpers used (None: nothing worth saying).
pub fn library_note() -> Option<String> {
    match library() {
        Library::Builtin(Some(why)) => Some(format!(
            "perf's Perf-Trace-Util library in {PERF_EXEC_PATH} is not used ({why}); \
             perfwatch's own Core, Util and EventClass modules serve the perf scripts"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn perfs_library_is_used_only_when_it_passes_the_walk() {
        let who = super::super::safety::Invoker::current();
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("Trace");
        assert_eq!(judge_library(&dir, who), Library::Builtin(None), "absent");
        std::fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        for m in ["Core.py", "Util.py"] {
            std::fs::write(dir.join(m), "x = 1\n").unwrap();
            chmod(&dir.join(m), 0o644);
        }
        assert!(
            matches!(judge_library(&dir, who), Library::Installed(_)),
            "{:?}",
            judge_library(&dir, who)
        );
        // A directory anyone can add a module to.
        chmod(&dir, 0o777);
        assert!(
            matches!(judge_library(&dir, who), Library::Builtin(Some(_))),
            "{:?}",
            judge_library(&dir, who)
        );
        chmod(&dir, 0o755);
        // A module anyone can rewrite (refused as root, as a script would be).
        chmod(&dir.join("Util.py"), 0o666);
        if who.euid == 0 {
            assert!(
                matches!(judge_library(&dir, who), Library::Builtin(Some(_))),
                "{:?}",
                judge_library(&dir, who)
            );
        }
    }
}
