//! A recording replayed in the TUI (`perfwatch -i FILE` on a terminal): the same pipeline
//! as for the line formats feeds the app, and a replay clock gates how far its ordered
//! chunks are let into the panes.
//!
//! [`ReplayClock`] is the clock (pure: every method takes the wall time it acts at, so the
//! tests drive it by hand): a position in the recording's own time that moves at 1× or 10×
//! the wall clock while playing, or as fast as the records decode, held at the recording's
//! ends; a jump is a seek that completes as fast as the records decode. [`Replay`] is the
//! gate the TUI's loop puts between the pipeline and the app: a chunk's events up to the
//! position go in, the rest wait (and while they wait the loop takes nothing more from the
//! pipeline, so the source waits too: memory stays bounded whatever the file's size). The
//! panes' windows ("last 10 s", the rates) follow the position, as the loop ticks the app
//! with it instead of the monotonic clock. A backward jump reads the file again from its
//! start (a new pipeline over a new read), then seeks; a pipe cannot be read again, so there
//! a backward jump is refused with a message.

use std::collections::VecDeque;
use std::time::Instant;

use crate::event::{Chunk, Event, EventKind};
use crate::pipeline::Pipeline;
use crate::stats::{CpuSnapshot, Totals};

const NS: u64 = 1_000_000_000;
/// How far `[` and `]` jump.
pub(crate) const JUMP_NS: u64 = 10 * NS;

/// How fast a replay plays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Speed {
    /// The recording's own pace.
    #[default]
    Real,
    /// Ten times its pace.
    Ten,
    /// As fast as the records decode.
    Max,
}

impl Speed {
    /// Recording nanoseconds per wall nanosecond (None: as fast as it decodes).
    fn factor(self) -> Option<u64> {
        match self {
            Speed::Real => Some(1),
            Speed::Ten => Some(10),
            Speed::Max => None,
        }
    }

    /// As the status bar says it.
    pub fn name(self) -> &'static str {
        match self {
            Speed::Real => "1x",
            Speed::Ten => "10x",
            Speed::Max => "max",
        }
    }

    pub fn faster(self) -> Speed {
        match self {
            Speed::Real => Speed::Ten,
            _ => Speed::Max,
        }
    }

    pub(crate) fn slower(self) -> Speed {
        match self {
            Speed::Max => Speed::Ten,
            _ => Speed::Real,
        }
    }
}

/// What a replay key asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayCmd {
    PlayPause,
    Faster,
    Slower,
    /// 10 s back.
    Back,
    /// 10 s on.
    Forward,
    ToStart,
    ToEnd,
}

/// The replay's clock: a position in the recording's time (its events' clock, ns).
#[derive(Clone, Debug)]
pub(crate) struct ReplayClock {
    /// The first sample's time (0 until known: a pipe's first record tells it).
    start: u64,
    /// The last record's time, once known (the file's header, or the end of the read).
    end: Option<u64>,
    /// The position at `anchor_wall`.
    anchor: u64,
    anchor_wall: u64,
    playing: bool,
    speed: Speed,
    /// A jump under way: the records up to here go in as fast as they decode; the clock
    /// goes on from here once they are in.
    seek: Option<u64>,
}

impl ReplayClock {
    /// A clock at `start` (0: not known yet), playing at 1×, at wall time `wall`.
    pub fn new(start: u64, end: Option<u64>, wall: u64) -> ReplayClock {
        ReplayClock {
            start,
            end: end.map(|e| e.max(start)),
            anchor: start,
            anchor_wall: wall,
            playing: true,
            speed: Speed::Real,
            seek: None,
        }
    }

    fn clamp(&self, t: u64) -> u64 {
        t.max(self.start).min(self.end.unwrap_or(u64::MAX))
    }

    /// The position at wall time `wall` (`u64::MAX` while playing as fast as the records
    /// decode, or seeking an end not known yet).
    pub fn position(&self, wall: u64) -> u64 {
        if let Some(t) = self.seek {
            return self.clamp(t);
        }
        if !self.playing {
            return self.clamp(self.anchor);
        }
        match self.speed.factor() {
            None => self.clamp(u64::MAX),
            Some(f) => {
                let moved = wall.saturating_sub(self.anchor_wall).saturating_mul(f);
                self.clamp(self.anchor.saturating_add(moved))
            }
        }
    }

    /// The position as shown, when the records are in up to `complete`.
    pub fn shown(&self, wall: u64, complete: u64) -> u64 {
        self.clamp(self.position(wall).min(complete))
    }

    fn reanchor(&mut self, at: u64, wall: u64) {
        self.anchor = self.clamp(at);
        self.anchor_wall = wall;
    }

    /// The records are in up to `complete` at `wall`: a seek that reached its target ends
    /// there; a clock that ran ahead of records not decoded yet (a slow pipe) waits for them.
    pub(crate) fn advance(&mut self, complete: u64, wall: u64) {
        if let Some(t) = self.seek {
            let t = self.clamp(t);
            if complete >= t {
                self.seek = None;
                self.reanchor(t, wall);
            }
            return;
        }
        if self.playing && self.speed != Speed::Max && self.position(wall) > complete {
            self.reanchor(complete, wall);
        }
    }

    /// Space: pause at what is shown, or play on from it.
    pub(crate) fn toggle(&mut self, wall: u64, complete: u64) {
        let at = self.shown(wall, complete);
        self.seek = None;
        self.reanchor(at, wall);
        self.playing = !self.playing;
    }

    /// Play at `speed` from what is shown.
    pub(crate) fn set_speed(&mut self, speed: Speed, wall: u64, complete: u64) {
        if self.seek.is_none() {
            let at = self.shown(wall, complete);
            self.reanchor(at, wall);
        }
        self.speed = speed;
    }

    /// Seek to `t` (held at the ends): the records up to it go in as fast as they decode.
    pub(crate) fn jump_to(&mut self, t: u64) {
        // Held at the ends when used: an end learnt meanwhile holds it.
        self.seek = Some(t.max(self.start));
    }

    /// Where a jump of `delta` ns from what is shown lands.
    pub fn target(&self, wall: u64, complete: u64, delta: i64) -> u64 {
        let from = match self.seek {
            Some(t) => self.clamp(t),
            None => self.shown(wall, complete),
        };
        self.clamp(from.saturating_add_signed(delta))
    }

    /// The first record's time, learnt from the records (a pipe's header does not say it).
    pub(crate) fn learn_start(&mut self, t: u64, wall: u64) {
        if self.start == 0 && t > 0 {
            self.start = t;
            self.reanchor(t, wall);
        }
    }

    /// The recording goes on to `t` at least (a record after the header's last sample, or
    /// the end of the read).
    pub(crate) fn extend_end(&mut self, t: u64) {
        if let Some(e) = self.end.as_mut() {
            *e = (*e).max(t);
        }
    }

    /// The read ended: the recording ends at `t`.
    pub(crate) fn set_end(&mut self, t: u64) {
        self.end = Some(self.end.unwrap_or(0).max(t).max(self.start));
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn end(&self) -> Option<u64> {
        self.end
    }

    pub fn playing(&self) -> bool {
        self.playing
    }

    pub fn speed(&self) -> Speed {
        self.speed
    }

    pub fn seeking(&self) -> bool {
        self.seek.is_some()
    }
}

/// What the status bar shows of a replay (the app's copy, set on each tick).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayView {
    pub start: u64,
    pub end: Option<u64>,
    pub position: u64,
    pub playing: bool,
    pub speed: Speed,
    pub seeking: bool,
    /// The whole recording has been read.
    pub read: bool,
    /// The position is at the end of a recording read to its end.
    pub at_end: bool,
    /// What the file says about itself (host, OS release, perf, CPUs, events, command line),
    /// escaped.
    pub about: String,
}

/// Read the recording again from its start: a new pipeline over a new read (Err: why it
/// could not be).
pub(crate) type Rewind<'a> = Box<dyn FnMut() -> Result<Pipeline, String> + 'a>;

/// The gate between the pipeline and the app (see the module's doc).
pub struct Replay<'a> {
    clock: ReplayClock,
    /// Records in, beyond the position: they wait.
    pending: VecDeque<Event>,
    /// The newest watermark of the chunks in (every record up to it is in).
    watermark: u64,
    /// The source has ended and every chunk is in.
    read: bool,
    /// The newest record's time taken.
    newest: u64,
    /// How to read the recording again, or why it cannot be (a pipe).
    rewind: Result<Rewind<'a>, String>,
    origin: Instant,
    about: String,
    /// The records let in, by CPU: what the status bar counts (the reader runs ahead).
    counted: Vec<CpuSnapshot>,
}

impl<'a> Replay<'a> {
    /// A replay from `start` to `end` (as the header says them, when it does), reading the
    /// recording again with `rewind` for a backward jump (Err: why it cannot be); `about`
    /// is what the file says about itself, escaped.
    pub fn new(
        start: Option<u64>,
        end: Option<u64>,
        rewind: Result<Rewind<'a>, String>,
        about: String,
    ) -> Replay<'a> {
        Replay {
            clock: ReplayClock::new(start.unwrap_or(0), end, 0),
            pending: VecDeque::new(),
            watermark: 0,
            read: false,
            newest: 0,
            rewind,
            origin: Instant::now(),
            about,
            counted: Vec::new(),
        }
    }

    fn wall(&self) -> u64 {
        self.origin.elapsed().as_nanos().min(u64::MAX as u128) as u64
    }

    /// The records are in up to here.
    fn complete(&self) -> u64 {
        if self.read {
            return u64::MAX;
        }
        match self.pending.front() {
            // Every record up to the first waiting one is in.
            Some(e) => e.time.saturating_sub(1).max(self.watermark),
            None => self.watermark,
        }
    }

    /// Whether records wait beyond the position: the loop then takes nothing more from the
    /// pipeline (the source waits).
    pub fn holding(&self) -> bool {
        // Until a pipe's first timed record says where the recording starts, nothing is let
        // in: the records are taken until it comes.
        self.clock.start() != 0 && !self.pending.is_empty()
    }

    /// An ordered chunk from the pipeline.
    pub fn take(&mut self, chunk: Chunk) {
        let wall = self.wall();
        for ev in chunk.events {
            self.clock.learn_start(ev.time, wall);
            self.clock.extend_end(ev.time);
            self.newest = self.newest.max(ev.time);
            self.pending.push_back(ev);
        }
        self.watermark = self.watermark.max(chunk.watermark);
    }

    /// The pipeline has given everything: the recording ends at its last record.
    pub fn read_to_end(&mut self) {
        if self.read {
            return;
        }
        self.read = true;
        self.clock.set_end(self.newest);
    }

    /// The records up to the position, for the app; the clock learns how far they are in.
    pub fn release(&mut self) -> Option<Chunk> {
        let wall = self.wall();
        let complete = self.complete();
        self.clock.advance(complete, wall);
        if self.clock.start() == 0 && !self.read {
            return None;
        }
        let pos = self.clock.position(wall);
        // At the end of a recording read to its end, whatever came after its last sample.
        let limit = match self.read && Some(pos) == self.clock.end() {
            true => u64::MAX,
            false => pos,
        };
        let n = self.pending.partition_point(|e| e.time <= limit);
        if n == 0 {
            return None;
        }
        let events: Vec<Event> = self.pending.drain(..n).collect();
        self.count(&events);
        let watermark = events.last().map_or(0, |e| e.time);
        Some(Chunk { events, watermark })
    }

    fn count(&mut self, events: &[Event]) {
        for e in events {
            let i = match self.counted.iter().position(|c| c.cpu == e.cpu) {
                Some(i) => i,
                None => {
                    self.counted.push(CpuSnapshot {
                        cpu: e.cpu,
                        ..Default::default()
                    });
                    self.counted.len() - 1
                }
            };
            let c = &mut self.counted[i].counts;
            c.records[e.record_type().index()] += 1;
            match e.kind {
                EventKind::Lost { lost, .. } => c.lost += lost,
                EventKind::LostSamples { lost } => c.lost_samples += lost,
                _ => {}
            }
        }
    }

    /// The status bar's counters: the records up to the position, their losses among them;
    /// what is of no time (perfwatch's drops, records that could not be read) as the reader
    /// counted it, `read`.
    pub fn totals(&self, read: Totals) -> Totals {
        let mut t = Totals::of(self.counted.clone());
        t.counts.dropped = read.dropped;
        t.counts.unknown = read.unknown;
        t.counts.malformed = read.malformed;
        t.counts.skipped_bytes = read.skipped_bytes;
        t
    }

    /// Where the replay is, as the panes' clock.
    pub fn now(&self) -> u64 {
        self.clock.shown(self.wall(), self.complete())
    }

    /// Whether the position moves by itself (the loop then ticks at least once a frame).
    pub fn moving(&self) -> bool {
        let at_end = self.read && Some(self.now()) == self.clock.end();
        (self.clock.playing() || self.clock.seeking()) && !at_end
    }

    /// What the status bar shows.
    pub fn view(&self) -> ReplayView {
        let position = self.now();
        ReplayView {
            start: self.clock.start(),
            end: self.clock.end(),
            position,
            playing: self.clock.playing(),
            speed: self.clock.speed(),
            seeking: self.clock.seeking(),
            read: self.read,
            at_end: self.read && Some(position) == self.clock.end(),
            about: self.about.clone(),
        }
    }

    /// A replay key. A backward jump past what is shown reads the recording again: the new
    /// pipeline replaces `pipe`, and the returned `true` tells the caller to start the panes
    /// afresh (on the new pipeline's model). Err: why the key did nothing.
    pub fn command(&mut self, cmd: ReplayCmd, pipe: &mut Pipeline) -> Result<bool, String> {
        let wall = self.wall();
        let complete = self.complete();
        let target = match cmd {
            ReplayCmd::PlayPause => {
                self.clock.toggle(wall, complete);
                return Ok(false);
            }
            ReplayCmd::Faster => {
                let s = self.clock.speed().faster();
                self.clock.set_speed(s, wall, complete);
                return Ok(false);
            }
            ReplayCmd::Slower => {
                let s = self.clock.speed().slower();
                self.clock.set_speed(s, wall, complete);
                return Ok(false);
            }
            ReplayCmd::Back => self.clock.target(wall, complete, -(JUMP_NS as i64)),
            ReplayCmd::Forward => self.clock.target(wall, complete, JUMP_NS as i64),
            ReplayCmd::ToStart => self.clock.start(),
            ReplayCmd::ToEnd => u64::MAX,
        };
        let shown = self.clock.shown(wall, complete);
        if target >= shown {
            self.clock.jump_to(target);
            return Ok(false);
        }
        let rewind = self.rewind.as_mut().map_err(|why| why.clone())?;
        *pipe = rewind()?;
        self.pending.clear();
        self.watermark = 0;
        self.newest = 0;
        self.counted.clear();
        self.read = false;
        self.clock.jump_to(target);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000 * NS;

    #[test]
    fn plays_at_its_speed_from_the_start() {
        let mut c = ReplayClock::new(S, Some(S + 60 * NS), 0);
        assert_eq!(c.position(0), S);
        assert_eq!(c.position(2 * NS), S + 2 * NS);
        c.set_speed(Speed::Ten, 2 * NS, u64::MAX);
        assert_eq!(c.position(3 * NS), S + 12 * NS, "10x from where it was");
        c.set_speed(Speed::Max, 3 * NS, u64::MAX);
        assert_eq!(c.position(3 * NS), S + 60 * NS, "max: the end");
        assert_eq!(
            c.shown(3 * NS, S + 20 * NS),
            S + 20 * NS,
            "shown: what is in"
        );
        c.set_speed(Speed::Real, 4 * NS, S + 30 * NS);
        assert_eq!(c.position(5 * NS), S + 31 * NS, "1x from what was shown");
    }

    #[test]
    fn pause_holds_the_position_and_play_goes_on_from_it() {
        let mut c = ReplayClock::new(S, None, 0);
        c.toggle(5 * NS, u64::MAX);
        assert!(!c.playing());
        assert_eq!(c.position(5 * NS), S + 5 * NS);
        assert_eq!(c.position(50 * NS), S + 5 * NS, "paused");
        c.toggle(50 * NS, u64::MAX);
        assert_eq!(c.position(51 * NS), S + 6 * NS);
    }

    #[test]
    fn held_at_both_ends() {
        let end = S + 20 * NS;
        let mut c = ReplayClock::new(S, Some(end), 0);
        assert_eq!(c.position(100 * NS), end, "never past the end");
        c.jump_to(0);
        assert_eq!(c.position(100 * NS), S, "never before the start");
        assert_eq!(c.target(0, u64::MAX, -(JUMP_NS as i64)), S);
        c.advance(u64::MAX, 100 * NS);
        assert_eq!(c.target(100 * NS, u64::MAX, JUMP_NS as i64), S + 10 * NS);
        assert_eq!(
            c.target(101 * NS, u64::MAX, JUMP_NS as i64),
            S + 11 * NS,
            "from where it plays"
        );
        assert_eq!(c.target(115 * NS, u64::MAX, JUMP_NS as i64), end);
    }

    #[test]
    fn a_jump_seeks_until_its_records_are_in_then_plays_on() {
        let mut c = ReplayClock::new(S, Some(S + 60 * NS), 0);
        c.jump_to(S + 30 * NS);
        assert!(c.seeking());
        // The records are in up to 10 s: the seek goes on, whatever the wall clock says.
        c.advance(S + 10 * NS, 7 * NS);
        assert_eq!(c.position(7 * NS), S + 30 * NS);
        assert_eq!(c.shown(7 * NS, S + 10 * NS), S + 10 * NS);
        c.advance(S + 31 * NS, 8 * NS);
        assert!(!c.seeking());
        assert_eq!(c.position(9 * NS), S + 31 * NS, "on at 1x from the target");
    }

    #[test]
    fn a_clock_ahead_of_its_records_waits_for_them() {
        let mut c = ReplayClock::new(S, None, 0);
        c.advance(S + 2 * NS, 5 * NS);
        assert_eq!(c.position(5 * NS), S + 2 * NS);
        assert_eq!(c.position(6 * NS), S + 3 * NS);
    }

    #[test]
    fn a_pipe_learns_its_start_and_end() {
        let mut c = ReplayClock::new(0, None, 0);
        c.learn_start(S, 4 * NS);
        assert_eq!(c.position(4 * NS), S);
        assert_eq!(c.position(5 * NS), S + NS);
        c.learn_start(S + NS, 5 * NS);
        assert_eq!(c.start(), S, "learnt once");
        c.extend_end(S + 9 * NS);
        assert_eq!(c.end(), None, "not known while the pipe goes on");
        c.set_end(S + 3 * NS);
        assert_eq!(c.position(100 * NS), S + 3 * NS);
    }

    fn ev(time: u64) -> Event {
        crate::testkit::events::sample(0, 7, time, 1)
    }

    #[test]
    fn the_gate_lets_in_what_is_up_to_the_position() {
        let mut r = Replay::new(
            Some(S),
            Some(S + 100 * NS),
            Err(String::new()),
            String::new(),
        );
        r.take(Chunk {
            events: vec![ev(0), ev(S - 5), ev(S + 50 * NS)],
            watermark: S + 50 * NS,
        });
        assert!(r.holding());
        let c = r.release().expect("the records before the start");
        assert_eq!(c.events.len(), 2);
        assert_eq!(
            r.totals(Totals::default()).total_records(),
            2,
            "the status bar counts what is let in"
        );
        assert!(r.holding(), "the later one waits");
        // Paused and sought to its time: in.
        r.clock.jump_to(S + 50 * NS);
        let c = r.release().expect("the record at the target");
        assert_eq!(c.events.len(), 1);
        assert!(!r.holding());
    }

    /// A pipeline over nothing (the replay only swaps it).
    fn no_pipe() -> Pipeline {
        let (_tx, rx) = crossbeam_channel::bounded(1);
        Pipeline::new(
            rx,
            &[0],
            crate::pipeline::PipelineOptions {
                model: false,
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_jump_back_reads_the_recording_again_or_says_why_it_cannot() {
        let shown_at_20s = |r: &mut Replay<'_>| {
            r.take(Chunk {
                events: vec![ev(S + 20 * NS)],
                watermark: S + 20 * NS,
            });
            r.clock.jump_to(S + 20 * NS);
            assert!(r.release().is_some());
        };
        let mut pipe = no_pipe();
        let mut r = Replay::new(
            Some(S),
            Some(S + 60 * NS),
            Err("a pipe".into()),
            String::new(),
        );
        shown_at_20s(&mut r);
        assert_eq!(r.command(ReplayCmd::Back, &mut pipe), Err("a pipe".into()));
        assert_eq!(
            r.command(ReplayCmd::Forward, &mut pipe),
            Ok(false),
            "on needs no read again"
        );
        let reads = std::rc::Rc::new(std::cell::Cell::new(0));
        let counted = reads.clone();
        let rewind: Rewind<'_> = Box::new(move || {
            counted.set(counted.get() + 1);
            Ok(no_pipe())
        });
        let mut r = Replay::new(Some(S), Some(S + 60 * NS), Ok(rewind), String::new());
        shown_at_20s(&mut r);
        assert_eq!(r.command(ReplayCmd::Back, &mut pipe), Ok(true));
        assert_eq!(reads.get(), 1);
        let v = r.view();
        assert!(v.seeking && v.position == S, "nothing in yet: {v:?}");
        assert_eq!(r.clock.position(r.wall()), S + 10 * NS, "seeking 10 s back");
        assert_eq!(r.totals(Totals::default()).total_records(), 0);
        // Nothing shown since that read: the start needs no other.
        assert_eq!(r.command(ReplayCmd::ToStart, &mut pipe), Ok(false));
        assert_eq!(reads.get(), 1);
        assert_eq!(r.clock.position(r.wall()), S);
    }

    #[test]
    fn the_end_of_the_read_ends_the_recording_and_lets_in_what_follows_its_last_sample() {
        let mut r = Replay::new(Some(S), Some(S + NS), Err(String::new()), String::new());
        r.take(Chunk {
            events: vec![ev(S + 2 * NS)],
            watermark: u64::MAX,
        });
        r.read_to_end();
        assert_eq!(
            r.clock.end(),
            Some(S + 2 * NS),
            "extended by the last record"
        );
        r.clock.jump_to(u64::MAX);
        assert_eq!(r.release().map(|c| c.events.len()), Some(1));
        assert!(r.view().at_end);
        assert!(!r.moving());
    }
}
