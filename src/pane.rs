//! Messages from the script stage to a frontend: what a script wants shown in its pane.
//!
//! The TUI draws them in a pane titled with the script's name; `--plain` writes them to
//! stderr (or to `--script-output FILE`). Kept apart from both so that neither depends on
//! the other, nor on Python.

/// One message for a script's pane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaneMsg {
    /// Replace the pane's lines (what `on_tick()` returned).
    Lines { script: String, lines: Vec<String> },
    /// Append text to the pane's message area: `print()` output, or a traceback when
    /// `is_error`.
    Text {
        script: String,
        text: String,
        is_error: bool,
    },
}
