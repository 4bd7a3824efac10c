//! Make the binary run the libpython and the standard library it was built against, also
//! under `sudo`, and whatever the environment says.
//!
//! pyo3 links `libpythonX.Y.so` from the interpreter's LIBDIR but leaves finding it at run
//! time to the loader. With a pyenv (or any non-system) Python that directory is not in the
//! loader's path, and `sudo` clears LD_LIBRARY_PATH: the binary would fail to start, or, worse,
//! pick up a different system libpython of the same version. An rpath to the LIBDIR the
//! build used fixes both. It is a DT_RPATH (`--disable-new-dtags`), not the linker's default
//! DT_RUNPATH: the loader searches DT_RPATH before LD_LIBRARY_PATH, DT_RUNPATH after it, so
//! only DT_RPATH keeps an LD_LIBRARY_PATH from swapping libpython (tests/script.rs checks
//! both the tag and the behaviour).
//!
//! The interpreter's prefix, executable and version go into the binary too
//! (`PERFWATCH_PYTHON_*`): src/script/interp.rs pins Python's home to that prefix instead of
//! letting it be searched for near the binary.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "python")]
    {
        let cfg = pyo3_build_config::get();
        if cfg.shared() {
            if let Some(dir) = cfg.lib_dir() {
                println!("cargo:rustc-link-arg=-Wl,--disable-new-dtags");
                println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
            }
        }
        if let Some(exe) = cfg.executable() {
            let out = std::process::Command::new(exe)
                .args([
                    "-I",
                    "-S",
                    "-c",
                    "import sys; print(sys.base_prefix); print(sys.executable); \
                     print('%d.%d' % sys.version_info[:2])",
                ])
                .output();
            if let Some(out) = out.ok().filter(|o| o.status.success()) {
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let mut lines = text.lines();
                for key in ["HOME", "EXECUTABLE", "VERSION"] {
                    if let Some(v) = lines.next().filter(|v| !v.is_empty()) {
                        println!("cargo:rustc-env=PERFWATCH_PYTHON_{key}={v}");
                    }
                }
            }
        }
    }
}
