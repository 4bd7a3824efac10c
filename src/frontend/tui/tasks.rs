//! The task pane: the stream of fork / exit / exec / comm rows (kept at ingest, complete, so
//! that drawing needs no lookups), the process tree drawn in its place (`t`), and the detail
//! lines of the selected row: its whole command line and the file its exec ran.
//!
//! Its rows are built from the ordered stream and the process model ([`row_of`]); the app
//! keeps them in a bounded ring ([`TASK_ROWS`]) and draws them here.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;

use super::app::{App, Comm, Pane};
use super::ui::{draw_grid, hms, pane_block, rel, scroll_note, shown_rows, window};
use crate::event::{Event, EventKind};
use crate::process::ProcessModel;

/// Rows of the task stream kept.
pub const TASK_ROWS: usize = 2_000;

/// What a row of the task stream reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEvent {
    Fork,
    /// A fork that created a thread in the same process.
    Thread,
    Exit,
    /// A comm record written by execve.
    Exec,
    /// A rename (prctl).
    Comm,
}

impl TaskEvent {
    pub fn name(self) -> &'static str {
        match self {
            TaskEvent::Fork => "fork",
            TaskEvent::Thread => "thread",
            TaskEvent::Exit => "exit",
            TaskEvent::Exec => "exec",
            TaskEvent::Comm => "comm",
        }
    }
}

/// One row of the task stream, complete at ingest so that drawing needs no lookups.
#[derive(Clone, Debug)]
pub struct TaskRow {
    pub time: u64,
    pub event: TaskEvent,
    pub pid: u32,
    pub tid: u32,
    /// Unknown for a comm record of a task whose fork was not seen.
    pub ppid: Option<u32>,
    pub comm: Option<Comm>,
    pub parent_comm: Option<Comm>,
    /// For an exit whose fork was seen: how long the task lived, in ns.
    pub lifetime: Option<u64>,
    /// For an exec: its command line (see [`crate::cmdline`]), or that the process was gone
    /// before it could be read.
    pub argv: Option<Arc<crate::cmdline::CmdLine>>,
}

impl TaskRow {
    /// What the comm column shows: an exec's command line when it was read (each argument
    /// escaped, joined by spaces, a cut marked), else the name; `[gone]` when the process
    /// had gone before its command line could be read.
    pub fn command(&self) -> String {
        let name = self.comm.map_or_else(|| "?".to_string(), |c| c.display());
        match self.argv.as_deref() {
            Some(argv) if argv.is_gone() => format!("{name} [gone]"),
            Some(argv) => argv.line(),
            None => name,
        }
    }
}

/// The row of the task stream for `ev`, if it is a fork, exit or comm record: names,
/// parents and lifetimes as the model knew them at the event's time.
pub fn row_of(ev: &Event, tasks: &ProcessModel) -> Option<TaskRow> {
    let name = |tid: u32| tasks.comm_at(tid, ev.time).copied();
    match &ev.kind {
        EventKind::Fork(t) => {
            let thread = t.pid == t.ppid && t.tid != t.pid;
            Some(TaskRow {
                time: ev.time,
                event: if thread {
                    TaskEvent::Thread
                } else {
                    TaskEvent::Fork
                },
                pid: t.pid,
                tid: t.tid,
                ppid: Some(t.ppid),
                // What it inherited at the fork.
                comm: name(t.tid),
                parent_comm: name(t.ppid),
                lifetime: None,
                argv: None,
            })
        }
        EventKind::Exit(t) => {
            let task = tasks.task_at(t.tid, ev.time);
            Some(TaskRow {
                time: ev.time,
                event: TaskEvent::Exit,
                pid: t.pid,
                tid: t.tid,
                ppid: Some(t.ppid),
                comm: name(t.tid),
                parent_comm: name(t.ppid),
                lifetime: task
                    .and_then(|k| k.start())
                    .map(|s| t.time.saturating_sub(s)),
                argv: None,
            })
        }
        EventKind::Comm { comm, exec, .. } => {
            let (pid, tid) = ev.subject();
            let ppid = tasks.task_at(tid, ev.time).and_then(|k| k.ppid());
            Some(TaskRow {
                time: ev.time,
                event: if *exec {
                    TaskEvent::Exec
                } else {
                    TaskEvent::Comm
                },
                pid,
                tid,
                ppid,
                comm: Some(Comm::new(comm)),
                parent_comm: ppid.and_then(name),
                lifetime: None,
                argv: if *exec {
                    tasks.exec_argv(pid, ev.time).cloned()
                } else {
                    None
                },
            })
        }
        _ => None,
    }
}

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

pub fn draw_tree(f: &mut Frame, area: Rect, app: &App) {
    use super::tree::Mark;
    let rows = app.tree_rows();
    let processes: usize = rows.iter().map(|r| r.exited.max(1)).sum();
    let title = format!(
        "Process tree ({processes} processes, t: stream){}",
        if app.paused { " [paused]" } else { "" }
    );
    let focused = app.focus == Pane::Tasks;
    let block = pane_block(title, focused);
    let visible = block.inner(area).height.saturating_sub(1).max(1) as usize;
    let sel = app.tree_selected(&rows);
    let start = sel.saturating_sub(visible - 1);
    let cells = shown_rows(&rows, start, visible).map(|(i, r)| {
        let mut style = match r.mark {
            Mark::New => Style::default().fg(Color::Green),
            Mark::Exited => Style::default().fg(Color::Red),
            Mark::None => Style::default(),
        };
        if focused && i == sel {
            style = style.add_modifier(Modifier::REVERSED);
        }
        let mut name = format!("{}{}", r.prefix, r.name);
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
        &[7, 0, 5, 6],
        &["pid", "process (command)", "thr", "state"],
        cells,
    );
}

pub fn draw_tasks(f: &mut Frame, area: Rect, app: &App) {
    if app.tree {
        draw_tree(f, area, app);
        return;
    }
    let rows_all = app.task_rows();
    let title = format!(
        "Tasks: fork/exit/exec ({}){}",
        rows_all.len(),
        scroll_note(app.task_scroll, app.paused)
    );
    let block = pane_block(title, app.focus == Pane::Tasks);
    let visible = block.inner(area).height.saturating_sub(1) as usize;
    let (start, end) = window(rows_all.len(), app.task_scroll, visible);
    let rows = rows_all.range(start..end).map(|r| {
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
            Span::raw(rel(app, r.time)),
            Span::styled(r.event.name(), Style::default().fg(color)),
            Span::raw(pid),
            Span::raw(parent),
            Span::raw(r.command()),
            Span::raw(r.lifetime.map(lifetime).unwrap_or_default()),
        ]
    });
    draw_grid(f, block, area, STREAM_WIDTHS, STREAM_HEADER, rows);
}

/// The columns of the task stream.
const STREAM_WIDTHS: &[u16] = &[8, 6, 11, 0, 0, 8];
const STREAM_HEADER: &[&str] = &["time", "event", "pid", "ppid (parent)", "comm", "lived"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::tui::app::tests::cfg;
    use crate::frontend::tui::app::{App, RateUnit};
    use crate::order::Chunk;
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
