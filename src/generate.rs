//! `--generate`: the man page and shell completions, from the same clap definition as
//! `--help` (ripgrep's interface: `--generate man|complete-bash|complete-zsh|complete-fish|
//! complete-powershell`).
//!
//! The man page's EXAMPLES, PERMISSIONS, FILTER and EXIT STATUS sections are not written
//! twice: they are read out of `--help`'s after-text ([`crate::cli::after_help`]), whose
//! headings (`EXAMPLES:`) become `.SH` sections, whose two-column lines become `.TP` entries
//! and whose other lines become filled paragraphs. A section added to `--help` appears in the
//! man page without touching this file.

use std::io::{self, Write};

use clap::CommandFactory;
use clap::builder::PossibleValuesParser;
use clap_complete::Shell;
use roff::{Roff, bold, roman};

use crate::cli::{Cli, Generate};

/// Write what `kind` asks for to `out`.
pub fn generate(kind: Generate, out: &mut dyn Write) -> io::Result<()> {
    let cmd = completion_command();
    let shell = match kind {
        Generate::Man => return write_man(cmd, out),
        Generate::CompleteBash => Shell::Bash,
        Generate::CompleteZsh => Shell::Zsh,
        Generate::CompleteFish => Shell::Fish,
        Generate::CompletePowershell => Shell::PowerShell,
    };
    let mut cmd = cmd;
    // clap_complete writes through `&mut dyn Write` without reporting errors (it panics on
    // one), so render into memory and write once: a closed stdout is then an error returned,
    // not a panic.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "perfwatch", &mut buf);
    out.write_all(&buf)?;
    out.flush()
}

/// The command as the generators see it: `-e` offers perfwatch's named events. (The parser
/// itself keeps accepting any name, since `SUBSYSTEM:TRACEPOINT` cannot be listed up front;
/// only the generated scripts and page carry the list.)
fn completion_command() -> clap::Command {
    let cmd = Cli::command();
    let event = cmd
        .get_arguments()
        .find(|a| a.get_short() == Some('e'))
        .map(|a| a.get_id().clone());
    match event {
        Some(id) => cmd.mut_arg(id, |a| {
            a.value_parser(PossibleValuesParser::new(
                crate::perf::events::known_event_names(),
            ))
            .hide_possible_values(true)
        }),
        None => cmd,
    }
}

/// The man page: clap_mangen's NAME, SYNOPSIS, DESCRIPTION and OPTIONS, then the sections of
/// `--help`'s after-text, then SEE ALSO and VERSION.
fn write_man(cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let after = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    // clap_mangen would print the after-text as one unformatted EXTRA section.
    let cmd = cmd.after_help(None::<&str>).after_long_help(None::<&str>);
    let man = clap_mangen::Man::new(cmd)
        .title("PERFWATCH")
        .manual("User Commands");
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    // No hyphenation and a ragged right margin: option and sysctl names must read as typed
    // (`kernel.perf_event_paranoid`, not `ker-nel.perf_event_paranoid`).
    buf.extend_from_slice(b".nh\n.ad l\n");
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    let mut roff = Roff::new();
    for section in help_sections(&after) {
        section.render(&mut roff);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("perf"),
        roman("(1), "),
        bold("perf-top"),
        roman("(1), "),
        bold("perf_event_open"),
        roman("(2), "),
        bold("jq"),
        roman("(1)"),
    ]);
    roff.to_writer(&mut buf)?;
    man.render_version_section(&mut buf)?;
    out.write_all(&buf)?;
    out.flush()
}

/// One section of `--help`'s after-text.
#[derive(Debug, PartialEq, Eq)]
pub struct HelpSection {
    /// The heading without its colon and without a parenthesised note: `EXIT STATUS`.
    pub title: String,
    /// The parenthesised note after the heading, if any: `--filter EXPR, and / in the TUI`.
    pub note: Option<String>,
    pub blocks: Vec<Block>,
}

/// A run of the body of a section.
#[derive(Debug, PartialEq, Eq)]
pub enum Block {
    /// Lines of running text, to be filled.
    Paragraph(String),
    /// A two-column line: a term (a command, a status, a filter term) and what it means.
    /// Lines indented under the meaning continue it.
    Entry { term: String, text: String },
}

/// Split `--help`'s after-text into its sections. A heading is a line at column 0 in capitals
/// ending in `:` (optionally `HEADING (note):`); a body line is a two-column entry when its
/// text has a gap of two or more spaces, a continuation of the previous entry when it is
/// indented further than the section's entries, else running text.
pub fn help_sections(text: &str) -> Vec<HelpSection> {
    let mut sections: Vec<HelpSection> = Vec::new();
    for line in text.lines() {
        if let Some((title, note)) = heading(line) {
            sections.push(HelpSection {
                title,
                note,
                blocks: Vec::new(),
            });
            continue;
        }
        let Some(section) = sections.last_mut() else {
            continue;
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            // A blank line ends a paragraph.
            section.blocks.push(Block::Paragraph(String::new()));
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        match section.blocks.last_mut() {
            Some(Block::Entry { text, .. }) if indent > 2 => {
                text.push(' ');
                text.push_str(trimmed);
                continue;
            }
            _ => {}
        }
        if let Some(gap) = trimmed.find("  ") {
            section.blocks.push(Block::Entry {
                term: trimmed[..gap].to_string(),
                text: trimmed[gap..].trim().to_string(),
            });
        } else {
            match section.blocks.last_mut() {
                Some(Block::Paragraph(p)) if !p.is_empty() => {
                    p.push(' ');
                    p.push_str(trimmed);
                }
                _ => section.blocks.push(Block::Paragraph(trimmed.to_string())),
            }
        }
    }
    for s in &mut sections {
        s.blocks
            .retain(|b| !matches!(b, Block::Paragraph(p) if p.is_empty()));
    }
    sections
}

/// `EXIT STATUS:` → ("EXIT STATUS", None); `FILTER (--filter EXPR):` → ("FILTER", Some(..)).
fn heading(line: &str) -> Option<(String, Option<String>)> {
    let head = line.strip_suffix(':')?;
    let (title, note) = match head.split_once(" (") {
        Some((t, n)) => (t, Some(n.strip_suffix(')')?.to_string())),
        None => (head, None),
    };
    let is_title = !title.is_empty()
        && title.starts_with(|c: char| c.is_ascii_uppercase())
        && title.chars().all(|c| c.is_ascii_uppercase() || c == ' ');
    is_title.then(|| (title.to_string(), note))
}

impl HelpSection {
    fn render(&self, roff: &mut Roff) {
        roff.control("SH", [self.title.as_str()]);
        if let Some(note) = &self.note {
            roff.text([roman(format!("For {note}."))]);
        }
        let mut in_list = false;
        for b in &self.blocks {
            match b {
                Block::Paragraph(p) => {
                    if in_list || self.note.is_some() {
                        roff.control("PP", []);
                    }
                    in_list = false;
                    roff.text([roman(p.as_str())]);
                }
                Block::Entry { term, text } => {
                    roff.control("TP", []);
                    roff.text([bold(term.as_str())]);
                    roff.text([roman(text.as_str())]);
                    in_list = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_entries_and_paragraphs() {
        let text = "\
EXAMPLES:
  perfwatch -a      all CPUs
  perfwatch --plain one line
                    per record

PERMISSIONS:
  Root, or paranoid <= 0.
  Own tasks need <= 2
  (kernel samples left out).

FILTER (--filter EXPR):
  Terms, ANDed:
  type:fork   record types (sample
              fork)
  e.g. --filter 'type:fork'

EXIT STATUS:
  0    fine
  With -- COMMAND: its status.";
        let s = help_sections(text);
        let titles: Vec<_> = s.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["EXAMPLES", "PERMISSIONS", "FILTER", "EXIT STATUS"]);
        assert_eq!(
            s[0].blocks,
            [
                Block::Entry {
                    term: "perfwatch -a".into(),
                    text: "all CPUs".into()
                },
                // One space before "one line": running text, not an entry.
                Block::Paragraph("perfwatch --plain one line per record".into()),
            ]
        );
        assert_eq!(
            s[1].blocks,
            [Block::Paragraph(
                "Root, or paranoid <= 0. Own tasks need <= 2 (kernel samples left out).".into()
            )]
        );
        assert_eq!(s[2].note.as_deref(), Some("--filter EXPR"));
        assert_eq!(
            s[2].blocks,
            [
                Block::Paragraph("Terms, ANDed:".into()),
                Block::Entry {
                    term: "type:fork".into(),
                    text: "record types (sample fork)".into()
                },
                Block::Paragraph("e.g. --filter 'type:fork'".into()),
            ]
        );
        assert_eq!(
            s[3].blocks,
            [
                Block::Entry {
                    term: "0".into(),
                    text: "fine".into()
                },
                Block::Paragraph("With -- COMMAND: its status.".into()),
            ]
        );
    }

    #[test]
    fn headings_are_capitals_at_column_zero() {
        assert_eq!(heading("EXIT STATUS:"), Some(("EXIT STATUS".into(), None)));
        assert_eq!(
            heading("FILTER (--filter EXPR, and / in the TUI):"),
            Some((
                "FILTER".into(),
                Some("--filter EXPR, and / in the TUI".into())
            ))
        );
        for not in [
            "  EXAMPLES:",
            "Terms separated by spaces, all must match (AND):",
            "e.g.:",
            ":",
            "EXAMPLES",
        ] {
            assert_eq!(heading(not), None, "{not}");
        }
    }

    /// Every section of the real `--help` reaches the man page, with every entry's term.
    #[test]
    fn the_man_page_carries_every_help_section() {
        let after = crate::cli::after_help();
        let sections = help_sections(&after);
        let titles: Vec<_> = sections.iter().map(|s| s.title.as_str()).collect();
        for want in ["EXAMPLES", "PERMISSIONS", "FILTER", "EXIT STATUS"] {
            assert!(titles.contains(&want), "{titles:?}");
        }
        let mut out = Vec::new();
        generate(Generate::Man, &mut out).unwrap();
        let man = String::from_utf8(out).unwrap();
        assert!(man.starts_with(".ie") || man.starts_with(".TH"), "{man}");
        assert!(!man.contains(".SH EXTRA"), "{man}");
        for s in &sections {
            let sh = if s.title.contains(' ') {
                format!(".SH \"{}\"", s.title)
            } else {
                format!(".SH {}", s.title)
            };
            assert!(man.contains(&sh), "no {sh}");
            for b in &s.blocks {
                if let Block::Entry { term, .. } = b {
                    // roff escapes '-' as '\-'.
                    assert!(man.contains(&term.replace('-', "\\-")), "no {term}");
                }
            }
        }
    }

    #[test]
    fn completions_offer_the_named_events() {
        for kind in [
            Generate::CompleteBash,
            Generate::CompleteZsh,
            Generate::CompleteFish,
            Generate::CompletePowershell,
        ] {
            let mut out = Vec::new();
            generate(kind, &mut out).unwrap();
            let script = String::from_utf8(out).unwrap();
            for ev in ["cpu-clock", "page-faults", "dummy"] {
                assert!(script.contains(ev), "{kind:?}: no {ev}");
            }
            assert!(script.contains("--generate"), "{kind:?}");
        }
    }
}
