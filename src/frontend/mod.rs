//! The frontends: the interactive view ([`tui`]) and the line writers ([`plain`]).
//!
//! A frontend drives the pipeline until a stop, shuts it down (the readers' last records,
//! what the scripts hold: [`crate::pipeline::Pipeline::shut_down`]) and returns an
//! [`Outcome`]; the run's owner (`run::lifecycle`) does the rest: the folded stacks, the
//! summary and the exit status.

pub mod plain;
pub mod tui;

/// What a frontend hands back to the run's owner when it stops.
#[derive(Debug)]
pub struct Outcome {
    /// Why it stopped.
    pub reason: crate::stop::StopReason,
    /// The `--folded` stacks it fed, to be written now.
    pub folded: Option<crate::folded::Folding>,
}
