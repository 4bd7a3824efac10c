//! `--generate`: the man page renders with man(1), and each completion script loads in its
//! shell and completes options and event names (bash always; zsh, fish and PowerShell where
//! installed).

use crate::common;

use common::InTime;

use std::path::Path;
use std::process::{Command, Output};

use assert_cmd::cargo::cargo_bin;

fn generate(kind: &str) -> String {
    let out = Command::new(cargo_bin("perfwatch"))
        .args(["--generate", kind])
        .output_in_time()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `dir/name` holding `text`.
fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `perfwatch --generate KIND` written as `name` in a temporary directory of its own.
fn generated(name: &str, kind: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), name, &generate(kind));
    (dir, file)
}

/// Skip the calling test, visibly, when `program` is not installed (`hint`: how to get it).
macro_rules! require_program {
    ($program:literal, $hint:literal) => {
        if !have($program) {
            skip!("{} is not installed{}", $program, $hint);
        }
    };
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output_in_time()
        .is_ok_and(|o| o.status.success())
}

fn stdout_of(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Whitespace runs as one space, and groff's typographic minus and hyphen as `-`.
fn collapse(s: &str) -> String {
    s.replace(['\u{2212}', '\u{2010}'], "-")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_man_page_renders_with_every_help_section() {
    require_program!("man", " (.ci/run installs man-db)");
    let (_dir, page) = generated("perfwatch.1", "man");
    // Wide enough that no paragraph is broken or hyphenated; groff's warnings on.
    let out = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANWIDTH", "1000")
        .env("MANPAGER", "cat")
        .env("LC_ALL", "C.UTF-8")
        .output_in_time()
        .unwrap();
    let text = stdout_of(&out, "man -l");
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(warnings.trim().is_empty(), "groff warns: {warnings}");
    let text = collapse(&text);
    for want in [
        "PERFWATCH(1)",
        "NAME perfwatch -",
        "SYNOPSIS",
        "OPTIONS",
        "-e, --event",
        "--generate",
        "SEE ALSO",
    ] {
        assert!(text.contains(want), "no '{want}' in:\n{text}");
    }
    // Every section after --help's options, with every line of it, as --help has it.
    let help = stdout_of(
        &Command::new(cargo_bin("perfwatch"))
            .arg("--help")
            .output_in_time()
            .unwrap(),
        "--help",
    );
    let after = &help[help.find("\nEXAMPLES:\n").expect("--help has EXAMPLES") + 1..];
    let sections = perfwatch::generate::help_sections(after);
    let titles: Vec<&str> = sections.iter().map(|s| s.title.as_str()).collect();
    for want in ["EXAMPLES", "PERMISSIONS", "FILTER", "EXIT STATUS"] {
        assert!(titles.contains(&want), "no {want} in {titles:?}: {after}");
    }
    for s in &sections {
        assert!(text.contains(&s.title), "no section {}", s.title);
        for b in &s.blocks {
            let want = match b {
                perfwatch::generate::Block::Paragraph(p) => collapse(p),
                perfwatch::generate::Block::Entry { term, text } => {
                    format!("{term} {}", collapse(text))
                }
            };
            assert!(text.contains(&want), "no '{want}' in the man page:\n{text}");
        }
    }
}

/// What bash completes for the words of `line` (the last one being completed).
fn bash_complete(script: &Path, line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split(' ').collect();
    let prog = format!(
        "source '{}'\n\
         COMP_WORDS=({})\n\
         COMP_CWORD={}\n\
         COMP_LINE='{line}'\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         _perfwatch perfwatch '{}' '{}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len().saturating_sub(2)],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &prog])
        .output_in_time()
        .unwrap();
    stdout_of(&out, "bash").lines().map(String::from).collect()
}

#[test]
fn bash_completes_options_and_event_names() {
    require_program!("bash", "");
    let (_dir, script) = generated("perfwatch.bash", "complete-bash");
    let registered = Command::new("bash")
        .args(["--norc", "--noprofile", "-c"])
        .arg(format!(
            "source '{}' && complete -p perfwatch",
            script.display()
        ))
        .output_in_time()
        .unwrap();
    assert!(stdout_of(&registered, "complete -p").contains("_perfwatch"));
    assert_eq!(
        bash_complete(&script, "perfwatch -e cpu-"),
        ["cpu-cycles", "cpu-clock", "cpu-migrations"]
    );
    assert_eq!(bash_complete(&script, "perfwatch --event dum"), ["dummy"]);
    assert_eq!(bash_complete(&script, "perfwatch --swi"), ["--switch"]);
    assert_eq!(
        bash_complete(&script, "perfwatch --generate complete-"),
        [
            "complete-bash",
            "complete-zsh",
            "complete-fish",
            "complete-powershell"
        ]
    );
}

#[test]
fn fish_completes_options_and_event_names() {
    require_program!("fish", " (.ci/run installs it)");
    let (_dir, script) = generated("perfwatch.fish", "complete-fish");
    let complete = |line: &str| {
        let out = Command::new("fish")
            .args(["--no-config", "-c"])
            .arg(format!(
                "source '{}'; complete -C '{line}'",
                script.display()
            ))
            .output_in_time()
            .unwrap();
        stdout_of(&out, "fish")
            .lines()
            // `value<TAB>description`
            .map(|l| l.split('\t').next().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    let mut events = complete("perfwatch -e cpu-");
    events.sort();
    assert_eq!(events, ["cpu-clock", "cpu-cycles", "cpu-migrations"]);
    assert_eq!(complete("perfwatch --swi"), ["--switch"]);
}

#[test]
fn zsh_completes_options_and_event_names() {
    require_program!("zsh", " (.ci/run installs it)");
    let (dir, _) = generated("_perfwatch", "complete-zsh");
    let hits = dir.path().join("hits");
    // zsh completes only inside its line editor: drive an interactive zsh in zsh's own
    // pseudo-terminal (zpty), press Tab, and record every candidate the completion adds.
    let driver = format!(
        r#"zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z 'fpath=({dir} $fpath); autoload -U compinit; compinit -u -D'
zpty -w z 'compadd() {{ builtin compadd -O __hits "$@"; print -r -l -- "<hit>"${{^__hits}} >>{hits}; builtin compadd "$@" }}'
zpty -w -n z $'perfwatch -e cpu-\t'
for i in {{1..100}}; do
  [[ -f {hits} ]] && grep -q '<hit>cpu-migrations' {hits} && break
  sleep 0.1
done
zpty -d z
"#,
        dir = dir.path().display(),
        hits = hits.display(),
    );
    let out = Command::new("zsh")
        .args(["-f", "-c", &driver])
        .output_in_time()
        .unwrap();
    stdout_of(&out, "zsh");
    let got = std::fs::read_to_string(&hits).unwrap_or_default();
    let mut events: Vec<&str> = got
        .lines()
        .filter_map(|l| l.strip_prefix("<hit>"))
        .collect();
    events.sort();
    events.dedup();
    assert_eq!(
        events,
        ["cpu-clock", "cpu-cycles", "cpu-migrations"],
        "{got}"
    );
}

#[test]
fn powershell_completes_event_names() {
    let Some(pwsh) = ["pwsh", "powershell"].into_iter().find(|p| have(p)) else {
        skip!("PowerShell (pwsh) is not installed");
    };
    let (_dir, script) = generated("perfwatch.ps1", "complete-powershell");
    let line = "perfwatch -e cpu-";
    let out = Command::new(pwsh)
        .args(["-NoLogo", "-NoProfile", "-NonInteractive", "-Command"])
        .arg(format!(
            ". '{}'; (TabExpansion2 -inputScript '{line}' -cursorColumn {}).CompletionMatches | ForEach-Object {{ $_.CompletionText }}",
            script.display(),
            line.len()
        ))
        .output_in_time()
        .unwrap();
    let mut events: Vec<String> = stdout_of(&out, "pwsh").lines().map(String::from).collect();
    events.sort();
    assert_eq!(events, ["cpu-clock", "cpu-cycles", "cpu-migrations"]);
}

#[test]
fn generate_is_a_usage_error_when_misused_and_quiet_on_a_closed_pipe() {
    for args in [
        &["--generate"][..],
        &["--generate", "nroff"],
        &["--generate", "man", "--plain"],
        &["--generate", "man", "--", "true"],
    ] {
        let out = Command::new(cargo_bin("perfwatch"))
            .args(args)
            .output_in_time()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // A reader that went away (`| head`): perfwatch ends quietly with 0, every kind.
    for kind in [
        "man",
        "complete-bash",
        "complete-zsh",
        "complete-fish",
        "complete-powershell",
    ] {
        let mut fds = [0; 2];
        // SAFETY: pipe into an array of two ints we own.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both fds are ours; the read end is closed before anything is written.
        let (read, write) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        drop(read);
        let out = Command::new(cargo_bin("perfwatch"))
            .args(["--generate", kind])
            .stdout(write)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
            .output_in_time()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{kind}: {stderr}");
        assert!(stderr.is_empty(), "{kind}: {stderr}");
    }
}
