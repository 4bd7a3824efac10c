//! The app's keys and mouse: what each key does to the view (focus, scroll, pause,
//! narrowing, the filter being edited), and the click that focuses a pane.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

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
            Action::Pause => self.toggle_pause(),
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
            Action::Up(n) => self.scroll(-(n as isize)),
            Action::Down(n) => self.scroll(n as isize),
            Action::PageUp => self.scroll(-(self.drawn.page_rows.max(1) as isize)),
            Action::PageDown => self.scroll(self.drawn.page_rows.max(1) as isize),
            Action::Home => self.scroll(isize::MIN / 2),
            Action::End => self.scroll(isize::MAX / 2),
            Action::Clear => self.clear_log(),
            Action::Help => self.show_help = true,
            Action::Select => self.select(),
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
                self.tree_sel = 0;
                self.tree_pid = None;
                self.focus = Pane::Tasks;
            }
            Action::Expand if self.focus == Pane::Log => self.log_hscroll += 8,
            Action::Collapse if self.focus == Pane::Log => {
                self.log_hscroll = self.log_hscroll.saturating_sub(8)
            }
            Action::Expand | Action::Collapse if self.focus != Pane::Symbols => {
                self.message = Some(
                    "Right/Left scroll the log; + and - open a symbol's callers in Top symbols"
                        .into(),
                );
            }
            Action::Expand if !self.shown().symbols.callchains => {
                self.message = Some("callers need call chains: run with -g".into());
            }
            Action::Expand => {
                let data = self.frozen.as_deref().unwrap_or(&self.live);
                self.symbols
                    .expand(&data.symbols, Narrow::pids_of(&self.narrow))
            }
            Action::Collapse => {
                let data = self.frozen.as_deref().unwrap_or(&self.live);
                self.symbols
                    .collapse(&data.symbols, Narrow::pids_of(&self.narrow))
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
            Action::Sort if self.focus == Pane::Top => self.top_sort = self.top_sort.next(),
            Action::Sort => self.symbols.next_sort(),
            Action::Threads => {
                self.per_thread = !self.per_thread;
                self.top_scroll = 0;
            }
            Action::None => {}
        }
    }

    /// Enter: on a task (the tree, the task stream, Top tasks, or a zoomed symbol's tasks),
    /// narrow the log, Top tasks and Top symbols to it and its children; on a symbol, show
    /// the tasks that run it.
    fn select(&mut self) {
        use super::super::top_symbols::Zoom;
        let from_symbols = self.focus == Pane::Symbols;
        let pid = match self.focus {
            Pane::Top => self.top_rows().get(self.top_scroll).map(|(p, _)| *p),
            Pane::Tasks if self.tree => {
                let rows = self.tree_rows();
                rows.get(self.tree_selected(&rows)).map(|r| r.pid)
            }
            Pane::Tasks => {
                let rows = self.shown().task_rows();
                rows.len()
                    .checked_sub(1 + self.task_scroll)
                    .and_then(|i| rows.get(i))
                    .map(|r| r.pid)
            }
            Pane::Symbols => match &self.symbols.zoom {
                Zoom::Tasks(key) => self
                    .shown()
                    .symbols
                    .tasks_of(self.symbols.span, key)
                    .get(self.symbols.selected)
                    .map(|(p, _)| *p),
                Zoom::None => {
                    let data = self.frozen.as_deref().unwrap_or(&self.live);
                    self.symbols
                        .zoom_selected(&data.symbols, Narrow::pids_of(&self.narrow));
                    self.symbols.selected = 0;
                    return;
                }
            },
            _ => None,
        };
        match pid {
            Some(pid) => {
                self.set_narrow(Some(pid));
                if from_symbols {
                    self.focus = Pane::Symbols;
                }
            }
            None => self.message = Some("Enter: select a task or a symbol first".into()),
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
            MouseEventKind::ScrollUp => self.scroll(-3),
            MouseEventKind::ScrollDown => self.scroll(3),
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
                let rows = self.tree_rows();
                let start = self.tree_selected(&rows).saturating_sub(visible - 1);
                if let Some(r) = rows.get(start + row) {
                    self.tree_sel = start + row;
                    (self.tree_pid, self.tree_exited) = (Some(r.pid), r.exited > 0);
                }
            }
            Pane::Top if self.top_scroll + row < self.top_rows().len() => {
                self.top_scroll += row;
            }
            Pane::Symbols => {
                let len = self
                    .shown()
                    .symbols
                    .shown_len(&self.symbols, self.narrowed());
                let start = self.symbols.selected.saturating_sub(visible - 1);
                if start + row < len {
                    self.symbols.selected = start + row;
                }
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
                self.log_scroll = 0;
                self.task_scroll = 0;
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

    /// Scroll the focused pane: negative is up (older for the streams).
    fn scroll(&mut self, delta: isize) {
        let page = self.drawn.page_rows.max(1);
        let back = |off: usize, delta: isize, len: usize| -> usize {
            // Streams count rows back from the newest: up (negative) goes further back, until
            // the oldest row is at the top of a full page.
            let v = off as isize - delta;
            v.clamp(0, len.saturating_sub(page) as isize) as usize
        };
        fn down(off: usize, delta: isize, len: usize) -> usize {
            let v = off as isize + delta;
            v.clamp(0, len.saturating_sub(1) as isize) as usize
        }
        match self.focus {
            Pane::Log => self.log_scroll = back(self.log_scroll, delta, self.shown().log_len()),
            Pane::Tasks if self.tree => {
                let rows = self.tree_rows();
                self.tree_sel = down(self.tree_selected(&rows), delta, rows.len());
                self.tree_pid = rows.get(self.tree_sel).map(|r| r.pid);
                self.tree_exited = rows.get(self.tree_sel).is_some_and(|r| r.exited > 0);
            }
            // The selection is the newest row shown: it reaches the oldest one.
            Pane::Tasks => {
                let v = self.task_scroll as isize - delta;
                let len = self.shown().task_rows().len() as isize;
                self.task_scroll = v.clamp(0, len - 1).max(0) as usize;
            }
            Pane::Top => self.top_scroll = down(self.top_scroll, delta, self.top_rows().len()),
            Pane::Symbols => {
                let len = self
                    .shown()
                    .symbols
                    .shown_len(&self.symbols, self.narrowed());
                self.symbols.selected = down(self.symbols.selected, delta, len);
            }
            Pane::Cpus => {
                self.cpu_scroll = down(self.cpu_scroll, delta, self.shown().rates.cpus().len() + 1)
            }
            Pane::Script(i) => {
                if let Some(p) = self.shown().scripts.get(i) {
                    let len = p.lines.len() + p.messages.len();
                    if self.script_scroll.len() <= i {
                        self.script_scroll.resize(i + 1, 0);
                    }
                    self.script_scroll[i] = down(self.script_scroll[i], delta, len);
                }
            }
        }
    }
}
