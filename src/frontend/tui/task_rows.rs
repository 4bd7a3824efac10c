//! The task stream's rows: one per fork / exit / exec / comm record, built from the ordered
//! stream and the process model ([`row_of`]) at ingest, complete, so that drawing needs no
//! lookups. The app keeps them in a bounded ring ([`TASK_ROWS`]); the task pane draws them.

use std::collections::VecDeque;
use std::sync::Arc;

use super::input::{Action, Handled, scroll_delta};
use crate::event::{Event, EventKind};
use crate::process::{Comm, ProcessModel};

/// Rows of the task stream kept.
pub(crate) const TASK_ROWS: usize = 2_000;

/// How the task stream is shown (the view's, one whether paused or not).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StreamView {
    /// Rows scrolled back from the newest; the selection is the newest row shown.
    pub scroll: usize,
}

impl StreamView {
    /// A row came on a stream of now `len` rows: a view scrolled back stays on its rows.
    pub(crate) fn row_came(&mut self, len: usize) {
        if self.scroll > 0 {
            self.scroll = (self.scroll + 1).min(len.saturating_sub(1));
        }
    }

    /// The stream's keys on `rows` shown `page` at a time: scrolling (the selection reaches
    /// the oldest row), Enter on the selected row's task.
    pub fn on_key(&mut self, a: Action, rows: &VecDeque<TaskRow>, page: usize) -> Handled {
        if let Some(d) = scroll_delta(a, page) {
            let v = self.scroll as isize - d;
            self.scroll = v.clamp(0, (rows.len() as isize - 1).max(0)) as usize;
            return Handled::Done;
        }
        match a {
            Action::Select => {
                let row = rows
                    .len()
                    .checked_sub(1 + self.scroll)
                    .and_then(|i| rows.get(i));
                match row {
                    Some(r) => Handled::Narrow(r.pid),
                    None => Handled::Say(super::input::NOTHING_SELECTED),
                }
            }
            _ => Handled::Not,
        }
    }
}

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

/// What the command column shows for `r`: its exec's command line as the model knows it
/// now (one read after the row was made, or a better one, may have come since), else as the
/// row has it.
pub fn command(r: &TaskRow, tasks: &ProcessModel, width: usize) -> String {
    match (r.event, tasks.exec_argv(r.pid, r.time)) {
        (TaskEvent::Exec, Some(argv)) if r.argv.as_ref() != Some(argv) => TaskRow {
            argv: Some(argv.clone()),
            ..r.clone()
        }
        .command_within(width),
        _ => r.command_within(width),
    }
}

impl TaskRow {
    /// What the comm column shows: an exec's command line when it was read (each argument
    /// escaped, joined by spaces, a cut marked), else the name; `[gone]` when the process
    /// had gone before its command line could be read.
    pub fn command(&self) -> String {
        self.command_within(usize::MAX)
    }

    /// As [`TaskRow::command`], for a column `width` characters wide (see
    /// [`crate::cmdline::CmdLine::line_within`]).
    pub(crate) fn command_within(&self, width: usize) -> String {
        let name = self.comm.map_or_else(|| "?".to_string(), |c| c.display());
        match self.argv.as_deref() {
            Some(argv) if argv.is_gone() => format!("{name} [gone]"),
            Some(argv) => argv.line_within(width),
            None => name,
        }
    }
}

/// The row of the task stream for `ev`, if it is a fork, exit or comm record: names,
/// parents and lifetimes as the model knew them at the event's time.
pub(crate) fn row_of(ev: &Event, tasks: &ProcessModel) -> Option<TaskRow> {
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
