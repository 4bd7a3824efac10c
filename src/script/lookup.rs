//! The process model as the scripts see it: the pipeline's model, read as of the time of the
//! event being handled. Its own module, below both the `perfwatch` module (whose `comm()`
//! reads it) and the event class (whose `argv` reads it), so that those two do not import
//! each other.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use crate::cmdline::CmdLine;
use crate::process::ModelHandle;

/// The process model the scripts' lookups read (the pipeline's, shared), set when the stage
/// starts. One per process, like the interpreter.
static MODEL: Mutex<Option<ModelHandle>> = Mutex::new(None);

thread_local! {
    /// The time of the event the worker is handling: lookups answer as of then. `u64::MAX`
    /// (the latest) between events, as in `on_tick()`.
    static EVENT_TIME: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// Give the scripts' lookups the pipeline's process model.
pub fn set_model(model: ModelHandle) {
    if let Ok(mut m) = MODEL.lock() {
        *m = Some(model);
    }
}

/// The worker is about to run the handlers of an event stamped `time` (`u64::MAX`: no event).
pub fn set_event_time(time: u64) {
    EVENT_TIME.set(time);
}

/// The name task `pid` had at the time of the event being handled (its latest between
/// events), as the process model knows it; None if unknown.
pub fn comm(pid: u32) -> Option<String> {
    let model = MODEL.lock().ok()?.clone()?;
    let time = EVENT_TIME.get();
    let m = model.read();
    m.comm_at(pid, time)
        .map(|c| String::from_utf8_lossy(c.as_bytes()).into_owned())
}

/// The command line of an exec (see [`crate::cmdline`]); None when it could not be read.
pub fn exec_cmdline(pid: u32, time: u64) -> Option<Arc<CmdLine>> {
    let model = MODEL.lock().ok()?.clone()?;
    let m = model.read();
    m.exec_argv(pid, time).filter(|a| !a.is_gone()).cloned()
}

/// `event.argv` of an exec: its command line, one `str` per argument (undecodable bytes as
/// U+FFFD), the last one followed by `…[+N bytes]` when it was cut; None when it could not
/// be read.
pub fn exec_argv(pid: u32, time: u64) -> Option<Vec<String>> {
    exec_cmdline(pid, time).map(|c| c.lossy_args())
}

/// The start and end of the mapping that held `addr` in process `pid` at `time`; None when
/// the model knows none.
pub fn mapping(pid: u32, time: u64, addr: u64) -> Option<(u64, u64)> {
    let model = MODEL.lock().ok()?.clone()?;
    let m = model.read();
    m.find_mapping(pid, time, addr)
        .map(|(m, _)| (m.start, m.end()))
}
