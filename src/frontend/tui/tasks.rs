//! The task pane: the stream of fork / exit / exec / comm rows (kept at ingest, complete, so
//! that drawing needs no lookups), the process tree drawn in its place (`t`), and the detail
//! lines of the selected row: its whole command line and the file its exec ran.
//!
//! Its rows are built at ingest ([`super::task_rows`]); the app keeps them and they are drawn
//! here.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::app::App;
use super::layout::Pane;
use super::task_rows::{TaskEvent, command};
use super::widgets::{
    draw_grid, grid_widths, hms, pane_block, rel, scroll_note, shown_rows, window,
};
use crate::cmdline::ArgvSource;

fn lifetime(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 1e-3 {
        format!("{:.0}µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1}ms", s * 1e3)
    } else if s < 120.0 {
        format!("{s:.2}s")
    } else {
        hms(s)
    }
}

/// Draw the process tree; returns its rows (the PgUp/PgDn step).
pub(crate) fn draw_tree(f: &mut Frame, area: Rect, app: &App) -> usize {
    use super::tree::Mark;
    let mut rows = app.tree_rows_unnamed();
    let processes: usize = rows.iter().map(|r| r.exited.max(1)).sum();
    let title = format!(
        "Process tree ({processes} processes, t: stream){}",
        if app.paused { " [paused]" } else { "" }
    );
    let focused = app.focus == Pane::Tasks;
    let block = pane_block(title, focused);
    let inner = block.inner(area);
    let sel = app.tree_selected(&rows);
    let detail = match (focused, rows.get(sel)) {
        (true, Some(r)) if r.exited == 0 => detail_lines(app, r.pid, None),
        _ => Vec::new(),
    };
    let below = detail_rows(&detail, inner);
    let visible = inner.height.saturating_sub(1 + below).max(1) as usize;
    const TREE_WIDTHS: [u16; 4] = [7, 0, 5, 6];
    let name_w = grid_widths(inner.width, &TREE_WIDTHS)[1] as usize;
    let start = sel.saturating_sub(visible - 1);
    let end = rows.len().min(start.saturating_add(visible));
    app.name_tree_rows(&mut rows, start..end);
    let cells = shown_rows(&rows, start, visible).map(|(i, r)| {
        let mut style = match r.mark {
            Mark::New => Style::default().fg(Color::Green),
            Mark::Exited => Style::default().fg(Color::Red),
            Mark::None => Style::default(),
        };
        if focused && i == sel {
            style = style.add_modifier(Modifier::REVERSED);
        }
        let whole = format!("{}{}", r.prefix, r.name);
        let mut name = match whole.chars().count() <= name_w {
            true => whole,
            false => format!("{}{}", r.prefix, r.short),
        };
        if r.folded > 0 {
            name.push_str(&format!(" [{} kernel threads folded]", r.folded));
        }
        let state = match r.mark {
            Mark::New => "new",
            Mark::Exited if r.exited > 0 => "",
            Mark::Exited => "exited",
            Mark::None => "",
        };
        // The row of a parent's folded exited children has no pid of its own.
        let pid = match r.exited {
            0 => r.pid.to_string(),
            _ => String::new(),
        };
        vec![
            Span::styled(pid, style),
            Span::styled(name, style),
            Span::styled(
                if r.threads > 0 {
                    format!("+{}", r.threads)
                } else {
                    String::new()
                },
                style,
            ),
            Span::styled(state, style),
        ]
    });
    draw_grid(
        f,
        block,
        area,
        &TREE_WIDTHS,
        &["pid", "process (command)", "thr", "state"],
        cells,
    );
    draw_detail(f, detail, inner, below);
    visible
}

/// The selected process's whole command line, wrapped, and what it ran: for an exec at
/// `exec` (a row of the stream), that exec's; else as the model knows the process now.
fn detail_lines(app: &App, pid: u32, exec: Option<u64>) -> Vec<Line<'static>> {
    let tasks = app.tasks();
    let p = match exec {
        Some(t) => tasks.process_at(pid, t),
        None => tasks.process(pid),
    };
    let argv = match exec {
        Some(t) => tasks.exec_argv(pid, t),
        None => p.and_then(|p| p.argv.as_ref()),
    };
    let name = app.task_name(&tasks, pid);
    let head = Span::styled(
        format!("{pid} "),
        Style::default().add_modifier(Modifier::BOLD),
    );
    let dim = Style::default().fg(Color::DarkGray);
    let (line, source) = match argv {
        Some(a) if !a.is_gone() => (
            a.line(),
            match a.source() {
                ArgvSource::Exec => "argv as exec'd",
                _ => "argv read from /proc: the process may have rewritten it",
            },
        ),
        Some(_) => (name, "argv: gone before it could be read"),
        None => (name, "argv not read"),
    };
    // The file the exec ran, from its MMAP2 record (while the process is that exec).
    let ran = p.filter(|p| exec.is_none_or(|t| p.exec() == Some(t)));
    let exe = match ran.and_then(|p| p.exe.as_deref()) {
        Some(path) => format!("exe {} · ", crate::text::escape(path)),
        None => String::new(),
    };
    vec![
        Line::from(vec![head, Span::raw(line)]),
        Line::from(Span::styled(format!("{exe}{source}"), dim)),
    ]
}

/// Rows the detail lines take at the bottom of `inner`: as many as they need wrapped, at
/// most a third of the pane; one (the command line) in a pane of 5 or 6 rows (80×24);
/// none in a smaller one.
fn detail_rows(lines: &[Line], inner: Rect) -> u16 {
    if lines.is_empty() || inner.height < 5 || inner.width == 0 {
        return 0;
    }
    let w = inner.width as usize;
    let need: usize = lines.iter().map(|l| l.width().max(1).div_ceil(w)).sum();
    (need as u16).min((inner.height / 3).max(1))
}

fn draw_detail(f: &mut Frame, lines: Vec<Line<'static>>, inner: Rect, rows: u16) {
    if rows == 0 {
        return;
    }
    let r = Rect::new(inner.x, inner.y + inner.height - rows, inner.width, rows);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), r);
}

/// Draw the task pane (the stream, or the tree with `t`); returns its rows (the PgUp/PgDn
/// step).
pub(crate) fn draw_tasks(f: &mut Frame, area: Rect, app: &App) -> usize {
    if app.tree {
        return draw_tree(f, area, app);
    }
    let rows_all = app.shown().task_rows();
    let title = format!(
        "Tasks: fork/exit/exec ({}){}",
        rows_all.len(),
        scroll_note(app.stream.scroll, app.paused)
    );
    let focused = app.focus == Pane::Tasks;
    let block = pane_block(title, focused);
    let inner = block.inner(area);
    // The selected row: the newest shown (Enter narrows to it).
    let selected = rows_all
        .len()
        .checked_sub(1 + app.stream.scroll)
        .and_then(|i| rows_all.get(i));
    let detail = match (focused, selected) {
        (true, Some(r)) => detail_lines(app, r.pid, (r.event == TaskEvent::Exec).then_some(r.time)),
        _ => Vec::new(),
    };
    let below = detail_rows(&detail, inner);
    let visible = inner.height.saturating_sub(1 + below) as usize;
    // The selected row is the last of `window`; near the oldest, the page still fills.
    let (start, end) = window(rows_all.len(), app.stream.scroll, visible);
    let selected_at = end.checked_sub(1);
    let end = (start + visible).min(rows_all.len()).max(end);
    // After the detail lines, which take the model's lock of their own.
    let tasks = app.tasks();
    let widths = stream_widths(inner.width);
    let command_w = grid_widths(inner.width, &widths)[4] as usize;
    let rows = rows_all.range(start..end).enumerate().map(|(i, r)| {
        let mark = |s: Style| match focused && Some(start + i) == selected_at {
            true => s.add_modifier(Modifier::REVERSED),
            false => s,
        };
        let color = match r.event {
            TaskEvent::Fork | TaskEvent::Thread => Color::Green,
            TaskEvent::Exit => Color::Red,
            TaskEvent::Exec | TaskEvent::Comm => Color::Yellow,
        };
        let parent = match (r.ppid, r.parent_comm) {
            (Some(p), Some(c)) => format!("{p} ({})", c.display()),
            (Some(p), None) => p.to_string(),
            (None, _) => "?".to_string(),
        };
        let pid = if r.tid != r.pid {
            format!("{}/{}", r.pid, r.tid)
        } else {
            r.pid.to_string()
        };
        vec![
            Span::styled(rel(app, r.time), mark(Style::default())),
            Span::styled(r.event.name(), mark(Style::default().fg(color))),
            Span::styled(pid, mark(Style::default())),
            Span::styled(parent, mark(Style::default())),
            Span::styled(command(r, &tasks, command_w), mark(Style::default())),
            Span::styled(
                r.lifetime.map(lifetime).unwrap_or_default(),
                mark(Style::default()),
            ),
        ]
    });
    draw_grid(f, block, area, &widths, STREAM_HEADER, rows);
    drop(tasks);
    draw_detail(f, detail, inner, below);
    visible.max(1)
}

/// The widths of the task stream's columns in `inner` columns: the parent's a third of what
/// the fixed ones leave (10 to 24), the command's the rest (at least
/// [`super::layout::KEY_COLUMN`] in the narrowest pane the layout makes).
fn stream_widths(inner: u16) -> Vec<u16> {
    let [time, event, pid, parent_min, lived] = super::layout::STREAM_FIXED;
    let flex = inner.saturating_sub(time + event + pid + lived + 5);
    let parent = (flex / 3).clamp(parent_min, 24);
    vec![time, event, pid, parent, 0, lived]
}

const STREAM_HEADER: &[&str] = &["time", "event", "pid", "ppid (parent)", "command", "lived"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Chunk;
    use crate::event::{Event, EventKind};
    use crate::frontend::tui::app::tests::cfg;
    use crate::frontend::tui::app::{App, RateUnit};
    use crate::frontend::tui::task_rows::TaskRow;
    use crate::testkit::events::{event, task};

    const NS: u64 = 1_000_000_000;
    const T0: u64 = 100 * NS;

    fn ev(cpu: u32, pid: u32, time: u64, kind: EventKind) -> Event {
        event(cpu, pid, pid, time, kind)
    }

    #[test]
    fn task_stream_has_parent_names_and_lifetimes() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        app.seed_tasks([(1, (*b"systemd").into()), (100, (*b"bash").into())]);
        app.on_events([
            ev(0, 100, T0 + 1, EventKind::Fork(task(200, 100, T0 + 1))),
            ev(
                0,
                200,
                T0 + 2,
                EventKind::Comm {
                    pid: 200,
                    tid: 200,
                    comm: (*b"sleep").into(),
                    exec: true,
                },
            ),
            ev(
                0,
                200,
                T0 + 5_000,
                EventKind::Exit(task(200, 100, T0 + 5_000)),
            ),
        ]);
        let rows: Vec<TaskRow> = app.task_rows().iter().cloned().collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].event, TaskEvent::Fork);
        assert_eq!(
            rows[0].comm.unwrap().as_bytes(),
            b"bash",
            "inherits the parent's name"
        );
        assert_eq!(rows[0].parent_comm.unwrap().as_bytes(), b"bash");
        assert_eq!(rows[1].event, TaskEvent::Exec);
        assert_eq!(rows[1].comm.unwrap().as_bytes(), b"sleep");
        assert_eq!(rows[2].event, TaskEvent::Exit);
        assert_eq!(rows[2].comm.unwrap().as_bytes(), b"sleep");
        assert_eq!(rows[2].lifetime, Some(4_999));
        assert_eq!(rows[2].parent_comm.unwrap().as_bytes(), b"bash");
        // An exit whose fork was not seen has no lifetime.
        app.on_events([ev(
            0,
            1,
            T0 + 6_000,
            EventKind::Exit(task(1, 0, T0 + 6_000)),
        )]);
        assert_eq!(app.task_rows().back().unwrap().lifetime, None);
        assert_eq!(
            app.task_rows().back().unwrap().comm.unwrap().as_bytes(),
            b"systemd"
        );
    }

    #[test]
    fn exec_rows_show_the_command_line_escaped_or_say_it_was_gone() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        let exec = |pid: u32, time: u64| crate::testkit::events::comm(0, time, pid, b"sleep", true);
        {
            // What the pipeline does between applying a chunk and passing it on.
            let mut m = app.model.write();
            m.collect_execs(true);
            m.apply(&[exec(200, T0 + 1), exec(201, T0 + 2), exec(202, T0 + 3)]);
            use crate::cmdline::{ArgvSource, CmdLine};
            let argv = |raw: &[u8]| CmdLine::new(raw, 0, ArgvSource::Exec).shared();
            m.set_argv(200, T0 + 1, argv(b"sleep\x000.777"));
            m.set_argv(201, T0 + 2, argv(b"sleep\x00\x1b[2J\x00a b"));
            m.set_argv(202, T0 + 3, CmdLine::gone().shared());
        }
        app.on_chunk(Chunk {
            events: vec![exec(200, T0 + 1), exec(201, T0 + 2), exec(202, T0 + 3)],
            watermark: T0 + 3,
        });
        let shown: Vec<String> = app.task_rows().iter().map(TaskRow::command).collect();
        assert_eq!(shown, ["sleep 0.777", "sleep \\x1b[2J a b", "sleep [gone]"]);
        // Not read (not asked, or over the budget): the name.
        app.on_events([exec(203, T0 + 4)]);
        assert_eq!(app.task_rows().back().unwrap().command(), "sleep");
    }

    #[test]
    fn lifetimes() {
        assert_eq!(lifetime(4_999), "5µs");
        assert_eq!(lifetime(12_300_000), "12.3ms");
        assert_eq!(lifetime(2_500_000_000), "2.50s");
    }
}
