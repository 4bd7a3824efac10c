//! Where the panes go on a terminal of a given size, chosen so that every pane shown is
//! readable: its key column (the command, the symbol, the task's name) at least
//! [`KEY_COLUMN`] wide. The middle row holds the task pane, Top symbols, Top tasks and the
//! scripts' column, in that order, as many as fit at their minimum widths; the others are
//! folded behind Tab (focusing one shows it in the last place of the row) and the status
//! bar names them. `z` zooms the focused pane to the whole space between the status bar
//! and the footer.
//!
//! A pure function of the size and of what there is to show, so that each size can be
//! tested without drawing (htop and btop stay readable at 80×24 the same way: by choosing
//! what to show).

use ratatui::layout::Rect;

/// The panes that take focus, in Tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    Cpus,
    Tasks,
    Symbols,
    Top,
    /// The pane of the `i`-th script (each script has its own).
    Script(usize),
    Log,
}

/// What a frame drew where, returned by the drawing: what a click lands on, which middle
/// panes did not fit (Tab shows them), and the rows of the focused pane (the PgUp/PgDn step).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Drawn {
    pub areas: Vec<(Pane, Rect)>,
    pub folded: Vec<Pane>,
    pub page_rows: usize,
}

impl Default for Drawn {
    /// Before the first frame: nothing to click, a page of 10 rows.
    fn default() -> Drawn {
        Drawn {
            areas: Vec::new(),
            folded: Vec::new(),
            page_rows: 10,
        }
    }
}

/// The narrowest a key column may be.
pub(crate) const KEY_COLUMN: u16 = 15;

/// The widths of the task stream's columns but its command: time, event, pid, the parent
/// at its narrowest, lifetime (see `tasks::stream_widths`).
pub(crate) const STREAM_FIXED: [u16; 5] = [8, 6, 11, 10, 8];
/// Top symbols' columns but the symbol, with call chains (child, self) and without; the
/// binary's at its narrowest (see `ui::symbol_widths`).
pub(crate) const SYMBOLS_FIXED_CHAINS: [u16; 5] = [6, 6, 7, 3, 8];
pub(crate) const SYMBOLS_FIXED: [u16; 4] = [6, 7, 3, 8];
/// Top tasks' columns but the name: pid, samples, share.
pub(crate) const TOP_FIXED: [u16; 3] = [7, 7, 6];
/// Top symbols draws a mark before each name (`+ ` when it has callers to open): the
/// column is this much wider than the name it must keep readable.
pub(crate) const SYMBOL_MARK: u16 = 2;
/// A script's pane shows free text: this wide at least.
const SCRIPT_MIN: u16 = 30;
/// CPU rows shown at most before the pane scrolls.
const MAX_CPU_ROWS: u16 = 8;

/// The outer width of a pane whose fixed columns are `fixed` and whose key column is
/// [`KEY_COLUMN`] wide: the columns, a blank between each two, the borders.
pub(crate) const fn min_width(fixed: &[u16]) -> u16 {
    let mut sum = KEY_COLUMN + 2;
    let mut i = 0;
    while i < fixed.len() {
        sum += fixed[i] + 1;
        i += 1;
    }
    sum
}

/// What there is to lay out.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    /// CPUs watched (a row each, and the all-CPU row).
    pub cpus: usize,
    /// Rows of the footer (2 while a filter error is shown).
    pub footer: u16,
    /// Top symbols is shown (samples came).
    pub symbols: bool,
    /// With call chains, Top symbols has two share columns.
    pub callchains: bool,
    /// Scripts with a pane.
    pub scripts: usize,
    /// The middle pane last focused, shown even when it would be folded.
    pub pick: Option<Pane>,
    /// The zoomed pane, if any.
    pub zoom: Option<Pane>,
    /// A recording replayed: the status bar has two more rows, what the file says about
    /// itself and the position bar.
    pub replay: bool,
}

/// Where everything goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub status: Rect,
    /// The per-CPU pane (zero height when another pane is zoomed).
    pub cpus: Rect,
    /// The middle panes shown, left to right (`Pane::Script(0)` is the scripts' column).
    pub middle: Vec<(Pane, Rect)>,
    pub log: Rect,
    pub footer: Rect,
    /// The middle panes that did not fit (or that a zoom hides): Tab shows them.
    pub folded: Vec<Pane>,
    /// The pane that takes the whole space, when zoomed.
    pub zoomed: Option<(Pane, Rect)>,
}

impl Layout {
    /// Where `pane` is, if shown (any script for the scripts' column).
    #[cfg(test)]
    pub(crate) fn area_of(&self, pane: Pane) -> Option<Rect> {
        let col = column_of(pane);
        if let Some((p, r)) = self.zoomed {
            return (column_of(p) == col).then_some(r);
        }
        match col {
            Pane::Cpus => Some(self.cpus),
            Pane::Log => Some(self.log),
            _ => self.middle.iter().find(|(p, _)| *p == col).map(|(_, r)| *r),
        }
    }
}

/// The place a pane takes: every script shares the scripts' column.
pub(crate) fn column_of(pane: Pane) -> Pane {
    match pane {
        Pane::Script(_) => Pane::Script(0),
        p => p,
    }
}

/// The middle panes there are, in order (the scripts' before Top tasks: a user who asked for
/// a script's pane wants to see it), with their minimum widths and how much of any spare
/// width each takes.
fn candidates(spec: &Spec) -> Vec<(Pane, u16, u16)> {
    let mut v = vec![(Pane::Tasks, min_width(&STREAM_FIXED), 3)];
    if spec.symbols {
        let min = if spec.callchains {
            min_width(&SYMBOLS_FIXED_CHAINS)
        } else {
            min_width(&SYMBOLS_FIXED)
        };
        v.push((Pane::Symbols, min + SYMBOL_MARK, 3));
    }
    if spec.scripts > 0 {
        v.push((Pane::Script(0), SCRIPT_MIN, 2));
    }
    v.push((Pane::Top, min_width(&TOP_FIXED), 1));
    v
}

/// Lay out a terminal of `area`.
pub fn layout(area: Rect, spec: &Spec) -> Layout {
    let footer = spec.footer.clamp(1, 2);
    // At most a sixth of the height for the CPUs: a 64-CPU machine scrolls them.
    let cpu_rows = (spec.cpus as u16 + 1)
        .min(MAX_CPU_ROWS)
        .min((area.height / 6).max(2));
    let status_rows = 2 + 2 * u16::from(spec.replay);
    let body = area.height.saturating_sub(status_rows + footer);
    let rest = body.saturating_sub(cpu_rows + 2);
    // Short terminals give the middle row half of what is left, taller ones two fifths.
    let middle_h = if area.height < 30 {
        rest / 2
    } else {
        rest * 2 / 5
    }
    .max(5)
    .min(rest.saturating_sub(4));
    let [status, cpus, middle, log, foot] = stack(
        area,
        [
            status_rows,
            cpu_rows + 2,
            middle_h,
            rest.saturating_sub(middle_h),
            footer,
        ],
    );
    let all = candidates(spec);
    let width = area.width;
    // As many as fit, in order; the pick takes the last place when it is not among them.
    let mut fit = 0;
    let mut used = 0;
    for (_, min, _) in &all {
        if used + min > width {
            break;
        }
        used += min;
        fit += 1;
    }
    let fit = fit.max(1);
    let pick = spec.pick.map(column_of);
    let mut shown: Vec<(Pane, u16, u16)> = all[..fit].to_vec();
    if let Some(p) = pick {
        if !shown.iter().any(|(s, _, _)| *s == p) {
            if let Some(c) = all.iter().find(|(s, _, _)| *s == p) {
                shown.pop();
                shown.push(*c);
                // The pick may be wider than what it replaced.
                while shown.len() > 1 && shown.iter().map(|s| s.1).sum::<u16>() > width {
                    shown.remove(shown.len() - 2);
                }
            }
        }
    }
    let folded: Vec<Pane> = all
        .iter()
        .map(|c| c.0)
        .filter(|p| !shown.iter().any(|s| s.0 == *p))
        .collect();
    let mins: u16 = shown.iter().map(|s| s.1).sum();
    let spare = width.saturating_sub(mins);
    let weights: u16 = shown.iter().map(|s| s.2).sum::<u16>().max(1);
    let mut x = middle.x;
    let n = shown.len();
    let middle_panes: Vec<(Pane, Rect)> = shown
        .iter()
        .enumerate()
        .map(|(i, (p, min, w))| {
            let wide = if i + 1 == n {
                (middle.x + middle.width).saturating_sub(x)
            } else {
                (min + spare * w / weights).min(width)
            };
            let r = Rect::new(x, middle.y, wide, middle.height);
            x = x.saturating_add(wide);
            (*p, r)
        })
        .collect();
    let zoomed = spec.zoom.map(|p| {
        let whole = Rect::new(area.x, cpus.y, area.width, cpus.height + rest);
        (column_of(p), whole)
    });
    Layout {
        status,
        cpus,
        middle: middle_panes,
        log,
        footer: foot,
        folded,
        zoomed,
    }
}

/// Split `area` into rows of the given heights (clipped to the area).
fn stack<const N: usize>(area: Rect, heights: [u16; N]) -> [Rect; N] {
    let mut y = area.y;
    let bottom = area.y + area.height;
    heights.map(|h| {
        let h = h.min(bottom.saturating_sub(y));
        let r = Rect::new(area.x, y, area.width, h);
        y += h;
        r
    })
}

/// The name a pane goes by in the status bar.
pub(crate) fn name_of(pane: Pane) -> &'static str {
    match pane {
        Pane::Cpus => "CPUs",
        Pane::Tasks => "Tasks",
        Pane::Symbols => "Top symbols",
        Pane::Top => "Top tasks",
        Pane::Script(_) => "Scripts",
        Pane::Log => "Event log",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(symbols: bool, callchains: bool, scripts: usize) -> Spec {
        Spec {
            cpus: 2,
            footer: 1,
            symbols,
            callchains,
            scripts,
            pick: None,
            zoom: None,
            replay: false,
        }
    }

    fn names(l: &Layout) -> Vec<Pane> {
        l.middle.iter().map(|m| m.0).collect()
    }

    /// The sizes the issue names, and every combination of panes: each pane shown is at
    /// least its minimum (its key column at least KEY_COLUMN), the row is filled, and what
    /// is not shown is folded.
    #[test]
    fn every_pane_shown_is_readable_at_each_size() {
        for (w, h) in [(80, 24), (120, 40), (160, 45), (60, 18), (200, 60)] {
            for (symbols, chains, scripts) in [
                (false, false, 0),
                (true, false, 0),
                (true, true, 0),
                (true, true, 2),
                (false, false, 1),
            ] {
                let s = spec(symbols, chains, scripts);
                let l = layout(Rect::new(0, 0, w, h), &s);
                let all = candidates(&s);
                for (p, r) in &l.middle {
                    let min = all.iter().find(|c| c.0 == *p).unwrap().1;
                    assert!(
                        r.width >= min || w < min,
                        "{w}x{h} {p:?}: {} < {min}",
                        r.width
                    );
                }
                assert_eq!(l.middle.iter().map(|m| m.1.width).sum::<u16>(), w);
                assert_eq!(l.middle.len() + l.folded.len(), all.len(), "{w}x{h}");
                assert_eq!(
                    l.status.height
                        + l.cpus.height
                        + l.middle[0].1.height
                        + l.log.height
                        + l.footer.height,
                    h
                );
                assert!(l.log.height >= 4, "{w}x{h}: a log to read");
            }
        }
    }

    #[test]
    fn what_each_size_shows() {
        let at = |w, s: &Spec| names(&layout(Rect::new(0, 0, w, 40), s));
        let g = spec(true, true, 0);
        assert_eq!(at(80, &g), [Pane::Tasks]);
        assert_eq!(at(120, &g), [Pane::Tasks, Pane::Symbols]);
        assert_eq!(at(160, &g), [Pane::Tasks, Pane::Symbols, Pane::Top]);
        let plain = spec(false, false, 0);
        assert_eq!(at(120, &plain), [Pane::Tasks, Pane::Top]);
        assert_eq!(
            layout(Rect::new(0, 0, 80, 24), &g).folded,
            [Pane::Symbols, Pane::Top]
        );
    }

    #[test]
    fn the_pane_picked_takes_the_last_place_and_zoom_takes_all() {
        let mut s = spec(true, true, 1);
        s.pick = Some(Pane::Top);
        let l = layout(Rect::new(0, 0, 120, 40), &s);
        assert_eq!(names(&l), [Pane::Tasks, Pane::Top]);
        assert_eq!(l.folded, [Pane::Symbols, Pane::Script(0)]);
        s.pick = None;
        assert_eq!(
            names(&layout(Rect::new(0, 0, 160, 45), &s)),
            [Pane::Tasks, Pane::Symbols, Pane::Script(0)],
            "a script's pane before Top tasks"
        );
        s.pick = Some(Pane::Script(1));
        assert_eq!(
            names(&layout(Rect::new(0, 0, 80, 24), &s)),
            [Pane::Script(0)]
        );
        s.pick = Some(Pane::Tasks);
        assert_eq!(names(&layout(Rect::new(0, 0, 80, 24), &s)), [Pane::Tasks]);
        s.zoom = Some(Pane::Log);
        let l = layout(Rect::new(0, 0, 80, 24), &s);
        let z = l.zoomed.unwrap();
        assert_eq!((z.0, z.1.y, z.1.height), (Pane::Log, 2, 24 - 2 - 1));
        assert_eq!(l.area_of(Pane::Log), Some(z.1));
        assert_eq!(l.area_of(Pane::Tasks), None);
    }

    #[test]
    fn many_cpus_leave_room_for_the_rest() {
        let mut s = spec(true, false, 0);
        s.cpus = 64;
        let l = layout(Rect::new(0, 0, 80, 24), &s);
        assert_eq!(l.cpus.height, 4 + 2);
        assert!(l.middle[0].1.height >= 5 && l.log.height >= 5, "{l:?}");
    }
}
