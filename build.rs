//! Make the binary find the libpython it was built against, also under `sudo`.
//!
//! pyo3 links `libpythonX.Y.so` from the interpreter's LIBDIR but leaves finding it at run
//! time to the loader. With a pyenv (or any non-system) Python that directory is not in the
//! loader's path, and `sudo` clears LD_LIBRARY_PATH: the binary would fail to start, or, worse,
//! pick up a different system libpython of the same version. An rpath to the LIBDIR the
//! build used fixes both.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "python")]
    {
        let cfg = pyo3_build_config::get();
        if cfg.shared() {
            if let Some(dir) = cfg.lib_dir() {
                println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
            }
        }
    }
}
