//! The frontends: the interactive view ([`tui`]) and the line writers ([`plain`]).

pub mod plain;
pub mod tui;
