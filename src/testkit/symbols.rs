//! A crafted kernel for the symbolizer.

use std::path::Path;

use crate::symbols::Config;

/// A symbolizer configuration whose kernel is `kallsyms` (the text of a crafted
/// `/proc/kallsyms`, written into `dir`), with no modules.
pub fn kernel(dir: &Path, kallsyms: &str) -> Config {
    let path = dir.join("kallsyms");
    std::fs::write(&path, kallsyms).expect("write the crafted kallsyms");
    Config {
        kallsyms: path,
        modules: dir.join("no-modules"),
        ..Config::default()
    }
}
