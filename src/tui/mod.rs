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
pub mod input;
pub mod terminal;
pub mod ui;

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, never, select, tick, unbounded};
use crossterm::event::{DisableMouseCapture, EnableMouseCapture, Event as TermEvent, KeyEventKind};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use crate::filter::{Filter, proc_comms};
use crate::monitor::Monitor;
use crate::pane::PaneMsg;
use crate::perf::reader::{Batch, clock_ns};
use crate::plain::StopReason;
use crate::signals::StopSignals;
use app::{App, AppConfig};

/// How often the screen is redrawn (and stop conditions looked at) without input.
pub const TICK: Duration = Duration::from_millis(100);
/// How long to wait for the readers' last batches at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
/// Batches taken from the channel in one go before the loop looks at input again.
const BATCHES_PER_TURN: usize = 64;

/// Options of a TUI run.
#[derive(Clone, Debug, Default)]
pub struct TuiOptions {
    pub duration: Option<Duration>,
    /// Log entries kept (`--history`).
    pub history: usize,
    /// The filter in force at start (`--filter`).
    pub filter: Option<Filter>,
    /// `--folded FILE`: fed with every event in time order.
    pub folded: Option<crate::folded::Folding>,
}

/// Raw mode, the alternate screen and mouse capture, for as long as it lives.
pub struct TerminalGuard {
    active: bool,
}

/// Put the terminal back as it was. Safe to call twice.
pub fn restore_terminal() {
    terminal::disarm();
    let _ = disable_raw_mode();
    let mut out = io::stdout();
    let _ = execute!(
        out,
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = out.flush();
}

impl TerminalGuard {
    pub fn enter() -> io::Result<TerminalGuard> {
        // From here a fatal signal restores the terminal before it ends perfwatch.
        terminal::arm();
        let guard = TerminalGuard { active: true };
        TerminalGuard::reenter()?;
        Ok(guard)
    }

    /// Raw mode, the alternate screen (cleared) and mouse capture: at start, and again after
    /// a suspend.
    pub fn reenter() -> io::Result<()> {
        terminal::arm();
        enable_raw_mode()?;
        execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
        )
    }

    /// Restore now (and not again on drop).
    pub fn restore(&mut self) {
        if std::mem::take(&mut self.active) {
            restore_terminal();
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        self.restore();
    }
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
pub struct FrameWriter {
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

/// Run the TUI until stopped; returns why, for `run::finish` to report after the terminal
/// is restored.
///
/// `rx` is the stream of batches (the monitor's channel, or the script stage's output);
/// `pane_rx` carries what scripts want shown in their panes.
pub fn run(
    mon: &mut Monitor,
    rx: &Receiver<Batch>,
    pane_rx: Option<&Receiver<PaneMsg>>,
    opts: TuiOptions,
    signals: &StopSignals,
) -> anyhow::Result<StopReason> {
    // Started-at in the events' clock: the monitor started just before.
    let start_ns = clock_ns(mon.info.clockid)
        .saturating_sub(mon.started.elapsed().as_nanos().min(u64::MAX as u128) as u64);
    let history = if opts.history == 0 {
        app::DEFAULT_HISTORY
    } else {
        opts.history
    };
    let mut app = App::new(AppConfig::from_info(&mon.info, history, start_ns));
    app.seed_tasks(proc_comms());
    if let Some(f) = opts.filter {
        app.set_filter(f);
    }
    let folding = opts.folded.is_some();
    app.set_folding(opts.folded);

    install_panic_hook();
    let suspend = terminal::Suspend::install();
    let mut guard = TerminalGuard::enter()?;
    // Not `Terminal::clear`: it asks the terminal for the cursor position, and a terminal
    // that does not answer would stop perfwatch. The guard cleared the screen already.
    let mut term = Terminal::new(CrosstermBackend::new(FrameWriter::default()))?;
    let (input, input_rx) = InputThread::spawn()?;
    let result = event_loop(
        mon,
        rx,
        pane_rx,
        &mut app,
        &mut term,
        &input_rx,
        opts.duration,
        signals,
        &suspend,
    );
    drop(input);
    mon.request_stop();
    // Let the readers send their last batches (so they end), bounded in time.
    crate::perf::reader::collect_last_batches(
        rx,
        SHUTDOWN_GRACE,
        &mut app,
        App::all_ended,
        App::on_batch,
    );
    if folding {
        // The folded stacks take the samples still held for ordering too.
        app.flush();
    }
    drop(term);
    guard.restore();
    result
}

#[allow(clippy::too_many_arguments)]
fn event_loop(
    mon: &mut Monitor,
    rx: &Receiver<Batch>,
    pane_rx: Option<&Receiver<PaneMsg>>,
    app: &mut App,
    term: &mut Terminal<CrosstermBackend<FrameWriter>>,
    input_rx: &Receiver<TermEvent>,
    duration: Option<Duration>,
    signals: &StopSignals,
    suspend: &terminal::Suspend,
) -> anyhow::Result<StopReason> {
    let ticker = tick(TICK);
    let no_panes = never();
    let mut pane_rx = pane_rx.unwrap_or(&no_panes);
    let no_input = never();
    let mut input_rx = input_rx;
    let start = Instant::now();
    app.on_tick(clock_ns(mon.info.clockid));
    app.set_totals(mon.stats.snapshot());
    ui::render(term, app)?;
    // Something to show since the last frame: without it a tick redraws only when the
    // elapsed-time display moves on, so an idle TUI draws once a second.
    let mut dirty = false;
    let mut drawn_second = 0;
    loop {
        let mut redraw = false;
        let mut suspend_key = false;
        select! {
            recv(rx) -> msg => match msg {
                Ok(b) => {
                    dirty |= !b.events.is_empty();
                    app.on_batch(b);
                    for b in rx.try_iter().take(BATCHES_PER_TURN) {
                        dirty |= !b.events.is_empty();
                        app.on_batch(b);
                    }
                }
                Err(_) => return Ok(StopReason::TargetsGone),
            },
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
                }
                // The script stage ended: stop selecting on it, or the loop would spin.
                Err(_) => pane_rx = &no_panes,
            },
            recv(ticker) -> _ => {
                app.on_tick(clock_ns(mon.info.clockid));
                app.set_totals(mon.stats.snapshot());
                let second = start.elapsed().as_secs();
                redraw = dirty || second != drawn_second;
                drawn_second = second;
            }
        }
        if app.quit {
            // q is the same request as Ctrl-C: a normal stop, exit status 0.
            return Ok(StopReason::Signal(libc::SIGINT));
        }
        if let Some(sig) = signals.pending() {
            return Ok(StopReason::Signal(sig));
        }
        if (suspend.take() || suspend_key) && suspend.suspend()? {
            // Continued: the screen was cleared; draw every cell again, at the size the
            // terminal has now.
            term.autoresize()?;
            term.swap_buffers();
            redraw = true;
        }
        if mon.stats.failure().is_some() {
            return Ok(StopReason::ReaderFailed);
        }
        crate::debug_panic_point("frontend");
        if duration.is_some_and(|d| start.elapsed() >= d) {
            return Ok(StopReason::Duration);
        }
        if let Some(status) = mon.command_exit() {
            return Ok(StopReason::CommandExited(status));
        }
        if app.all_ended() {
            return Ok(StopReason::TargetsGone);
        }
        if redraw {
            dirty = false;
            if let Err(e) = ui::render(term, app) {
                // A terminal that hung up fails the write just before SIGHUP is seen.
                std::thread::sleep(TICK);
                if let Some(sig) = signals.pending() {
                    return Ok(StopReason::Signal(sig));
                }
                return Err(e.into());
            }
        }
    }
}
