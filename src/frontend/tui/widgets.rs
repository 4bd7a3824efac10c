//! The drawing pieces every pane uses: a pane's frame, a grid of columns drawn cell by cell,
//! the window of rows a scrolled stream shows, and how times and counts are written.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders};

use super::app::App;

pub(crate) fn hms(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// A count or rate with an SI suffix: `950`, `12.3k`, `2.31G`.
pub(crate) fn si(v: f64) -> String {
    let a = v.abs();
    let (d, s) = if a >= 1e12 {
        (1e12, "T")
    } else if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "k")
    } else {
        return format!("{v:.0}");
    };
    let x = v / d;
    if x.abs() >= 100.0 {
        format!("{x:.0}{s}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}{s}")
    } else {
        format!("{x:.2}{s}")
    }
}

pub(crate) fn pane_block(title: String, focused: bool) -> Block<'static> {
    let style = if focused {
        Style::default()
            .fg(Color::Cyan)
            .add_modifier(Modifier::BOLD)
    } else {
        Style::default().fg(Color::DarkGray)
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(style)
        .title(Span::styled(
            title,
            Style::default().add_modifier(Modifier::BOLD),
        ))
}

/// Seconds since the start, as the streams show times.
pub(crate) fn rel(app: &App, t: u64) -> String {
    let ns = t.saturating_sub(app.cfg.start_ns);
    format!("{:>8.3}", ns as f64 / 1e9)
}

/// The rows `[start, end)` of a stream of `len` rows scrolled `back` from the newest.
pub fn window(len: usize, back: usize, rows: usize) -> (usize, usize) {
    let end = len.saturating_sub(back.min(len.saturating_sub(1)));
    (end.saturating_sub(rows), end)
}

pub(crate) fn scroll_note(back: usize, paused: bool) -> String {
    match (back, paused) {
        (0, false) => String::new(),
        (0, true) => " [paused]".into(),
        (n, _) => format!(" [{n} back, End follows]"),
    }
}

/// Column widths: the fixed ones as given (0 marks a flexible column), the flexible ones
/// sharing what is left, with one blank between columns.
pub(crate) fn grid_widths(total: u16, spec: &[u16]) -> Vec<u16> {
    let gaps = spec.len().saturating_sub(1) as u16;
    let fixed: u16 = spec.iter().sum();
    let flex = spec.iter().filter(|w| **w == 0).count() as u16;
    let rest = total.saturating_sub(fixed + gaps);
    let mut left = rest;
    let mut seen = 0;
    spec.iter()
        .map(|&w| {
            if w > 0 {
                return w;
            }
            seen += 1;
            let share = if seen == flex {
                left
            } else {
                rest / flex.max(1)
            };
            left -= share.min(left);
            share
        })
        .collect()
}

/// A table drawn cell by cell into computed rectangles. ratatui's `Table` lays its columns
/// out with the constraint solver on every frame, which cost more than everything else drawn.
pub(crate) fn draw_grid<'a>(
    f: &mut Frame,
    block: Block<'a>,
    area: Rect,
    spec: &[u16],
    header: &[&'static str],
    rows: impl Iterator<Item = Vec<Span<'a>>>,
) {
    let inner = block.inner(area);
    f.render_widget(block, area);
    let widths = grid_widths(inner.width, spec);
    let head = Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
    let header_cells = header.iter().map(|h| Span::styled(*h, head)).collect();
    for (y, cells) in std::iter::once(header_cells)
        .chain(rows)
        .enumerate()
        .take(inner.height as usize)
    {
        let mut x = inner.x;
        let right = inner.x + inner.width;
        for (cell, w) in cells.into_iter().zip(&widths) {
            let w = (*w).min(right.saturating_sub(x));
            if w == 0 {
                break;
            }
            f.render_widget(cell, Rect::new(x, inner.y + y as u16, w, 1));
            x = (x + w + 1).min(right);
        }
    }
}

/// The rows a pane shows: `len` of them from `start`, with their indexes in `rows`.
pub(crate) fn shown_rows<T>(
    rows: &[T],
    start: usize,
    len: usize,
) -> impl Iterator<Item = (usize, &T)> {
    rows.iter().enumerate().skip(start).take(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_units() {
        assert_eq!(si(950.0), "950");
        assert_eq!(si(12_345.0), "12.3k");
        assert_eq!(si(2_310_000_000.0), "2.31G");
        assert_eq!(si(123_456_789.0), "123M");
    }

    #[test]
    fn windows() {
        assert_eq!(window(100, 0, 10), (90, 100));
        assert_eq!(window(100, 5, 10), (85, 95));
        assert_eq!(window(5, 0, 10), (0, 5));
        assert_eq!(window(5, 99, 10), (0, 1));
        assert_eq!(window(0, 0, 10), (0, 0));
    }

    #[test]
    fn grid_columns_share_the_rest() {
        assert_eq!(grid_widths(40, &[8, 0, 0, 8]), vec![8, 10, 11, 8]);
        assert_eq!(grid_widths(10, &[8, 0, 8]), vec![8, 0, 8]);
    }
}
