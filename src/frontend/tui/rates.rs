//! The per-CPU rates of the sampled event (the CPU pane's rows and sparklines) and of the
//! other events of the list, closed one second at a time once every reader has reported
//! past it. Plain maths over the events' periods, tested with hand-made samples.

use std::collections::VecDeque;

use crate::event::{Event, EventDesc, EventKind};

const NS: u64 = 1_000_000_000;

/// Seconds of per-CPU rate history (the sparklines).
pub(crate) const RATE_SECONDS: usize = 60;

/// How long after a second ends its rate is final: a reader sends a batch at least every
/// poll timeout ([`crate::perf::reader::POLL_TIMEOUT`], 250 ms), so records of a second
/// arrive within this.
pub(super) const RATE_LAG_NS: u64 = 400_000_000;

/// What the per-CPU rate rows measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateUnit {
    /// A software clock (cpu-clock, task-clock): the period is nanoseconds, so the sum of the
    /// periods of non-idle samples per second is the CPU's busy share.
    Utilisation,
    /// A counting event (cycles, instructions, ...): the sum of periods per second.
    Events,
    /// No sampled event (`dummy`, tracepoints): records per second.
    Records,
}

/// Instructions per cycle from the two counts (or rates) of the same span: None when no
/// cycle was counted (or a figure is not a number), so that an idle CPU shows nothing rather
/// than a division by zero.
pub(crate) fn ipc(instructions: f64, cycles: f64) -> Option<f64> {
    (cycles > 0.0 && instructions.is_finite() && cycles.is_finite() && instructions >= 0.0)
        .then(|| instructions / cycles)
}

/// The rate unit of one event of the list: a software clock's utilisation, otherwise the
/// sum of sample periods per second (a tracepoint's hits per second).
pub(super) fn unit_of(d: &EventDesc) -> RateUnit {
    use perf_event_open_sys::bindings as sys;
    let clock = d.type_ == sys::PERF_TYPE_SOFTWARE
        && (d.config == sys::PERF_COUNT_SW_CPU_CLOCK as u64
            || d.config == sys::PERF_COUNT_SW_TASK_CLOCK as u64);
    if clock {
        RateUnit::Utilisation
    } else {
        RateUnit::Events
    }
}

pub(super) fn is_dummy(d: &EventDesc) -> bool {
    use perf_event_open_sys::bindings as sys;
    d.type_ == sys::PERF_TYPE_SOFTWARE && d.config == sys::PERF_COUNT_SW_DUMMY as u64
}

fn is_hw(d: &EventDesc, config: u32) -> bool {
    use perf_event_open_sys::bindings as sys;
    d.type_ == sys::PERF_TYPE_HARDWARE && d.config == config as u64
}

/// Per-CPU rates of the events besides the main one (`-e a,b,...`), and the IPC pair.
#[derive(Clone, Debug, Default)]
pub(crate) struct EventRates {
    /// The main event's index in the list: its samples feed [`App::rates`].
    pub main: Option<u16>,
    /// The other sampling events, each with its rates.
    pub others: Vec<(&'static EventDesc, Rates)>,
    /// Indexes of `cycles` and `instructions` when both are open: (cycles, instructions).
    pub(super) ipc_pair: Option<(u16, u16)>,
}

impl EventRates {
    /// The rates of `events` (the app's list) on `cpus`, from `start_ns`.
    pub(super) fn new(events: &[&'static EventDesc], cpus: &[u32], start_ns: u64) -> EventRates {
        let main = events.iter().find(|d| !is_dummy(d)).map(|d| d.index);
        let others = if events.len() > 1 {
            events
                .iter()
                .filter(|d| Some(d.index) != main && !is_dummy(d))
                .map(|d| (*d, Rates::new(unit_of(d), cpus, start_ns)))
                .collect()
        } else {
            Vec::new()
        };
        use perf_event_open_sys::bindings as sys;
        let find = |c: u32| events.iter().find(|d| is_hw(d, c)).map(|d| d.index);
        let ipc_pair =
            find(sys::PERF_COUNT_HW_CPU_CYCLES).zip(find(sys::PERF_COUNT_HW_INSTRUCTIONS));
        EventRates {
            main,
            others,
            ipc_pair,
        }
    }

    /// True when `ev` is a sample of an event other than the main one (with several events
    /// open), which must not count in the main rates.
    #[inline]
    pub(super) fn account(&mut self, ev: &Event) -> bool {
        if self.others.is_empty() {
            return false;
        }
        let Some(d) = ev.event_desc() else {
            return false;
        };
        if Some(d.index) == self.main {
            return false;
        }
        if let Some((_, r)) = self.others.iter_mut().find(|(o, _)| o.index == d.index) {
            r.account(ev);
        }
        true
    }

    pub(super) fn close(&mut self, now: u64) {
        for (_, r) in &mut self.others {
            r.close(now);
        }
    }
}

/// Per-CPU rates, one value per second, from sample periods bucketed by record time.
#[derive(Clone, Debug)]
pub(crate) struct Rates {
    unit: RateUnit,
    cpus: Vec<u32>,
    /// Index into `cpus` by CPU number.
    index: Vec<Option<usize>>,
    start_ns: u64,
    /// Open seconds (oldest first) with their per-CPU sums.
    open: VecDeque<(u64, Vec<u64>)>,
    /// The last second whose figures are final.
    closed_through: u64,
    /// Per CPU, then the all-CPU total (last): the last [`RATE_SECONDS`] values.
    history: Vec<VecDeque<f64>>,
}

impl Rates {
    pub(super) fn new(unit: RateUnit, cpus: &[u32], start_ns: u64) -> Rates {
        let max = cpus.iter().copied().max().unwrap_or(0) as usize;
        let mut index = vec![None; max + 1];
        for (i, &c) in cpus.iter().enumerate() {
            index[c as usize] = Some(i);
        }
        Rates {
            unit,
            cpus: cpus.to_vec(),
            index,
            start_ns,
            open: VecDeque::new(),
            closed_through: (start_ns / NS).saturating_sub(1),
            history: vec![VecDeque::with_capacity(RATE_SECONDS); cpus.len() + 1],
        }
    }

    #[inline]
    pub(super) fn add(&mut self, cpu: u32, time: u64, amount: u64) {
        let Some(&Some(i)) = self.index.get(cpu as usize) else {
            return;
        };
        // A record for a second already final counts in the first open one: late, not lost.
        let sec = (time / NS).max(self.closed_through + 1);
        let n = self.cpus.len();
        let pos = match self.open.iter().rposition(|(s, _)| *s <= sec) {
            Some(p) if self.open[p].0 == sec => p,
            Some(p) => {
                self.open.insert(p + 1, (sec, vec![0; n]));
                p + 1
            }
            None => {
                self.open.push_front((sec, vec![0; n]));
                0
            }
        };
        self.open[pos].1[i] += amount;
    }

    pub(super) fn account(&mut self, ev: &Event) {
        match (&ev.kind, self.unit) {
            // Samples of the idle task (pid 0) are idle time.
            (EventKind::Sample { period, .. }, RateUnit::Utilisation) if ev.pid != 0 => {
                self.add(ev.cpu, ev.time, *period)
            }
            (EventKind::Sample { period, .. }, RateUnit::Events) => {
                self.add(ev.cpu, ev.time, *period)
            }
            (_, RateUnit::Records) => self.add(ev.cpu, ev.time, 1),
            _ => {}
        }
    }

    /// Make every second that ended before `now - RATE_LAG_NS` final. Returns how many.
    pub(super) fn close(&mut self, now: u64) -> usize {
        let Some(last) = (now.saturating_sub(RATE_LAG_NS) / NS).checked_sub(1) else {
            return 0;
        };
        if last <= self.closed_through {
            return 0;
        }
        // After a long gap only the last minute matters.
        let first = (self.closed_through + 1).max(last.saturating_sub(RATE_SECONDS as u64));
        let n = self.cpus.len();
        let mut closed = 0;
        for sec in first..=last {
            while self.open.front().is_some_and(|(s, _)| *s < sec) {
                self.open.pop_front();
            }
            let sums = match self.open.front() {
                Some((s, _)) if *s == sec => self.open.pop_front().map(|(_, v)| v),
                _ => None,
            };
            let begin = (sec * NS).max(self.start_ns);
            let span = ((sec + 1) * NS).saturating_sub(begin).max(1) as f64;
            let mut total = 0.0;
            for i in 0..n {
                let v = sums.as_ref().map_or(0, |s| s[i]) as f64 * NS as f64 / span;
                let v = if self.unit == RateUnit::Utilisation {
                    v / NS as f64 * 100.0
                } else {
                    v
                };
                total += v;
                push_bounded(&mut self.history[i], v, RATE_SECONDS);
            }
            push_bounded(&mut self.history[n], total, RATE_SECONDS);
            closed += 1;
        }
        self.closed_through = last;
        closed
    }

    pub fn unit(&self) -> RateUnit {
        self.unit
    }

    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// The per-second history of CPU row `i` (`i == cpus().len()` is the all-CPU total).
    pub fn history(&self, i: usize) -> &VecDeque<f64> {
        &self.history[i]
    }

    /// The latest final value of row `i`.
    pub fn latest(&self, i: usize) -> Option<f64> {
        self.history.get(i).and_then(|h| h.back().copied())
    }
}

pub(super) fn push_bounded<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    if q.len() >= cap {
        q.pop_front();
    }
    q.push_back(v);
}
