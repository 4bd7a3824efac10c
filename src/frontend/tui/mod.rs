//! The interactive monitor: the default frontend on a terminal.
//!
//! One loop selects over the batches, the keyboard and a render tick (gitui's shape): batches
//! only update state, and the screen is drawn on the tick (~15/s) or after input, never once
//! per record, so a fork storm costs the readers nothing extra. [`app`] is the state (pure),
//! [`ui`] draws it, [`input`] maps keys.
//!
//! The terminal is restored on every way out: the [`TerminalGuard`] on drop (q, errors, a
//! stop signal), and a panic hook that restores it before the panic message is printed. The
//! summary is printed by the caller after [`run`] returns, on the normal screen.

pub mod app;
mod cpus;
pub(crate) mod frame_times;
pub mod input;
pub mod layout;
pub mod log;
mod panes;
mod proc_listing;
mod rates;
pub mod replay;
mod task_rows;
pub mod tasks;
pub mod terminal;
pub(crate) mod top_symbols;
mod top_tasks;
pub mod tree;
pub mod ui;
mod widgets;

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, never, select, unbounded};
use crossterm::event::{Event as TermEvent, KeyEventKind};
use ratatui::Terminal;
use ratatui::backend::{Backend, CrosstermBackend};

use crate::clock::clock_ns;
use crate::filter::Filter;
use crate::monitor::Monitor;
use crate::pane::PaneMsg;
use crate::pipeline::Pipeline;
use crate::stats::Totals;
use crate::stop::{StopReason, StopRule, Watched};
use app::{App, AppConfig};
pub(crate) use terminal::{TerminalGuard, restore_terminal};

/// The shortest time between two frames drawn for new records (input redraws at once).
pub(crate) const FRAME: Duration = Duration::from_millis(100);
/// The frame period while only samples come (see the event loop).
pub(crate) const SAMPLES_FRAME: Duration = Duration::from_millis(1000);

/// The calling thread's CPU time (for the frame times).
fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Options of a TUI run.
#[derive(Debug, Default)]
pub struct TuiOptions {
    /// Log entries kept (`--history`).
    pub history: usize,
    /// The filter in force at start (`--filter`).
    pub filter: Option<Filter>,
    /// `--folded FILE`: fed with every event in time order.
    pub folded: Option<crate::folded::Folding>,
}

/// Restore the terminal before any panic message, so it is readable and the shell usable.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
}

/// Collects a frame and writes it to stdout in one go at `flush` (ratatui flushes after
/// every frame). stdout's own buffer is small and line-buffered, which made a frame a dozen
/// write(2) calls. Unlike a `BufWriter`, dropping it discards an unfinished frame: after a
/// panic the terminal has been restored, and half a frame must not be written over it.
#[derive(Default)]
pub(crate) struct FrameWriter {
    buf: Vec<u8>,
}

impl Write for FrameWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if terminal::dying() {
            // A fatal signal restored the terminal: no frame goes over it.
            self.buf.clear();
            return Ok(());
        }
        let mut out = io::stdout().lock();
        let r = out.write_all(&self.buf).and_then(|()| out.flush());
        self.buf.clear();
        r
    }
}

/// Reads the keyboard on its own thread, so the loop can select over it with the batches.
struct InputThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl InputThread {
    fn spawn() -> io::Result<(InputThread, Receiver<TermEvent>)> {
        let (tx, rx) = unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("perfwatch-input".into())
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    // Poll with a timeout so that the thread sees `stop` and ends before the
                    // terminal is restored (it must not swallow the shell's input after).
                    match crossterm::event::poll(INPUT_POLL) {
                        Ok(true) => match crossterm::event::read() {
                            Ok(ev) => {
                                if tx.send(ev).is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        },
                        Ok(false) => {}
                        Err(_) => return,
                    }
                }
            })?;
        Ok((
            InputThread {
                stop,
                handle: Some(handle),
            },
            rx,
        ))
    }
}

/// How often the input thread looks at `stop` while no key comes: each look is a wake-up
/// (an idle cost), and the longest `q` waits for the thread before the terminal is restored.
const INPUT_POLL: Duration = Duration::from_millis(150);

/// How long to wait for the input thread to see `stop`.
const INPUT_JOIN: Duration = Duration::from_millis(500);

impl Drop for InputThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let Some(h) = self.handle.take() else { return };
        // When the terminal hung up, crossterm can stay inside read() for good (spinning on
        // the dead tty); never let that hold up the shutdown: wait a little, then leave it
        // to end with the process.
        let deadline = Instant::now() + INPUT_JOIN;
        while !h.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }
}

/// What a TUI run shows, besides the stream: the view's configuration (from the monitor's
/// info, or a recording's), the source's counters, the events' clock, and for a recording
/// its replay.
pub struct Screen<'a> {
    pub cfg: AppConfig,
    /// The source's counters, read on each tick.
    pub totals: &'a dyn Fn() -> Totals,
    /// The events' clock, read for each frame (a replay has its own).
    pub now: &'a dyn Fn() -> u64,
    /// A recording replayed (see [`replay`]); `None` live.
    pub replay: Option<replay::Replay<'a>>,
}

/// Run the TUI until stopped, live or replaying a recording; returns why, and the folded
/// stacks it fed, for the run's owner to report after the terminal is restored.
///
/// `pipe` is the stream (the source's batches, ordered, through the scripts if any);
/// `watched` its source; `panes` carries what scripts want shown in their panes.
pub fn run(
    watched: &mut dyn Watched,
    pipe: &mut Pipeline,
    panes: Option<Receiver<PaneMsg>>,
    opts: TuiOptions,
    stop: &StopRule,
    screen: Screen<'_>,
) -> anyhow::Result<crate::frontend::Outcome> {
    let Screen {
        cfg,
        totals,
        now,
        replay,
    } = screen;
    let mut app = App::new(AppConfig {
        history: if opts.history == 0 {
            app::DEFAULT_HISTORY
        } else {
            opts.history
        },
        ..cfg
    })
    .with_model(pipe.model().clone());
    if let Some(f) = opts.filter {
        app.set_filter(f);
    }
    app.set_folding(opts.folded);
    match &replay {
        Some(r) => {
            app.replay = Some(r.view());
            // The recording's processes are not this machine's: no /proc look-ups.
            app.proc_alive = None;
        }
        None => app.proc_alive = Some(proc_listing::latest),
    }
    if std::env::var_os(frame_times::ENV).is_some() {
        app.frame_times = Some(Box::default());
    }
    let reason = on_terminal(&mut app, pipe, watched, panes, stop, totals, now, replay)?;
    Ok(crate::frontend::Outcome {
        reason,
        folded: app.take_folding(),
    })
}

/// The events' clock's time when `mon` started: where a live TUI's panes start counting.
pub(crate) fn started_ns(mon: &Monitor) -> u64 {
    clock_ns(mon.info.clockid)
        .saturating_sub(mon.started.elapsed().as_nanos().min(u64::MAX as u128) as u64)
}

/// The terminal taken, the loop run on it, the terminal restored.
#[allow(clippy::too_many_arguments)]
fn on_terminal(
    app: &mut App,
    pipe: &mut Pipeline,
    watched: &mut dyn Watched,
    panes: Option<Receiver<PaneMsg>>,
    stop: &StopRule,
    totals: &dyn Fn() -> Totals,
    now: &dyn Fn() -> u64,
    replay: Option<replay::Replay<'_>>,
) -> anyhow::Result<StopReason> {
    install_panic_hook();
    let suspend = terminal::Suspend::install();
    let mut guard = TerminalGuard::enter()?;
    // Not `Terminal::clear`: it asks the terminal for the cursor position, and a terminal
    // that does not answer would stop perfwatch. The guard cleared the screen already.
    let mut term = Terminal::new(CrosstermBackend::new(FrameWriter::default()))?;
    let (input, keys) = InputThread::spawn()?;
    let inputs = LoopInputs {
        pipe,
        watched,
        stop,
        keys,
        panes: panes.unwrap_or_else(never),
        totals,
        now,
        frame: FRAME,
        suspend: Some(&suspend),
        replay,
    };
    let result = run_loop(&mut term, app, inputs, move || drop(input));
    drop(term);
    guard.restore();
    if let Some(t) = &app.frame_times {
        eprintln!("perfwatch: {}", t.report());
    }
    result
}

/// Everything the TUI's loop reads, in one place: the pipeline and the monitor, the stop
/// rule, the terminal's input, the scripts' panes, the counters and the clock. A test builds
/// one from channels and fakes of its own and drives the whole loop on a `TestBackend`.
pub struct LoopInputs<'a> {
    pub pipe: &'a mut Pipeline,
    pub watched: &'a mut dyn Watched,
    pub stop: &'a StopRule,
    /// Keys, mouse and resizes (`never()` when there is no terminal input).
    pub keys: Receiver<TermEvent>,
    /// What scripts want shown (`never()` without scripts).
    pub panes: Receiver<PaneMsg>,
    /// The readers' counters, read on each tick.
    pub totals: &'a dyn Fn() -> Totals,
    /// The events' clock, read for each frame.
    pub now: &'a dyn Fn() -> u64,
    /// The shortest time between two frames drawn for new records.
    pub frame: Duration,
    /// Ctrl-Z and SIGTSTP: leave the terminal, stop, take it back on SIGCONT (None in tests
    /// without a terminal).
    pub suspend: Option<&'a terminal::Suspend>,
    /// A recording replayed: the gate and clock between the pipeline and the app (None
    /// live).
    pub replay: Option<replay::Replay<'a>>,
}

/// The TUI's loop until a stop, then the shutdown: the readers are asked to stop, and their
/// last records (and what the scripts hold) are taken within [`crate::stop::SHUTDOWN_GRACE`].
/// `input_done` is called as soon as the loop ends (to stop reading the terminal before
/// waiting for the readers).
pub fn run_loop<B: Backend>(
    term: &mut Terminal<B>,
    app: &mut App,
    inputs: LoopInputs<'_>,
    input_done: impl FnOnce(),
) -> anyhow::Result<StopReason>
where
    B::Error: Send + Sync + 'static,
{
    let LoopInputs {
        pipe,
        watched,
        stop,
        keys,
        panes,
        totals,
        now,
        frame,
        suspend,
        mut replay,
    } = inputs;
    let result = event_loop(
        term,
        app,
        pipe,
        watched,
        stop,
        keys.clone(),
        panes,
        totals,
        now,
        frame,
        suspend,
        replay.as_mut(),
    );
    // At a natural end, scripts get every event first, however long they take, with their
    // progress in the footer (q, Ctrl-C or a signal cut that short): the terminal is read
    // until then. Otherwise it is let go at once, before the wait for the readers.
    let natural = result.as_ref().is_ok_and(|r| r.is_natural());
    let mut input_done = Some(input_done);
    if !natural {
        if let Some(done) = input_done.take() {
            done();
        }
    }
    let cut = || {
        stop.signal().is_some()
            || keys.try_iter().any(|e| match e {
                TermEvent::Key(k) if k.kind != KeyEventKind::Release => is_quit_key(&k),
                _ => false,
            })
    };
    pipe.shut_down(watched, natural, &cut, &mut |line| {
        let _ = draw_with_bottom_line(term, app, &line);
    });
    if let Some(done) = input_done.take() {
        done();
    }
    // A replay ends where it is: what the pipeline held beyond its position is not shown
    // (nor fed to `--folded`).
    while let Some(chunk) = pipe.next_chunk() {
        if replay.is_none() {
            app.on_chunk(chunk);
        }
    }
    result
}

/// The screen with `line` over its bottom row (where the key hints are): what the end of a
/// run is waiting for, seen whatever the width.
fn draw_with_bottom_line<B: Backend>(
    term: &mut Terminal<B>,
    app: &App,
    line: &str,
) -> Result<(), B::Error> {
    use ratatui::style::{Color, Style};
    use ratatui::widgets::{Clear, Paragraph};
    term.draw(|f| {
        ui::draw(f, app);
        let mut area = f.area();
        area.y += area.height.saturating_sub(1);
        area.height = area.height.min(1);
        f.render_widget(Clear, area);
        f.render_widget(
            Paragraph::new(line).style(Style::default().fg(Color::Yellow)),
            area,
        );
    })
    .map(|_| ())
}

/// `q` or Ctrl-C: what stops the TUI (also the wait for a script at the end of a run).
fn is_quit_key(k: &crossterm::event::KeyEvent) -> bool {
    use crossterm::event::{KeyCode, KeyModifiers};
    k.code == KeyCode::Char('q')
        || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL))
}

/// Records worth a frame soon: a task started, was renamed or ended, or records were lost.
/// Samples, mappings, switches and throttling wait for the next second's frame (an idle
/// machine sampled at 4 kHz throttles and maps now and then; each of those was a frame).
fn is_lively(kind: &crate::event::EventKind) -> bool {
    use crate::event::EventKind as K;
    matches!(
        kind,
        K::Fork(_) | K::Exit(_) | K::Comm { .. } | K::Lost { .. } | K::LostSamples { .. }
    )
}

/// The loop has no clock of its own: it wakes for records (the readers send a batch at
/// least four times a second, all CPUs at once), for input, for a frame that is due, and for
/// the elapsed-time display's next second. An idle TUI draws once a second.
#[allow(clippy::too_many_arguments)]
fn event_loop<B: Backend>(
    term: &mut Terminal<B>,
    app: &mut App,
    pipe: &mut Pipeline,
    watched: &mut dyn Watched,
    stop: &StopRule,
    keys: Receiver<TermEvent>,
    panes: Receiver<PaneMsg>,
    totals: &dyn Fn() -> Totals,
    now: &dyn Fn() -> u64,
    frame: Duration,
    suspend: Option<&terminal::Suspend>,
    mut replay: Option<&mut replay::Replay<'_>>,
) -> anyhow::Result<StopReason>
where
    B::Error: Send + Sync + 'static,
{
    const SECOND: Duration = Duration::from_secs(1);
    let no_panes = never();
    let mut pane_rx = &panes;
    let no_input = never();
    let mut input_rx = &keys;
    let no_batches = never();
    let start = Instant::now();
    // Live, the panes' clock is the events' clock now; replayed, the replay's position.
    let tick = |app: &mut App, replay: &Option<&mut replay::Replay<'_>>| match replay {
        Some(r) => {
            app.on_tick(r.now());
            app.replay = Some(r.view());
        }
        None => app.on_tick(now()),
    };
    // A replay counts the records up to its position.
    let counters = |replay: &Option<&mut replay::Replay<'_>>| match replay {
        Some(r) => r.totals(totals()),
        None => totals(),
    };
    tick(app, &replay);
    app.set_totals(counters(&replay));
    ui::render(term, app)?;
    let mut last_draw = Instant::now();
    // Something to show since the last frame; and something besides samples (a task
    // started or ended, a mapping, a loss), which is worth a frame soon. Samples alone move
    // counters and the log's tail: a frame every SAMPLES_FRAME is enough for them, as
    // perf top refreshes every two seconds, and it is most of what a sampling TUI costs.
    let mut dirty = false;
    let mut lively = false;
    let mut drawn_second = 0;
    loop {
        let since = start.elapsed();
        let period = if lively {
            frame
        } else {
            frame.max(SAMPLES_FRAME)
        };
        let mut wait = if dirty {
            period.saturating_sub(last_draw.elapsed())
        } else {
            SECOND - Duration::from_nanos((since.as_nanos() % SECOND.as_nanos()) as u64)
        };
        // A replay that moves is drawn every frame (its position bar moves, its records are
        // let in as the clock passes them); one that holds records takes no more batches.
        let moving = replay.as_ref().is_some_and(|r| r.moving());
        if moving {
            wait = wait.min(frame.saturating_sub(last_draw.elapsed()));
        }
        let holding = replay.as_ref().is_some_and(|r| r.holding());
        let mut redraw = false;
        let mut suspend_key = false;
        select! {
            recv(if holding { &no_batches } else { pipe.batches() }) -> msg => pipe.take(msg),
            recv(pipe.staged()) -> msg => pipe.take_staged(msg),
            recv(input_rx) -> ev => match ev {
                Ok(ev) => {
                    match ev {
                        TermEvent::Key(k) if terminal::is_suspend_key(&k) => {
                            suspend_key = k.kind != KeyEventKind::Release;
                        }
                        TermEvent::Key(k) if k.kind != KeyEventKind::Release => app.on_key(k),
                        TermEvent::Mouse(m) => app.on_mouse(m),
                        TermEvent::Resize(..) => term.autoresize()?,
                        _ => {}
                    }
                    redraw = true;
                }
                // The input thread ended (the terminal went away): stop selecting on it, or
                // the loop would spin on the closed channel. SIGHUP stops the run.
                Err(_) => input_rx = &no_input,
            },
            recv(pane_rx) -> msg => match msg {
                Ok(m) => {
                    app.on_pane_msg(m);
                    dirty = true;
                    lively = true;
                }
                // The script stage ended: stop selecting on it, or the loop would spin.
                Err(_) => pane_rx = &no_panes,
            },
            default(stop.wait_at_most(wait)) => {}
        }
        let taken = app.frame_times.is_some().then(Instant::now);
        let mut chunks = 0;
        if let Some(r) = replay.as_deref_mut() {
            for cmd in app.take_replay_cmds() {
                match r.command(cmd, pipe) {
                    // Read again from the start: the panes start afresh on the new model.
                    Ok(true) => app.restart(pipe.model().clone(), r.view().start),
                    Ok(false) => {}
                    Err(why) => app.message = Some(why),
                }
            }
        }
        match replay.as_deref_mut() {
            None => {
                while let Some(chunk) = pipe.next_chunk() {
                    dirty |= !chunk.events.is_empty();
                    lively |= chunk.events.iter().any(|e| is_lively(&e.kind));
                    app.on_chunk(chunk);
                    chunks += 1;
                }
            }
            Some(r) => loop {
                let known = r.view().start;
                while !r.holding() {
                    let Some(chunk) = pipe.next_chunk() else {
                        break;
                    };
                    r.take(chunk);
                }
                if pipe.all_ended() {
                    r.read_to_end();
                }
                if known == 0 && r.view().start != 0 {
                    // A pipe's first timed record: the panes count from it.
                    app.restart(pipe.model().clone(), r.view().start);
                }
                let Some(chunk) = r.release() else { break };
                dirty = true;
                lively |= chunk.events.iter().any(|e| is_lively(&e.kind));
                app.on_chunk(chunk);
                chunks += 1;
            },
        }
        if let (Some(t0), Some(t)) = (taken, app.frame_times.as_mut()) {
            if chunks > 0 {
                t.ingest(chunks, t0.elapsed());
            }
        }
        for note in pipe.take_notes() {
            // In the footer now; all of them on stderr after the screen is restored.
            app.message = Some(note);
            dirty = true;
        }
        if app.quit {
            // q is the same request as Ctrl-C: a normal stop, exit status 0.
            return Ok(StopReason::Signal(libc::SIGINT));
        }
        // A replay stays on its last frame at the end of the recording, until q.
        if let Some(reason) = stop.check(watched, pipe.all_ended() && replay.is_none()) {
            return Ok(reason);
        }
        if let Some(suspend) = suspend {
            if (suspend.take() || suspend_key) && suspend.suspend()? {
                // Continued: the screen was cleared; draw every cell again, at the size the
                // terminal has now.
                term.autoresize()?;
                term.swap_buffers();
                redraw = true;
            }
        }
        let second = start.elapsed().as_secs();
        if redraw
            || (dirty && last_draw.elapsed() >= period)
            || second != drawn_second
            || (moving && last_draw.elapsed() >= frame)
        {
            last_draw = Instant::now();
            let cpu0 = app.frame_times.is_some().then(thread_cpu_ns);
            tick(app, &replay);
            app.set_totals(counters(&replay));
            dirty = false;
            lively = false;
            drawn_second = second;
            let drawn = ui::render(term, app);
            if let (Some(t), Some(c0)) = (app.frame_times.as_mut(), cpu0) {
                let cpu = Duration::from_nanos(thread_cpu_ns().saturating_sub(c0));
                t.frame(last_draw.elapsed(), cpu);
            }
            if let Err(e) = drawn {
                // A terminal that hung up fails the write just before SIGHUP is seen.
                std::thread::sleep(frame);
                if let Some(sig) = stop.signal() {
                    return Ok(StopReason::Signal(sig));
                }
                return Err(e.into());
            }
        }
    }
}
