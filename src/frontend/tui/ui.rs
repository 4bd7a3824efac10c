//! Drawing: the app state into a ratatui frame. Pure: the same code draws into the real
//! terminal and into `TestBackend` for snapshots.
//!
//! Only what is visible is formatted, once per frame: the hot ingest path never builds text.
//! Every name from the monitored system reaches the frame escaped ([`crate::text::escape`],
//! `Comm::display`, and the event's own `Display`, which escapes its text fields).

use ratatui::Frame;
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::app::App;
use super::input::{KEYS, REPLAY_KEYS};
use super::layout::{Drawn, Pane};
use super::widgets::{draw_grid, hms, pane_block, rel, scroll_note, shown_rows, si, window};
use crate::event::{Event, RecordType};
use crate::filter::SYNTAX_HELP;

/// The smallest terminal the layout fits in.
pub(crate) const MIN_WIDTH: u16 = 60;
pub(crate) const MIN_HEIGHT: u16 = 18;

/// Draw one frame into any backend, and keep in `app` what it drew where.
pub fn render<B: Backend>(term: &mut Terminal<B>, app: &mut App) -> Result<(), B::Error> {
    let mut drawn = None;
    term.draw(|f| drawn = draw(f, app))?;
    if let Some(d) = drawn {
        app.set_drawn(d);
    }
    Ok(())
}

/// Draw the whole screen: the status bar from the live data, the panes from what they show
/// ([`App::shown`]: the data held at a pause, else the live data) as the view state says,
/// where [`super::layout`] puts them. Returns what it drew where; None on a terminal too
/// small to draw the panes.
pub(crate) fn draw(f: &mut Frame, app: &App) -> Option<Drawn> {
    use super::layout::{Spec, layout};
    let data = app.shown();
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        draw_too_small(f, area);
        return None;
    }
    let footer = match &app.edit {
        Some(e) if e.error.is_some() => 2,
        _ => 1,
    };
    let l = layout(
        area,
        &Spec {
            cpus: data.rates.cpus().len(),
            footer,
            symbols: data.symbols.has_samples(),
            callchains: data.symbols.callchains,
            scripts: data.scripts.len(),
            pick: app.pick,
            zoom: app.zoom.then_some(app.focus),
            replay: app.replay.is_some(),
        },
    );
    draw_status(f, l.status, app, &l);
    let drawn: Vec<(Pane, Rect)> = match l.zoomed {
        Some(z) => vec![z],
        None => {
            let mut v = vec![(Pane::Cpus, l.cpus)];
            v.extend(l.middle.iter().copied());
            v.push((Pane::Log, l.log));
            v
        }
    };
    let mut areas = Vec::new();
    let mut task_rows = None;
    for &(pane, r) in &drawn {
        match pane {
            Pane::Cpus => super::cpus::draw_cpus(f, r, app),
            Pane::Tasks => task_rows = Some(super::tasks::draw_tasks(f, r, app)),
            Pane::Symbols => draw_symbols(f, r, app),
            Pane::Top => draw_top(f, r, app),
            Pane::Log => draw_log(f, r, app),
            Pane::Script(_) => {
                // Each script its own pane, stacked in the script column.
                let rects = script_panes(r, data.scripts.len());
                for (i, sr) in rects.iter().enumerate() {
                    draw_script(f, *sr, app, i, data.scripts.len() - rects.len());
                    areas.push((Pane::Script(i), *sr));
                }
                continue;
            }
        }
        areas.push((pane, r));
    }
    draw_footer(f, l.footer, app);
    let focused = areas
        .iter()
        .find(|(p, _)| *p == app.focus)
        .map_or(l.log, |(_, r)| *r);
    // Rows inside the borders, less the header row of the panes that have one (the task
    // pane says itself: its detail lines take rows too).
    let chrome = match app.focus {
        Pane::Log | Pane::Script(_) => 2,
        _ => 3,
    };
    let page_rows = match (app.focus, task_rows) {
        (Pane::Tasks, Some(rows)) => rows,
        (Pane::Tasks, None) => app.drawn.page_rows,
        _ => focused.height.saturating_sub(chrome).max(1) as usize,
    };
    if app.show_help {
        draw_help(f, area, app.replay.is_some());
    }
    Some(Drawn {
        areas,
        folded: l.folded,
        page_rows,
    })
}

/// Split `area` into rows of the given heights (clipped to the area).
fn stack(area: Rect, heights: &[u16]) -> Vec<Rect> {
    let mut y = area.y;
    let bottom = area.y + area.height;
    heights
        .iter()
        .map(|&h| {
            let h = h.min(bottom - y);
            let r = Rect::new(area.x, y, area.width, h);
            y += h;
            r
        })
        .collect()
}

fn draw_too_small(f: &mut Frame, area: Rect) {
    let text = vec![
        Line::from(Span::styled(
            "perfwatch: terminal too small",
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(format!(
            "{}x{}: enlarge the terminal to at least {MIN_WIDTH}x{MIN_HEIGHT}",
            area.width, area.height
        )),
        Line::from("(q quits)"),
    ];
    let y = area.height.saturating_sub(3) / 2;
    let r = Rect::new(
        area.x,
        area.y + y,
        area.width,
        area.height.saturating_sub(y),
    );
    f.render_widget(
        Paragraph::new(text)
            .alignment(Alignment::Center)
            .wrap(Wrap { trim: true }),
        r,
    );
}

fn draw_status(f: &mut Frame, area: Rect, app: &App, l: &super::layout::Layout) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let sep = Span::raw(" │ ");
    let mut l1 = vec![
        Span::styled(" perfwatch", bold.fg(Color::Cyan)),
        sep.clone(),
    ];
    // First, so that a narrow terminal never cuts it off.
    if app.paused
        || app
            .replay
            .as_ref()
            .is_some_and(|r| !r.playing && !r.seeking)
    {
        l1.push(Span::styled(
            " PAUSED ",
            Style::default()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ));
        l1.push(sep.clone());
    }
    l1.push(Span::styled(app.cfg.event.clone(), bold));
    l1.extend([
        sep.clone(),
        Span::raw(hms(app.elapsed_secs())),
        sep.clone(),
        Span::raw(format!("{} rec/s", si(app.live.records_per_sec))),
    ]);
    // The panes that do not fit (or a zoom): before what can be long, so that an 80-column
    // terminal still says how to reach them.
    let panes = match (l.zoomed, l.folded.as_slice()) {
        (Some((p, _)), _) => Some(format!("zoomed: {} (z)", super::layout::name_of(p))),
        (None, []) => None,
        (None, folded) => Some(folded.iter().fold("Tab:".to_string(), |t, p| {
            format!("{t} +{}", super::layout::name_of(*p))
        })),
    };
    if let Some(text) = panes {
        l1.push(sep.clone());
        l1.push(Span::styled(text, Style::default().fg(Color::Cyan)));
    }
    if let Some(fb) = &app.cfg.fallback {
        l1.push(sep.clone());
        l1.push(Span::styled(fb.clone(), Style::default().fg(Color::Yellow)));
    }
    // The target last: it can be long (a command line), the figures must stay visible.
    l1.extend([sep.clone(), Span::raw(app.cfg.target.clone())]);
    let t = &app.live.totals;
    let mut l2 = vec![Span::raw(format!(
        " {} records: ",
        si(t.total_records() as f64)
    ))];
    let mut first = true;
    for ty in RecordType::ALL {
        let n = t.count(ty);
        if n == 0 {
            continue;
        }
        if !first {
            l2.push(Span::raw("  "));
        }
        first = false;
        l2.push(Span::styled(
            format!("{} {}", ty.name(), si(n as f64)),
            type_style(ty),
        ));
    }
    if first {
        l2.push(Span::raw("none yet"));
    }
    l2.push(sep);
    let warn = |label: &str, n: u64| {
        let style = if n > 0 {
            Style::default()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().fg(Color::DarkGray)
        };
        Span::styled(format!("{label} {n}"), style)
    };
    l2.push(warn("lost", t.lost));
    l2.push(Span::raw(" "));
    l2.push(warn("lost samples", t.lost_samples));
    l2.push(Span::raw(" "));
    l2.push(warn("dropped", t.dropped));
    let mut lines = vec![Line::from(l1), Line::from(l2)];
    if let Some(r) = &app.replay {
        lines.push(Line::from(Span::styled(
            format!(" {}", r.about),
            Style::default().fg(Color::DarkGray),
        )));
        lines.push(position_bar(r, area.width));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// A replay's position bar: its state and speed, where it is in the recording's span (from
/// its first sample), and the bar itself.
fn position_bar(r: &super::replay::ReplayView, width: u16) -> Line<'static> {
    let secs = |t: u64| t.saturating_sub(r.start) as f64 / 1e9;
    let state = if r.at_end {
        "END".to_string()
    } else if r.seeking {
        "SEEKING".to_string()
    } else if r.playing {
        format!("PLAYING {}", r.speed.name())
    } else {
        format!("PAUSED ({} on space)", r.speed.name())
    };
    let end = match r.end {
        Some(e) if r.read || e > r.start => format!("{:.1} s", secs(e)),
        _ => "? s (reading)".into(),
    };
    let pos = match r.start {
        0 => "waiting for the first record".to_string(),
        _ => format!("{:.1} s / {end}", secs(r.position)),
    };
    let head = format!(" replay: {state} │ {pos} ");
    let room = (width as usize)
        .saturating_sub(head.chars().count() + 3)
        .min(80);
    let filled = match (r.end, r.start) {
        (Some(e), s) if s > 0 && e > s => {
            ((r.position.saturating_sub(s)) as f64 / (e - s) as f64 * room as f64).round() as usize
        }
        (Some(_), s) if s > 0 => room,
        _ => 0,
    }
    .min(room);
    Line::from(vec![
        Span::styled(head, Style::default().fg(Color::Cyan)),
        Span::raw("["),
        Span::styled("█".repeat(filled), Style::default().fg(Color::Cyan)),
        Span::styled(
            "·".repeat(room - filled),
            Style::default().fg(Color::DarkGray),
        ),
        Span::raw("]"),
    ])
}

/// ` of PID comm (+children)` when the views are narrowed to a process.
pub(super) fn narrowed(app: &App) -> String {
    match &app.narrow {
        Some(n) => {
            let tasks = app.tasks();
            format!(" of {} {} (+children)", n.pid, app.task_name(&tasks, n.pid))
        }
        None => String::new(),
    }
}

/// The columns of a list of tasks by samples (Top tasks, the tasks running a symbol).
const TASK_WIDTHS: &[u16] = &[7, 0, 7, 6];
const TASK_HEADER: &[&str] = &["pid", "comm", "samples", "share"];

fn task_cells(pid: u32, comm: String, n: u64, total: u64) -> Vec<Span<'static>> {
    let share = if total > 0 {
        n as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    vec![
        Span::raw(pid.to_string()),
        Span::raw(comm),
        Span::raw(format!("{n:>7}")),
        Span::raw(format!("{share:5.1}%")),
    ]
}

fn draw_top(f: &mut Frame, area: Rect, app: &App) {
    let (_, total) = app.shown().top();
    let top = app.top_rows();
    let what = if app.top.per_thread {
        "threads"
    } else {
        "tasks"
    };
    let order = match app.top.sort {
        super::top_tasks::TopSort::Samples => String::new(),
        o => format!(", by {}", o.name()),
    };
    let title = match app.narrow {
        Some(_) => format!("Top {what}{}{order}", narrowed(app)),
        None => format!("Top {what} (samples, last second: {total}{order})"),
    };
    let block = pane_block(title, app.focus == Pane::Top);
    let visible = block.inner(area).height.saturating_sub(1) as usize;
    let tasks = app.tasks();
    let shown: Vec<(u32, u64)> = top.into_iter().skip(app.top.scroll).take(visible).collect();
    // The control group of each row's process (a container, a service), when known.
    let cgroup = |id: u32| {
        let pid = tasks.task(id).map_or(id, |t| t.pid);
        tasks
            .process(pid)
            .and_then(|p| p.cgroup.as_deref())
            .map(|c| crate::text::escape(c.as_bytes()))
    };
    // The group's column only where the name keeps its 15 columns, and at most 24 wide.
    let spare = block
        .inner(area)
        .width
        .saturating_sub(7 + 7 + 6 + 4 + super::layout::KEY_COLUMN);
    let cg_width = spare.min(24);
    let with_cgroup = cg_width >= 6 && shown.iter().any(|(id, _)| cgroup(*id).is_some());
    let header: Vec<&str> = {
        let mut h = TASK_HEADER.to_vec();
        if app.top.per_thread {
            h[0] = "tid";
        }
        if with_cgroup {
            h.push("cgroup");
        }
        h
    };
    let mut widths = TASK_WIDTHS.to_vec();
    if with_cgroup {
        widths.push(cg_width);
    }
    let rows = shown.iter().map(|(id, n)| {
        let mut cells = task_cells(*id, app.task_name(&tasks, *id), *n, total);
        if with_cgroup {
            cells.push(Span::raw(cgroup(*id).unwrap_or_default()));
        }
        cells
    });
    draw_grid(f, block, area, &widths, &header, rows);
}

fn draw_symbols(f: &mut Frame, area: Rect, app: &App) {
    use super::top_symbols::Zoom;
    use crate::callgraph::Span as Over;
    let (t, v) = (&app.shown().symbols, &app.symbols);
    let focused = app.focus == Pane::Symbols;
    let over = match v.span {
        Over::Recent => format!("last {} s", super::top_symbols::WINDOW_SECONDS),
        Over::SinceStart => "since start".to_string(),
    };
    let tasks = app.tasks();
    let comm = |pid: u32| app.task_name(&tasks, pid);
    let narrow = app
        .narrow
        .as_ref()
        .map(|n| format!(" of {} {}", n.pid, comm(n.pid)))
        .unwrap_or_default();
    let mark = |i: usize, cells: Vec<Span<'static>>| {
        if focused && i == v.selected {
            cells
                .into_iter()
                .map(|c| {
                    let style = c.style.add_modifier(Modifier::REVERSED);
                    c.style(style)
                })
                .collect()
        } else {
            cells
        }
    };
    if let Zoom::Tasks(key) = &v.zoom {
        let rows = t.tasks_of(v.span, key);
        let total: u64 = rows.iter().map(|r| r.1).sum();
        let block = pane_block(
            format!("Tasks running {} ({over}; Esc back)", t.name_of(key)),
            focused,
        );
        let visible = block.inner(area).height.saturating_sub(1) as usize;
        let skip = v.selected.saturating_sub(visible.saturating_sub(1));
        let cells = rows
            .into_iter()
            .enumerate()
            .skip(skip)
            .take(visible)
            .map(|(i, (pid, n))| mark(i, task_cells(pid, comm(pid), n, total)));
        draw_grid(f, block, area, TASK_WIDTHS, TASK_HEADER, cells);
        return;
    }
    let (rows, total) = t.rows(v, app.narrowed());
    let block = pane_block(
        format!(
            "Top symbols{narrow} ({over}, by {}, {total} samples)",
            v.sort.name()
        ),
        focused,
    );
    let visible = block.inner(area).height.saturating_sub(1) as usize;
    let skip = v.selected.saturating_sub(visible.saturating_sub(1));
    let kind = |k: bool| {
        if k {
            Span::styled("[k]", Style::default().fg(Color::Red))
        } else {
            Span::styled("[.]", Style::default().fg(Color::Green))
        }
    };
    let label = |r: &super::top_symbols::SymRow| {
        let sign = match (r.has_callers, r.expanded) {
            (_, true) => "- ",
            (true, false) => "+ ",
            (false, false) => "  ",
        };
        format!("{}{sign}{}", "  ".repeat(r.depth), r.name())
    };
    let cells = shown_rows(&rows, skip, visible).map(|(i, r)| {
        let mut c = vec![Span::raw(format!("{:5.1}%", r.share))];
        if t.callchains {
            c.push(Span::raw(if r.depth == 0 {
                format!("{:5.1}%", r.self_share)
            } else {
                String::new()
            }));
        }
        c.push(Span::raw(format!("{:>7}", r.samples)));
        c.push(kind(r.kernel));
        c.push(Span::raw(short_dso(r.dso())));
        c.push(Span::raw(label(r)));
        mark(i, c)
    });
    // With call chains: Children (the share of samples with the function anywhere on the
    // stack) and Self; without, one share.
    let inner = area.width.saturating_sub(2);
    let (widths, header): (Vec<u16>, &[&str]) = if t.callchains {
        (
            symbol_widths(&[6, 6, 7, 3], inner),
            &["child", "self", "samples", "", "binary", "symbol"],
        )
    } else {
        (
            symbol_widths(&[6, 7, 3], inner),
            &["share", "samples", "", "binary", "symbol"],
        )
    };
    draw_grid(f, block, area, &widths, header, cells);
}

/// Top symbols' columns in `inner` columns: `fixed` ones, the binary's (14 wide, down to 8
/// before the symbol's goes under [`super::layout::KEY_COLUMN`]), the symbol's (the rest).
fn symbol_widths(fixed: &[u16], inner: u16) -> Vec<u16> {
    let used: u16 = fixed.iter().sum::<u16>() + fixed.len() as u16 + 1;
    let binary = inner
        .saturating_sub(used + super::layout::KEY_COLUMN + super::layout::SYMBOL_MARK)
        .clamp(8, 14);
    let mut w = fixed.to_vec();
    w.extend([binary, 0]);
    w
}

/// A binary's name as the narrow column shows it: its file name (`libc.so.6`); the kernel
/// as perf top shows it (`[kernel]`), modules as they are (`[ext4]`).
fn short_dso(dso: &str) -> String {
    if dso == "[kernel.kallsyms]" {
        return "[kernel]".to_string();
    }
    if dso.starts_with('[') {
        return dso.to_string();
    }
    dso.rsplit('/').next().unwrap_or(dso).to_string()
}

/// The script column cut into one pane per script, at least 4 rows each: as many as fit.
fn script_panes(area: Rect, n: usize) -> Vec<Rect> {
    let fit = (area.height / 4).max(1) as usize;
    let n = n.min(fit).max(1) as u16;
    let h = area.height / n;
    let mut heights = vec![h; n as usize];
    if let Some(last) = heights.last_mut() {
        *last += area.height - h * n;
    }
    stack(area, &heights)
}

/// The pane of script `i`: what its `on_tick()` returned, then its messages. The last pane
/// drawn says how many scripts did not fit (`hidden`).
fn draw_script(f: &mut Frame, area: Rect, app: &App, i: usize, hidden: usize) {
    let scripts = &app.shown().scripts;
    let Some(p) = scripts.get(i) else { return };
    let more = if hidden > 0 && i + 1 + hidden == scripts.len() {
        format!(" (+{hidden} more scripts: a taller terminal shows them)")
    } else {
        String::new()
    };
    let block = pane_block(
        format!("Script: {}{more}", p.name),
        app.focus == Pane::Script(i),
    );
    let lines: Vec<Line> = p
        .lines
        .iter()
        .map(|l| Line::from(l.clone()))
        .chain(p.messages.iter().map(|(m, err)| {
            let style = if *err {
                Style::default().fg(Color::Red)
            } else {
                Style::default().fg(Color::Gray)
            };
            Line::from(Span::styled(m.clone(), style))
        }))
        .skip(app.script_scroll(i))
        .take(area.height as usize)
        .collect();
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// The colour of a record type, in the log, the status bar and the help.
pub(crate) fn type_style(t: RecordType) -> Style {
    let c = match t {
        RecordType::Sample => Color::Gray,
        RecordType::Fork => Color::Green,
        RecordType::Exit => Color::Red,
        RecordType::Comm => Color::Yellow,
        RecordType::Mmap => Color::Blue,
        RecordType::Lost | RecordType::LostSamples => Color::LightRed,
        RecordType::Throttle | RecordType::Unthrottle => Color::Magenta,
        RecordType::Switch => Color::Cyan,
    };
    Style::default().fg(c)
}

fn log_line(app: &App, ev: &Event) -> Line<'static> {
    // The event's Display escapes comm and file names. Right/Left scroll the record, the
    // time stays. An exec's command line follows its record (as the filter's words see it).
    let mut body = ev.to_string();
    if let crate::event::EventKind::Comm {
        pid, exec: true, ..
    } = ev.kind
    {
        if let Some(argv) = app.tasks().exec_argv(pid, ev.time).filter(|a| !a.is_gone()) {
            body.push_str(" argv: ");
            body.push_str(&argv.line());
        }
    }
    let body = match app.log.hscroll {
        0 => body,
        n => body.chars().skip(n).collect(),
    };
    Line::from(vec![
        Span::styled(rel(app, ev.time), Style::default().fg(Color::DarkGray)),
        Span::raw(" "),
        Span::styled(body, type_style(ev.record_type())),
    ])
}

fn draw_log(f: &mut Frame, area: Rect, app: &App) {
    let filter = if app.filter().is_empty() {
        String::new()
    } else {
        format!(" filter: {}", app.filter().source())
    };
    let data = app.shown();
    let (held, samples) = data.log_held();
    let hidden = if app.samples_in_log() || samples == 0 {
        ""
    } else {
        ", samples hidden: S"
    };
    let right = match app.log.hscroll {
        0 => String::new(),
        n => format!(" [→{n}]"),
    };
    let title = format!(
        "Event log{} ({}/{held}{hidden}){filter}{}{right}",
        narrowed(app),
        data.log_len(),
        scroll_note(app.log.scroll, app.paused)
    );
    let block = pane_block(title, app.focus == Pane::Log);
    let inner = block.inner(area);
    let visible = inner.height as usize;
    let (start, end) = window(data.log_len(), app.log.scroll, visible);
    f.render_widget(block, area);
    // Line by line into the buffer: what a Paragraph without wrapping draws, without its
    // reflow machinery (the log is redrawn on every frame of a busy run).
    let buf = f.buffer_mut();
    for (row, ev) in data.log_range(start, end).into_iter().enumerate() {
        let line = log_line(app, ev);
        buf.set_line(inner.x, inner.y + row as u16, &line, inner.width);
    }
}

fn draw_footer(f: &mut Frame, area: Rect, app: &App) {
    if let Some(edit) = &app.edit {
        let mut lines = vec![Line::from(vec![
            Span::styled(
                " filter> ",
                Style::default()
                    .fg(Color::Black)
                    .bg(Color::Cyan)
                    .add_modifier(Modifier::BOLD),
            ),
            Span::raw(" "),
            Span::raw(edit.text.clone()),
            Span::styled("█", Style::default().fg(Color::Cyan)),
            Span::styled(
                "   Enter apply · Esc cancel · ? syntax in help",
                Style::default().fg(Color::DarkGray),
            ),
        ])];
        if let Some(e) = &edit.error {
            lines.push(Line::from(Span::styled(
                format!(" error: {e} (the previous filter stays)"),
                Style::default().fg(Color::White).bg(Color::Red),
            )));
        }
        f.render_widget(Paragraph::new(lines), area);
        return;
    }
    let key = Style::default()
        .fg(Color::Black)
        .bg(Color::Cyan)
        .add_modifier(Modifier::BOLD);
    let mut spans = Vec::new();
    let keys: &[(&str, &str)] = match app.replay {
        Some(_) => &[
            ("q", "quit"),
            ("?", "help"),
            ("space", "play/pause"),
            ("< >", "speed"),
            ("[ ]", "-/+10 s"),
            ("{ }", "start/end"),
            ("/", "filter"),
            ("Tab", "focus"),
        ],
        None => &[
            ("q", "quit"),
            ("?", "help"),
            ("/", "filter"),
            ("Tab", "focus"),
            ("z", "zoom"),
            ("space", "pause"),
            ("↑↓ PgUp PgDn", "scroll"),
            ("c", "clear"),
        ],
    };
    for &(k, what) in keys {
        spans.push(Span::styled(format!(" {k} "), key));
        spans.push(Span::raw(format!(" {what} ")));
    }
    if let Some(m) = &app.message {
        spans.push(Span::styled(
            format!(" {m}"),
            Style::default().fg(Color::Yellow),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The help overlay: the keys (a replay's first, in place of the live pause), then the
/// filter's syntax.
fn draw_help(f: &mut Frame, area: Rect, replay: bool) {
    let mut lines = Vec::new();
    let mut table = |title: &'static str, keys: &[(&'static str, &'static str)]| {
        lines.push(Line::from(Span::styled(
            title,
            Style::default().add_modifier(Modifier::BOLD),
        )));
        for (k, what) in keys {
            // A replay's space is its own (above).
            if replay && k.starts_with("space") && title == "Keys" {
                continue;
            }
            lines.push(Line::from(vec![
                Span::styled(format!("  {k:<16}"), Style::default().fg(Color::Cyan)),
                Span::raw(*what),
            ]));
        }
    };
    if replay {
        table("Replay (a recording: perfwatch -i FILE)", REPLAY_KEYS);
    }
    table("Keys", KEYS);
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "Filter (/ here, --filter in --plain/--json)",
        Style::default().add_modifier(Modifier::BOLD),
    )));
    lines.extend(SYNTAX_HELP.lines().map(|l| Line::from(format!("  {l}"))));
    let w = 84.min(area.width);
    // Lines longer than the box wrap: count the rows they take.
    let inner = w.saturating_sub(2).max(1) as usize;
    let rows: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
    let h = (rows as u16 + 2).min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(Style::default().fg(Color::Cyan))
                    .title(" Help: any key closes "),
            )
            .wrap(Wrap { trim: false }),
        r,
    );
}
