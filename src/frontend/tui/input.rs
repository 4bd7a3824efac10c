//! Keys, in htop / perf top habits, mapped to what they do. Kept apart from the app so the
//! help overlay and the footer list exactly the keys that work.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::replay::ReplayCmd;

/// What a key asks for (outside filter editing, which takes text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Quit,
    Pause,
    EditFilter,
    FocusNext,
    FocusPrev,
    Up(usize),
    Down(usize),
    PageUp,
    PageDown,
    Home,
    End,
    Clear,
    Help,
    /// Enter: narrow to the selected task, or zoom into the selected symbol.
    Select,
    /// Esc: back from a narrowing or zoom.
    Back,
    /// `+` / `-`: a symbol's callers (with call chains).
    Expand,
    Collapse,
    /// `a`: Top symbols over the last seconds or since start.
    Span,
    /// `s`: the next order of Top symbols.
    Sort,
    /// `S`: periodic samples in the event log, or not.
    Samples,
    /// `t`: the process tree in the task pane, or the stream.
    Tree,
    /// `H`: Top tasks per thread, or per process.
    Threads,
    /// `z`: the focused pane on the whole screen, or back.
    Zoom,
    /// `<` `>` `[` `]` `{` `}`: a recording's replay (speed, jumps).
    Replay(ReplayCmd),
    None,
}

/// What a pane did with a key it was given (each pane's `on_key`, dispatched by focus).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Handled {
    /// Done (or nothing to do).
    Done,
    /// Not a key of this pane: the app decides.
    Not,
    /// Enter on a task: narrow the views to it.
    Narrow(u32),
    /// Why the key did nothing, for the footer.
    Say(&'static str),
}

/// What Enter says when no row is selected.
pub(crate) const NOTHING_SELECTED: &str = "Enter: select a task or a symbol first";

/// A scrolling key as rows to move (negative: up), a page being `page` rows.
pub(crate) fn scroll_delta(a: Action, page: usize) -> Option<isize> {
    let page = page.max(1) as isize;
    match a {
        Action::Up(n) => Some(-(n as isize)),
        Action::Down(n) => Some(n as isize),
        Action::PageUp => Some(-page),
        Action::PageDown => Some(page),
        Action::Home => Some(isize::MIN / 2),
        Action::End => Some(isize::MAX / 2),
        _ => None,
    }
}

/// A list scrolled or selected from the top: `off` moved by `delta` within `len` rows.
pub fn down(off: usize, delta: isize, len: usize) -> usize {
    let v = off as isize + delta;
    v.clamp(0, len.saturating_sub(1) as isize) as usize
}

/// A stream counted back from the newest: up (negative) goes further back, until the oldest
/// row is at the top of a full page of `page` rows.
pub fn back(off: usize, delta: isize, len: usize, page: usize) -> usize {
    let v = off as isize - delta;
    v.clamp(0, len.saturating_sub(page.max(1)) as isize) as usize
}

/// The key table, as the help overlay shows it: (keys, what they do).
pub(crate) const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit"),
    ("space", "pause / resume the view (counting continues)"),
    (
        "/",
        "filter: live preview; Enter apply, Esc cancel, Ctrl-U clear",
    ),
    (
        "Tab, Shift-Tab",
        "move focus between panes (a pane that does not fit takes a place)",
    ),
    ("z", "zoom: the focused pane on the whole screen, and back"),
    ("Up/Down, k/j", "scroll the focused pane by a line"),
    ("PgUp/PgDn", "scroll by a page"),
    (
        "Home/End, g/G",
        "oldest / newest (End follows the tail again)",
    ),
    (
        "mouse",
        "wheel scrolls; a click focuses a pane and selects a row",
    ),
    ("c", "clear the event log"),
    (
        "Enter",
        "on a task: log, Top tasks, Top symbols of it and its children; on a symbol: its tasks",
    ),
    (
        "t",
        "task pane: the process tree / the fork-exec-exit stream",
    ),
    ("Esc", "back from a narrowed or zoomed view"),
    (
        "+/- Right/Left",
        "Top symbols with -g: open / close a symbol's callers; the log: scroll sideways",
    ),
    ("a", "Top symbols: last 10 s / since start"),
    (
        "s",
        "sort Top symbols (samples, self, binary) or, focused, Top tasks (samples, id, name)",
    ),
    ("H", "Top tasks per thread / per process"),
    (
        "S",
        "samples in the event log too (or a filter naming them)",
    ),
    ("?", "this help (any key closes it)"),
];

/// The replay keys (a recording: `perfwatch -i FILE` on a terminal), as the help overlay and
/// the man page show them.
pub(crate) const REPLAY_KEYS: &[(&str, &str)] = &[
    (
        "space, p",
        "play / pause the replay (paused, nothing moves)",
    ),
    ("> / <", "faster / slower: 1x, 10x, as fast as it decodes"),
    ("] / [", "jump 10 s on / back (back reads the file again)"),
    ("} / {", "jump to the end / the start"),
];

pub(crate) fn map_key(key: KeyEvent) -> Action {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match key.code {
        KeyCode::Char('q') | KeyCode::Char('Q') if !ctrl => Action::Quit,
        KeyCode::Char('c') if ctrl => Action::Quit,
        KeyCode::Char(' ') | KeyCode::Char('p') => Action::Pause,
        KeyCode::Char('/') => Action::EditFilter,
        KeyCode::Tab => Action::FocusNext,
        KeyCode::BackTab => Action::FocusPrev,
        KeyCode::Up | KeyCode::Char('k') => Action::Up(1),
        KeyCode::Down | KeyCode::Char('j') => Action::Down(1),
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Home,
        KeyCode::End | KeyCode::Char('G') => Action::End,
        KeyCode::Char('c') => Action::Clear,
        KeyCode::Char('?') | KeyCode::F(1) => Action::Help,
        KeyCode::Enter => Action::Select,
        KeyCode::Esc => Action::Back,
        KeyCode::Char('+') | KeyCode::Right => Action::Expand,
        KeyCode::Char('-') | KeyCode::Left => Action::Collapse,
        KeyCode::Char('a') => Action::Span,
        KeyCode::Char('s') => Action::Sort,
        KeyCode::Char('S') => Action::Samples,
        KeyCode::Char('t') => Action::Tree,
        KeyCode::Char('H') => Action::Threads,
        KeyCode::Char('z') => Action::Zoom,
        KeyCode::Char('>') => Action::Replay(ReplayCmd::Faster),
        KeyCode::Char('<') => Action::Replay(ReplayCmd::Slower),
        KeyCode::Char(']') => Action::Replay(ReplayCmd::Forward),
        KeyCode::Char('[') => Action::Replay(ReplayCmd::Back),
        KeyCode::Char('}') => Action::Replay(ReplayCmd::ToEnd),
        KeyCode::Char('{') => Action::Replay(ReplayCmd::ToStart),
        _ => Action::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_keys() {
        let k = |c| KeyEvent::new(c, KeyModifiers::NONE);
        assert_eq!(map_key(k(KeyCode::Char('q'))), Action::Quit);
        assert_eq!(
            map_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Action::Quit
        );
        assert_eq!(map_key(k(KeyCode::Char('c'))), Action::Clear);
        assert_eq!(map_key(k(KeyCode::Char(' '))), Action::Pause);
        assert_eq!(map_key(k(KeyCode::BackTab)), Action::FocusPrev);
        assert_eq!(map_key(k(KeyCode::Char('x'))), Action::None);
        assert_eq!(
            map_key(k(KeyCode::Char('['))),
            Action::Replay(ReplayCmd::Back)
        );
        assert_eq!(
            map_key(k(KeyCode::Char('}'))),
            Action::Replay(ReplayCmd::ToEnd)
        );
    }
}
