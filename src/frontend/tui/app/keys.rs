//! The app's keys and mouse: the global keys (focus, pause, narrowing, the filter being
//! edited, ...), the one dispatch of the others to the focused pane's own `on_key` (in the
//! pane's file), and the click that focuses a pane.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use super::super::input::{Handled, NOTHING_SELECTED, down, scroll_delta};
use super::*;

impl App {
    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind == crossterm::event::KeyEventKind::Release {
            return;
        }
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return;
        }
        if self.edit.is_some() {
            self.on_edit_key(key);
            return;
        }
        if self.show_help {
            // Any key closes the help; q closes it rather than quitting by surprise.
            self.show_help = false;
            return;
        }
        self.message = None;
        match map_key(key) {
            Action::Quit => self.quit = true,
            // A replay's pause stops its clock: nothing moves (see `replay`).
            Action::Pause if self.replay.is_some() => self
                .replay_cmds
                .push(super::super::replay::ReplayCmd::PlayPause),
            Action::Pause => self.toggle_pause(),
            Action::Replay(cmd) if self.replay.is_some() => self.replay_cmds.push(cmd),
            Action::Replay(_) => {
                self.message =
                    Some("< > [ ] { } play a recording: perfwatch -i FILE (this is live)".into())
            }
            Action::EditFilter => {
                let text = self.filter().source().to_string();
                self.edit = Some(FilterEdit {
                    text,
                    error: None,
                    before: self.filter().clone(),
                });
            }
            Action::FocusNext => self.move_focus(1),
            Action::FocusPrev => self.move_focus(-1),
            Action::Clear => self.clear_log(),
            Action::Help => self.show_help = true,
            Action::Back => {
                if self.symbols.zoom != super::super::top_symbols::Zoom::None {
                    self.symbols.back();
                } else if self.narrow.is_some() {
                    self.set_narrow(None);
                } else {
                    self.message = Some("nothing to go back from".into());
                }
            }
            Action::Zoom => self.zoom = !self.zoom,
            Action::Tree => {
                self.tree = !self.tree;
                self.tree_view = Default::default();
                self.focus = Pane::Tasks;
            }
            Action::Span => self.symbols.toggle_span(),
            Action::Samples => {
                let shown = self.toggle_samples();
                self.message = Some(match (shown, self.filter().names_samples()) {
                    (true, false) => "the log shows samples (S hides them)".into(),
                    (true, true) => "the filter names samples: the log shows them".into(),
                    (false, _) => {
                        "samples hidden from the log (Top tasks and Top symbols count them)".into()
                    }
                });
            }
            Action::Threads => self.top.toggle_threads(),
            Action::None => {}
            a => self.pane_key(a),
        }
    }

    /// A key of the focused pane (scrolling, Enter, `+`/`-`, Right/Left, `s`): the one
    /// dispatch by focus; each pane's keys are in its own file.
    fn pane_key(&mut self, a: Action) {
        let page = self.drawn.page_rows.max(1);
        let data = self.frozen.as_deref().unwrap_or(&self.live);
        let narrow = Narrow::pids_of(&self.narrow);
        let handled = match self.focus {
            Pane::Log => self.log.on_key(a, data.log_len(), page),
            Pane::Tasks if self.tree => {
                let rows = self.tree_rows_unnamed();
                self.tree_view.on_key(a, &rows, page)
            }
            Pane::Tasks => self.stream.on_key(a, data.task_rows(), page),
            Pane::Top => {
                let rows = self.top_rows();
                self.top.on_key(a, &rows, page)
            }
            Pane::Symbols => self.symbols.on_key(a, &data.symbols, narrow, page),
            Pane::Cpus => match scroll_delta(a, page) {
                Some(d) => {
                    self.cpu_scroll = down(self.cpu_scroll, d, data.rates.cpus().len() + 1);
                    Handled::Done
                }
                None => Handled::Not,
            },
            Pane::Script(i) => match (scroll_delta(a, page), data.scripts.get(i)) {
                (Some(d), Some(p)) => {
                    let len = p.lines.len() + p.messages.len();
                    if self.script_scroll.len() <= i {
                        self.script_scroll.resize(i + 1, 0);
                    }
                    self.script_scroll[i] = down(self.script_scroll[i], d, len);
                    Handled::Done
                }
                (Some(_), None) => Handled::Done,
                (None, _) => Handled::Not,
            },
        };
        match handled {
            Handled::Done => {}
            Handled::Narrow(pid) => self.set_narrow(Some(pid)),
            Handled::Say(m) => self.message = Some(m.into()),
            Handled::Not => match a {
                Action::Select => self.message = Some(NOTHING_SELECTED.into()),
                Action::Expand | Action::Collapse => {
                    self.message = Some(
                        "Right/Left scroll the log; + and - open a symbol's callers in Top symbols"
                            .into(),
                    );
                }
                // `s` orders Top tasks when it has the focus, else Top symbols.
                Action::Sort => self.symbols.next_sort(),
                _ => {}
            },
        }
    }

    fn on_edit_key(&mut self, key: KeyEvent) {
        let Some(edit) = self.edit.as_mut() else {
            return;
        };
        match key.code {
            KeyCode::Esc => {
                let before = edit.before.clone();
                self.edit = None;
                if before != *self.filter() {
                    self.set_filter(before);
                }
                return;
            }
            KeyCode::Enter => {
                if edit.error.is_none() {
                    self.edit = None;
                }
                return;
            }
            KeyCode::Backspace => {
                edit.text.pop();
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                edit.text.clear();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if edit.text.len() < 512 {
                    edit.text.push(c);
                }
            }
            _ => return,
        }
        // Live preview: a valid expression applies at once; an invalid one shows its error
        // and the view keeps the filter that was in force before editing.
        let (text, before) = (edit.text.clone(), edit.before.clone());
        let parsed = Filter::parse(&text)
            .and_then(|f| f.check(&self.cfg.formats(), self.cfg.samples()).map(|()| f));
        match parsed {
            Ok(f) => {
                if let Some(e) = self.edit.as_mut() {
                    e.error = None;
                }
                if f != *self.filter() {
                    self.set_filter(f);
                }
            }
            Err(e) => {
                if let Some(ed) = self.edit.as_mut() {
                    ed.error = Some(e.to_string());
                }
                if before != *self.filter() {
                    self.set_filter(before);
                }
            }
        }
    }

    pub fn on_mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::ScrollUp => self.pane_key(Action::Up(3)),
            MouseEventKind::ScrollDown => self.pane_key(Action::Down(3)),
            MouseEventKind::Down(crossterm::event::MouseButton::Left) => {
                self.click(m.column, m.row)
            }
            _ => {}
        }
    }

    /// A click: focus the pane under it, and select the row under it where rows are
    /// selected (the tree, Top tasks, Top symbols).
    fn click(&mut self, x: u16, y: u16) {
        let hit = self
            .drawn
            .areas
            .iter()
            .copied()
            .find(|(_, r)| x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height);
        let Some((pane, r)) = hit else { return };
        self.focus = pane;
        // Below the top border and the header row.
        let Some(row) = y.checked_sub(r.y + 2).map(usize::from) else {
            return;
        };
        let visible = r.height.saturating_sub(3).max(1) as usize;
        match pane {
            Pane::Tasks if self.tree => {
                let rows = self.tree_rows_unnamed();
                self.tree_view.click(&rows, row, visible);
            }
            Pane::Top => {
                let len = self.top_rows().len();
                self.top.click(row, len);
            }
            Pane::Symbols => {
                let data = self.frozen.as_deref().unwrap_or(&self.live);
                let narrow = Narrow::pids_of(&self.narrow);
                self.symbols.click(&data.symbols, narrow, row, visible);
            }
            _ => {}
        }
    }

    /// Space: hold the panes' data still, or show the live data again. The view state is
    /// one whether paused or not: what was chosen while paused (filter, focus, scrolls,
    /// narrowing, how Top symbols is shown) stays; the streams follow the newest again on
    /// resume, as perf top and htop do.
    fn toggle_pause(&mut self) {
        match self.frozen.take() {
            None => {
                self.frozen = Some(Box::new(self.live.frozen()));
                self.paused = true;
            }
            Some(_) => {
                self.paused = false;
                self.log.scroll = 0;
                self.stream.scroll = 0;
            }
        }
    }

    fn move_focus(&mut self, step: isize) {
        let panes = self.shown().panes();
        let i = panes.iter().position(|p| *p == self.focus).unwrap_or(0) as isize;
        let n = panes.len() as isize;
        self.focus = panes[((i + step) % n + n) as usize % panes.len()];
        // A pane that did not fit takes the middle row's last place while focused there.
        let column = super::super::layout::column_of(self.focus);
        if self.drawn.folded.contains(&column) {
            self.pick = Some(self.focus);
        }
    }
}
