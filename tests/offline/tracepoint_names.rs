//! Tracepoint fields keep their own names in `--plain`, `--json` and scripts, and the
//! print fmt's text of a field comes beside its raw value.

use crate::common;

use common::{perfwatch, run};

/// Something that sleeps, wakes and writes to disk (an interrupt) while perfwatch watches.
const WORK: &str = "for i in 1 2 3 4 5; do sleep 0.05; dd if=/dev/zero of=/tmp/.pw_names_io bs=4k count=8 oflag=dsync 2>/dev/null; done; rm -f /tmp/.pw_names_io";

const EVENTS: &str =
    "irq:irq_handler_entry,sched:sched_switch,sched:sched_wakeup,timer:hrtimer_expire_entry";

#[test]
fn fields_keep_their_names_in_plain_and_json() {
    let _tracefs = require_tracefs!();
    let r = run(perfwatch().args([
        "--plain", "-a", "-e", EVENTS, "-d", "2", "--", "sh", "-c", WORK,
    ]));
    r.exited(0);
    assert!(!r.stdout.contains("field_"), "{}", r.stdout);
    let switch = r
        .stdout
        .lines()
        .find(|l| l.contains("event: sched:sched_switch,"))
        .expect("a sched_switch");
    assert!(switch.contains(", prev_state_str: "), "{switch}");
    let timer = r
        .stdout
        .lines()
        .find(|l| l.contains("event: timer:hrtimer_expire_entry,"))
        .expect("a timer");
    assert!(timer.contains(", function_str: "), "{timer}");
    if let Some(irq) = r
        .stdout
        .lines()
        .find(|l| l.contains("event: irq:irq_handler_entry,"))
    {
        assert!(irq.contains(", name: "), "{irq}");
    }

    let r = run(perfwatch().args([
        "--json", "-a", "-e", EVENTS, "-d", "2", "--", "sh", "-c", WORK,
    ]));
    r.exited(0);
    let lines = r.json();
    let irq: Vec<_> = lines
        .iter()
        .filter(|l| l["event"] == "irq:irq_handler_entry")
        .collect();
    for l in &irq {
        assert!(
            l["name"].is_string() && l.get("field_name").is_none(),
            "{l}"
        );
        assert!(l["irq"].is_number(), "{l}");
    }
    for l in lines.iter().filter(|l| l["event"] == "sched:sched_switch") {
        assert!(
            l["prev_state"].is_number() && l["prev_state_str"].is_string(),
            "{l}"
        );
        // The text is what the number says: R for 0, a letter otherwise.
        let (n, t) = (
            l["prev_state"].as_i64().unwrap(),
            l["prev_state_str"].as_str().unwrap(),
        );
        assert_eq!(n == 0, t == "R", "{l}");
    }
    for l in lines.iter().filter(|l| l["event"] == "sched:sched_wakeup") {
        assert!(l["pid"].is_number() && l["sample_pid"].is_number(), "{l}");
    }
}

#[cfg(feature = "python")]
#[test]
fn scripts_read_fields_by_their_own_names() {
    let _tracefs = require_tracefs!();
    let (_d, s) = common::temp_script(
        "names.py",
        r#"
seen = {}
def on_event(event):
    if event.type != "sample":
        assert event.fields == {}, event.fields
        return
    f = event.fields
    if event.name == "irq:irq_handler_entry":
        # The event's name stays the event's; the field is in event.fields.
        assert isinstance(f["name"], str) and isinstance(f["irq"], int), f
        assert event.as_dict()["fields"]["name"] == f["name"]
    elif event.name == "sched:sched_switch":
        assert event.prev_state_str == f["prev_state_str"], f
        assert (event.prev_state == 0) == (event.prev_state_str == "R"), f
        assert "common_pid" in f, f
    elif event.name == "sched:sched_wakeup":
        # sched_wakeup's own pid: the woken task, not the running one.
        assert event.pid == f["pid"] and isinstance(event.sample_pid, int), f
    elif event.name == "timer:hrtimer_expire_entry":
        assert isinstance(event.function_str, str) and event.function_str, f
    seen[event.name] = seen.get(event.name, 0) + 1
def trace_end():
    print("SEEN", " ".join(sorted(seen)))
"#,
    );
    let r = run(perfwatch()
        .args(["--plain", "-a", "-e", EVENTS, "-d", "2", "--script"])
        .arg(&s)
        .args(["--", "sh", "-c", WORK]));
    r.exited(0)
        .said(&[
            "SEEN",
            "sched:sched_switch",
            "sched:sched_wakeup",
            "timer:hrtimer_expire_entry",
        ])
        .never_said(&["Traceback", "AssertionError"]);
}
