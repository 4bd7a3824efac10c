//! The filter language shared by the TUI (`/`) and `--filter EXPR` in `--plain`/`--json`.
//!
//! One language in both places, so that a filter tried out live in the TUI can be pasted into a
//! pipeline unchanged. An expression is a list of whitespace-separated terms, all ANDed, and
//! alternatives of such lists are separated by `|` or `or` (`type:fork|type:exit`,
//! `comm:make pid:1-99 or type:lost`):
//!
//! - `type:fork,exit` record types (any of the list), as `--plain` names them;
//! - `pid:123`, `tid:5-9`, `ppid:1`, `cpu:0-1` numbers and ranges (any of the list);
//!   `pid`/`tid` are the task the record is about (the forked, exited, renamed or mapping task;
//!   the running task for samples), `ppid` the parent in fork/exit records;
//! - `comm:bash` the name of the record's task: a substring, or a glob when it holds `*` or `?`
//!   (case-insensitive, against the escaped name as it is displayed);
//! - `argv:*--force*` the command line of the record's process (as the TUI shows it);
//! - any other word matches anywhere in the `--plain` line, or in an exec's command line,
//!   case-insensitively;
//! - `!` before a term negates it.
//!
//! Names come from the process model ([`crate::process::ProcessModel`], seeded from `/proc`
//! and kept by the stream), as they were at the event's time: `comm:` needs a
//! [`CommLookup`].

use std::fmt::Write as _;

use crate::event::tracepoint::Value;
use crate::event::{Event, EventKind, RecordType};
use crate::process::{Comm, ProcessModel};
use crate::text::escape;

/// The syntax, for `--help` and the TUI's help overlay.
pub(crate) const SYNTAX_HELP: &str = "\
Terms separated by spaces, all must match (AND); alternatives separated by
| or the word or (OR), e.g. type:fork|type:exit  or  comm:make or type:lost
  type:fork,exit   record types (sample fork exit comm mmap lost lost_samples
                   throttle unthrottle context_switch)
  pid:123 tid:5-9  the task the record is about (numbers, ranges, lists)
  ppid:1           the parent in fork/exit records
  cpu:0-1          the CPU that wrote the record
  comm:bash        task name: substring, or glob with * and ?
  argv:*--force*   the process's command line: substring, or glob
  cgroup:*nginx*   the process's control group (container, service)
  filename:libc*   a mapped file (mmap records), or a tracepoint's filename
  event:NAME       the sample's event (substring or glob), e.g. event:sched:*
  sym:NAME         the sample's function (substring or glob), e.g. sym:tcp_*
  dso:NAME         the sample's binary, e.g. dso:libc* dso:kernel
  FIELD:VALUE      a tracepoint field by its own name: next_pid:0, prev_comm:bash,
                   ret:-5--1, prev_state:D (the text perf prints), prev_state_str:R+;
                   on a record with such a field, pid: tid: comm: cpu: filename:
                   mean the field (sched_wakeup's pid is the woken task)
  fields.NAME:V    always the field NAME (also one named type, event, ...)
  common_pid:1     always the running task (common_tid, common_comm, common_cpu)
  word             any other word: found anywhere in the line or in an
                   exec's command line (no case)
  !term            negates a term, e.g. !type:sample !comm:kworker*";

/// A malformed filter: one line that names the offending term in quotes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(String);

/// Where `comm:` finds the name of a pid.
pub trait CommLookup {
    /// The raw (unescaped) name process `pid` had at `time`, if known.
    fn name(&self, pid: u32, time: u64) -> Option<&[u8]>;

    /// The control group of process `pid` at `time`, if known.
    fn cgroup(&self, _pid: u32, _time: u64) -> Option<&str> {
        None
    }

    /// The command line of process `pid` at `time` (for an exec at `time`, that exec's), if
    /// known.
    fn cmdline(&self, _pid: u32, _time: u64) -> Option<&crate::cmdline::CmdLine> {
        None
    }
}

/// No names known: `comm:` then matches comm records only.
#[cfg(test)]
pub(crate) struct NoComms;

#[cfg(test)]
impl CommLookup for NoComms {
    fn name(&self, _pid: u32, _time: u64) -> Option<&[u8]> {
        None
    }
}

impl CommLookup for ProcessModel {
    fn name(&self, pid: u32, time: u64) -> Option<&[u8]> {
        self.comm_at(pid, time).map(Comm::as_bytes)
    }

    fn cgroup(&self, pid: u32, time: u64) -> Option<&str> {
        self.process_at(pid, time)?.cgroup.as_deref()
    }

    fn cmdline(&self, pid: u32, time: u64) -> Option<&crate::cmdline::CmdLine> {
        let p = self.process_at(pid, time)?;
        p.argv.as_deref().filter(|a| !a.is_gone())
    }
}

/// An inclusive range of ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range(u32, u32);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    /// Lower-case substring.
    Substring(String),
    /// Lower-case glob with `*` and `?`.
    Glob(Vec<char>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Test {
    Type([bool; RecordType::COUNT]),
    Pid(Vec<Range>),
    Tid(Vec<Range>),
    Ppid(Vec<Range>),
    Cpu(Vec<Range>),
    Comm(Vec<Pattern>),
    /// `common_pid`, `common_tid`, `common_cpu`: the running task and CPU, always.
    CommonPid(Vec<Range>),
    CommonTid(Vec<Range>),
    CommonCpu(Vec<Range>),
    /// `common_comm`: the running task's name, always.
    CommonComm(Vec<Pattern>),
    /// The process's command line, as shown (escaped, arguments joined by spaces).
    Argv(Vec<Pattern>),
    Cgroup(Vec<Pattern>),
    Filename(Vec<Pattern>),
    /// The name of a sample's event.
    Event(Vec<Pattern>),
    /// The sample's function (`[unknown]` when not known).
    Sym(Vec<Pattern>),
    /// The sample's binary.
    Dso(Vec<Pattern>),
    /// A tracepoint field: numbers against `nums` (when the value parses as numbers), text
    /// against `pats`.
    Field {
        name: String,
        /// The term as written, for the error naming an unknown key.
        term: String,
        nums: Option<Vec<(i128, i128)>>,
        pats: Vec<Pattern>,
        /// The values as written, for the text the print fmt makes of a field (`S`, `R+`):
        /// compared exactly (case matters: `T` stopped, `t` traced), or as globs.
        texts: Vec<String>,
    },
    /// Lower-case ASCII bytes of a free word.
    Word(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    negate: bool,
    test: Test,
    /// The term as written, without its `!`.
    body: String,
}

/// A parsed filter. The empty filter matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Alternatives (ORed), each a list of terms (ANDed). None for the filter that keeps all.
    groups: Vec<Vec<Term>>,
    source: String,
    has_words: bool,
}

/// Substring or glob patterns, lower-cased.
fn patterns(value: &str) -> Vec<Pattern> {
    value
        .split(',')
        .map(|p| {
            let p = p.to_lowercase();
            if p.contains(['*', '?']) {
                Pattern::Glob(p.chars().collect())
            } else {
                Pattern::Substring(p)
            }
        })
        .collect()
}

fn is_key(key: &str) -> bool {
    let mut b = key.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn err(msg: String) -> FilterError {
    FilterError(msg)
}

fn parse_ranges(term: &str, key: &str, value: &str) -> Result<Vec<Range>, FilterError> {
    let mut out = Vec::new();
    for part in value.split(',') {
        let bad = || {
            err(format!(
                "bad {key} '{part}' in '{term}': expected a number, a range such as 0-3, or a list"
            ))
        };
        let num = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
        let r = match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(bad());
                }
                Range(a, b)
            }
            None => {
                let v = num(part)?;
                Range(v, v)
            }
        };
        out.push(r);
    }
    Ok(out)
}

fn parse_term(raw: &str) -> Result<Term, FilterError> {
    let (negate, body) = match raw.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    if body.is_empty() {
        return Err(err(format!(
            "'{raw}' negates nothing: write !TERM, e.g. !type:sample"
        )));
    }
    if body.starts_with('!') {
        return Err(err(format!("'{raw}': one '!' per term")));
    }
    let test = match body.split_once(':') {
        // `fields.NAME:` is always the tracepoint field NAME.
        Some((key, value))
            if key.strip_prefix("fields.").is_some_and(is_key) && !value.is_empty() =>
        {
            field_test(&key["fields.".len()..], body, value)
        }
        Some((key, value)) if is_key(key) => {
            let key_lc = key.to_ascii_lowercase();
            if value.is_empty() {
                return Err(err(format!("'{raw}' has no value after '{key}:'")));
            }
            match key_lc.as_str() {
                "type" => {
                    let mut set = [false; RecordType::COUNT];
                    for name in value.split(',') {
                        let t = RecordType::from_name(name).ok_or_else(|| {
                            err(format!(
                                "unknown record type '{name}' in '{raw}' (types: {})",
                                RecordType::ALL.map(|t| t.name()).join(" ")
                            ))
                        })?;
                        set[t.index()] = true;
                    }
                    Test::Type(set)
                }
                "pid" => Test::Pid(parse_ranges(raw, "pid", value)?),
                "tid" => Test::Tid(parse_ranges(raw, "tid", value)?),
                "ppid" => Test::Ppid(parse_ranges(raw, "ppid", value)?),
                "cpu" => Test::Cpu(parse_ranges(raw, "cpu", value)?),
                "comm" => Test::Comm(patterns(value)),
                "common_pid" => Test::CommonPid(parse_ranges(raw, "common_pid", value)?),
                "common_tid" => Test::CommonTid(parse_ranges(raw, "common_tid", value)?),
                "common_cpu" => Test::CommonCpu(parse_ranges(raw, "common_cpu", value)?),
                "common_comm" => Test::CommonComm(patterns(value)),
                "argv" => Test::Argv(patterns(value)),
                "cgroup" => Test::Cgroup(patterns(value)),
                "filename" => Test::Filename(patterns(value)),
                "event" => Test::Event(patterns(value)),
                "sym" => Test::Sym(patterns(value)),
                "dso" => Test::Dso(patterns(value)),
                // Any other name is a tracepoint field; Filter::check_fields tells whether
                // the events being watched have it.
                _ => field_test(key, body, value),
            }
        }
        _ => Test::Word(body.to_ascii_lowercase().into_bytes()),
    };
    Ok(Term {
        negate,
        test,
        body: body.to_string(),
    })
}

fn field_test(name: &str, body: &str, value: &str) -> Test {
    Test::Field {
        name: name.to_string(),
        term: body.to_string(),
        nums: crate::filter_fields::numbers(value),
        pats: patterns(value),
        texts: value.split(',').map(str::to_string).collect(),
    }
}

fn in_ranges(v: u32, ranges: &[Range]) -> bool {
    ranges.iter().any(|r| r.0 <= v && v <= r.1)
}

/// `*` any run, `?` one character; both sides already lower-case.
fn glob(p: &[char], s: &[char]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn contains_ci(hay: &[u8], needle_lc: &[u8]) -> bool {
    needle_lc.is_empty()
        || hay.windows(needle_lc.len()).any(|w| {
            w.iter()
                .zip(needle_lc)
                .all(|(a, b)| a.to_ascii_lowercase() == *b)
        })
}

impl Filter {
    /// Parse an expression; the empty string (or only spaces) is the filter that keeps all.
    pub fn parse(src: &str) -> Result<Filter, FilterError> {
        let spaced = src.replace('|', " | ");
        let mut groups: Vec<Vec<Term>> = vec![Vec::new()];
        for word in spaced.split_whitespace() {
            if word == "|" || word.eq_ignore_ascii_case("or") {
                if groups.last().is_some_and(Vec::is_empty) {
                    return Err(err(format!(
                        "'{word}' has no term before it in '{}': write A|B or A or B",
                        src.trim()
                    )));
                }
                groups.push(Vec::new());
                continue;
            }
            if let Some(g) = groups.last_mut() {
                g.push(parse_term(word)?);
            }
        }
        if groups.len() > 1 && groups.last().is_some_and(Vec::is_empty) {
            return Err(err(format!(
                "nothing after the last '|' or 'or' in '{}'",
                src.trim()
            )));
        }
        groups.retain(|g| !g.is_empty());
        let has_words = groups
            .iter()
            .flatten()
            .any(|t| matches!(t.test, Test::Word(_)));
        Ok(Filter {
            groups,
            source: src.trim().to_string(),
            has_words,
        })
    }

    fn terms(&self) -> impl Iterator<Item = &Term> {
        self.groups.iter().flatten()
    }

    /// True when an alternative asks for samples by name (`type:sample`, `event:`, `sym:`,
    /// `dso:`, a tracepoint field): the TUI's log then shows periodic samples.
    pub(crate) fn names_samples(&self) -> bool {
        self.terms().any(|t| {
            !t.negate
                && match &t.test {
                    Test::Type(set) => set[RecordType::Sample.index()],
                    Test::Event(_) | Test::Sym(_) | Test::Dso(_) | Test::Field { .. } => true,
                    _ => false,
                }
        })
    }

    /// True for the filter that keeps everything.
    /// True when a term looks up task names (`comm:`): the filter then needs the process
    /// model.
    pub(crate) fn uses_names(&self) -> bool {
        self.has_words
            || self.terms().any(|t| {
                matches!(
                    t.test,
                    Test::Comm(_) | Test::Cgroup(_) | Test::CommonComm(_) | Test::Argv(_)
                )
            })
    }

    /// True when a term looks at command lines (`argv:`, or a free word, which an exec's
    /// command line may hold): they must then be read at each exec.
    pub(crate) fn uses_argv(&self) -> bool {
        self.has_words || self.terms().any(|t| matches!(t.test, Test::Argv(_)))
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The expression as the user wrote it (trimmed).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Refuse terms that cannot match anything the watched tracepoints (`formats`) write: a
    /// key that is no field of theirs (nor one of the keys above), a value that cannot be
    /// the field's (`prev_pid:abc`, `prev_state:Q`), naming the field, its event and its
    /// type; see [`crate::filter_fields`] for which field a key means.
    ///
    /// `samples` says whether any watched event takes samples: without one (`-e dummy`),
    /// `sym:`, `dso:` and `event:` can match nothing and are refused too.
    pub fn check(
        &self,
        formats: &[&crate::event::tracepoint::Format],
        samples: bool,
    ) -> Result<(), FilterError> {
        use crate::filter_fields::{Wanted, check, numbers};
        for t in self.terms() {
            if !samples
                && !t.negate
                && matches!(t.test, Test::Sym(_) | Test::Dso(_) | Test::Event(_))
            {
                return Err(err(format!(
                    "'{}' cannot match: only side-band records are watched (-e dummy), and \
                     sym:, dso: and event: are about samples; add a sampling event \
                     (-e cpu-clock,dummy)",
                    t.body
                )));
            }
            let (name, builtin) = match &t.test {
                Test::Field { name, .. } => (name.as_str(), false),
                Test::Pid(_) => ("pid", true),
                Test::Tid(_) => ("tid", true),
                Test::Cpu(_) => ("cpu", true),
                Test::Comm(_) => ("comm", true),
                Test::Filename(_) => ("filename", true),
                _ => continue,
            };
            let value = t.body.split_once(':').map_or("", |(_, v)| v);
            let w = Wanted {
                term: &t.body,
                name,
                value,
                numeric: numbers(value).is_some(),
            };
            check(formats, &w, builtin).map_err(err)?;
        }
        Ok(())
    }

    /// Does `ev` pass? `comms` gives the names of tasks for `comm:` on non-comm records.
    pub fn matches(&self, ev: &Event, comms: &dyn CommLookup) -> bool {
        let mut line = String::new();
        self.matches_with(ev, comms, &mut line)
    }

    /// As [`Filter::matches`], reusing `line` as the buffer for the formatted line (free words
    /// need it), so that filtering many events allocates once.
    pub(crate) fn matches_with(
        &self,
        ev: &Event,
        comms: &dyn CommLookup,
        line: &mut String,
    ) -> bool {
        if self.has_words {
            line.clear();
            let _ = write!(line, "{ev}");
            if let EventKind::Comm { exec: true, .. } = ev.kind {
                if let Some(argv) = comms.cmdline(ev.subject_pid(), ev.time) {
                    let _ = write!(line, " argv: {}", argv.line());
                }
            }
        }
        self.groups.is_empty()
            || self.groups.iter().any(|g| {
                g.iter()
                    .all(|t| t.negate != term_matches(&t.test, ev, comms, line))
            })
    }
}

fn term_matches(test: &Test, ev: &Event, comms: &dyn CommLookup, line: &str) -> bool {
    match test {
        Test::Type(set) => set[ev.record_type().index()],
        Test::Pid(r) => match own_number(ev, "pid") {
            Some(v) => v.is_some_and(|v| in_wide_ranges(v, r)),
            None => in_ranges(ev.subject_pid(), r),
        },
        Test::Tid(r) => match own_number(ev, "tid") {
            Some(v) => v.is_some_and(|v| in_wide_ranges(v, r)),
            None => in_ranges(ev.subject_tid(), r),
        },
        Test::CommonPid(r) => in_ranges(ev.pid, r),
        Test::CommonTid(r) => in_ranges(ev.tid, r),
        Test::CommonCpu(r) => in_ranges(ev.cpu, r),
        Test::CommonComm(pats) => comms
            .name(ev.pid, ev.time)
            .is_some_and(|c| pattern_matches(pats, &escape(c).to_lowercase())),
        Test::Ppid(r) => match &ev.kind {
            EventKind::Fork(t) | EventKind::Exit(t) => in_ranges(t.ppid, r),
            _ => false,
        },
        Test::Cpu(r) => match own_number(ev, "cpu") {
            Some(v) => v.is_some_and(|v| in_wide_ranges(v, r)),
            None => in_ranges(ev.cpu, r),
        },
        Test::Comm(pats) => {
            let comm = match (&ev.kind, ev.field("comm")) {
                (EventKind::Comm { comm, .. }, _) => Some(&comm[..]),
                // A tracepoint's own comm (sched_wakeup's: the woken task's).
                (_, Some(Value::Str(s))) => Some(s),
                (_, Some(_)) => None,
                _ => comms.name(ev.subject_pid(), ev.time),
            };
            let Some(comm) = comm else { return false };
            let shown = escape(comm).to_lowercase();
            pats.iter().any(|p| match p {
                Pattern::Substring(s) => shown.contains(s.as_str()),
                Pattern::Glob(g) => {
                    let s: Vec<char> = shown.chars().collect();
                    glob(g, &s)
                }
            })
        }
        Test::Argv(pats) => comms
            .cmdline(ev.subject_pid(), ev.time)
            .is_some_and(|a| pattern_matches(pats, &a.line().to_lowercase())),
        Test::Cgroup(pats) => comms
            .cgroup(ev.subject_pid(), ev.time)
            .is_some_and(|c| pattern_matches(pats, &escape(c.as_bytes()).to_lowercase())),
        Test::Filename(pats) => {
            let name = match &ev.kind {
                EventKind::Mmap(m) => &m.filename[..],
                _ => match ev.field("filename") {
                    Some(Value::Str(s)) => s,
                    _ => return false,
                },
            };
            // The path, or its last part: filename:libc* finds /usr/lib/.../libc.so.6.
            let base = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
            pattern_matches(pats, &escape(name).to_lowercase())
                || pattern_matches(pats, &escape(base).to_lowercase())
        }
        Test::Event(pats) => ev
            .event_name()
            .is_some_and(|n| pattern_matches(pats, &n.to_lowercase())),
        Test::Sym(pats) => ev.sym().is_some_and(|s| {
            pattern_matches(
                pats,
                &s.name().unwrap_or(crate::symbols::UNKNOWN).to_lowercase(),
            )
        }),
        Test::Dso(pats) => ev
            .sym()
            .is_some_and(|s| pattern_matches(pats, &s.dso().name().to_lowercase())),
        Test::Field {
            name,
            nums,
            pats,
            texts,
            ..
        } => match ev.field(name) {
            Some(v @ Value::Array { .. }) => nums.as_ref().is_some_and(|r| {
                v.elements()
                    .any(|e| r.iter().any(|(a, b)| *a <= e && e <= *b))
            }),
            Some(Value::Str(s)) => pattern_matches(pats, &escape(s).to_lowercase()),
            Some(v) => match (v.as_i128(), nums) {
                (Some(x), Some(r)) => r.iter().any(|(a, b)| *a <= x && x <= *b),
                // Not a number: the text the print fmt makes of the field (`prev_state:D`).
                (Some(_), None) => crate::event::members::text_of_field(ev, name)
                    .and_then(|r| crate::event::members::text(ev, &r.name))
                    .is_some_and(|t| text_matches(texts, &t)),
                _ => false,
            },
            // A text member itself (`prev_state_str:R+`).
            None => crate::event::members::text(ev, name).is_some_and(|t| text_matches(texts, &t)),
        },
        Test::Word(w) => contains_ci(line.as_bytes(), w),
    }
}

/// A tracepoint's own number field `name`, when the record has one: `Some(None)` when it
/// lies outside the record.
fn own_number(ev: &Event, name: &str) -> Option<Option<i128>> {
    ev.field(name).map(|v| v.as_i128())
}

fn in_wide_ranges(v: i128, ranges: &[Range]) -> bool {
    ranges.iter().any(|r| r.0 as i128 <= v && v <= r.1 as i128)
}

/// The print fmt's text of a field against values as written: exactly (case matters), or
/// as a glob with `*` and `?`.
fn text_matches(texts: &[String], text: &[u8]) -> bool {
    let shown = escape(text);
    texts.iter().any(|t| {
        if t.contains(['*', '?']) {
            glob(
                &t.chars().collect::<Vec<_>>(),
                &shown.chars().collect::<Vec<_>>(),
            )
        } else {
            *t == shown
        }
    })
}

fn pattern_matches(pats: &[Pattern], shown: &str) -> bool {
    pats.iter().any(|p| match p {
        Pattern::Substring(s) => shown.contains(s.as_str()),
        Pattern::Glob(g) => {
            let s: Vec<char> = shown.chars().collect();
            glob(g, &s)
        }
    })
}

/// The predicate `--filter` installs in `--plain`/`--json` mode: names from the process
/// model, as of each event's time.
pub(crate) fn plain_predicate(filter: Filter) -> impl FnMut(&Event, &ProcessModel) -> bool {
    let mut line = String::new();
    move |ev, model| filter.matches_with(ev, model, &mut line)
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
