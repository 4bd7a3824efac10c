//! The CPU pane's drawing: a row per CPU (its rate now and a sparkline of the last
//! minute), the all-CPU row, and the other events' rates and IPC when several are open.
//! Its figures come from [`super::rates`], kept by the app.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};

use super::app::{App, RateUnit};
use super::layout::Pane;
use super::widgets::{pane_block, si};

fn rate_text(unit: RateUnit, v: f64) -> String {
    match unit {
        RateUnit::Utilisation => format!("{v:5.1}%"),
        RateUnit::Events => format!("{:>6}/s", si(v)),
        RateUnit::Records => format!("{:>6}/s", si(v)),
    }
}

pub(crate) fn draw_cpus(f: &mut Frame, area: Rect, app: &App) {
    let data = app.shown();
    let r = &data.rates;
    let n = r.cpus().len();
    let title = match r.unit() {
        RateUnit::Utilisation => format!("CPU utilisation ({}, last minute)", app.cfg.event),
        RateUnit::Events => format!("{} per second (last minute)", app.cfg.event),
        RateUnit::Records => "records per second (last minute)".to_string(),
    };
    // With several events: a column per other event, and IPC with cycles and instructions.
    let others = &data.event_rates.others;
    let title = others
        .iter()
        .fold(title, |t, (d, _)| format!("{t} · {}", d.name))
        + if data.has_ipc() { " · IPC" } else { "" };
    let block = pane_block(title, app.focus == Pane::Cpus);
    let inner = block.inner(area);
    f.render_widget(block, area);
    // Rows: each CPU, then the all-CPU row.
    let rows: Vec<usize> = (0..=n)
        .skip(app.cpu_scroll)
        .take(inner.height as usize)
        .collect();
    let spark_max_other = (0..n)
        .flat_map(|i| r.history(i).iter().copied())
        .fold(0.0f64, f64::max);
    for (k, &i) in rows.iter().enumerate() {
        let y = inner.y + k as u16;
        let row = Rect::new(inner.x, y, inner.width, 1);
        let is_total = i == n;
        let label = if is_total {
            "all".to_string()
        } else {
            format!("cpu{}", r.cpus()[i])
        };
        let latest = r.latest(i);
        // The all row for utilisation is the average over CPUs: 100% means every CPU busy.
        let shown = match (latest, r.unit(), is_total) {
            (Some(v), RateUnit::Utilisation, true) => Some(v / n.max(1) as f64),
            (v, _, _) => v,
        };
        let frac = match (shown, r.unit()) {
            (None, _) => 0.0,
            (Some(v), RateUnit::Utilisation) => v / 100.0,
            (Some(v), _) => {
                let max = if is_total {
                    r.history(i).iter().copied().fold(0.0, f64::max)
                } else {
                    spark_max_other
                };
                if max > 0.0 { v / max } else { 0.0 }
            }
        };
        // A CPU offline (its events went with it), or back online without its events.
        let gone = (!is_total)
            .then(|| data.totals.per_cpu.iter().find(|c| c.cpu == r.cpus()[i]))
            .flatten()
            .and_then(|c| match (&c.unwatched, c.offline) {
                (Some(_), _) => Some("unwatched"),
                (None, true) => Some("offline"),
                (None, false) => None,
            });
        let value = match gone {
            Some(what) => what.to_string(),
            None => shown.map_or_else(|| "     …".to_string(), |v| rate_text(r.unit(), v)),
        };
        let mut widths = vec![7, 10];
        widths.extend(others.iter().map(|_| 10));
        if data.has_ipc() {
            widths.push(7);
        }
        widths.push(22);
        let cols = columns(row, &widths);
        let extra = others.len() + data.has_ipc() as usize;
        for (k, (_, er)) in others.iter().enumerate() {
            let v = er.latest(i).map(|v| match (er.unit(), is_total) {
                (RateUnit::Utilisation, true) => v / n.max(1) as f64,
                _ => v,
            });
            let text = v.map_or_else(|| "     …".to_string(), |v| rate_text(er.unit(), v));
            f.render_widget(Paragraph::new(text), cols[2 + k]);
        }
        if data.has_ipc() {
            let text = data
                .ipc(i)
                .map_or_else(|| "    …".to_string(), |v| format!("{v:5.2}"));
            f.render_widget(Paragraph::new(text), cols[2 + others.len()]);
        }
        // The bar and the sparkline come after the extra columns.
        let cols: Vec<Rect> = cols[..2]
            .iter()
            .chain(&cols[2 + extra..])
            .copied()
            .collect();
        let style = if is_total {
            Style::default().add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        f.render_widget(Paragraph::new(Span::styled(label, style)), cols[0]);
        f.render_widget(Paragraph::new(Span::styled(value, style)), cols[1]);
        let width = cols[2].width.saturating_sub(2) as usize;
        let filled = ((frac.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
        let color = if frac > 0.85 {
            Color::Red
        } else if frac > 0.5 {
            Color::Yellow
        } else {
            Color::Green
        };
        f.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled("█".repeat(filled), Style::default().fg(color)),
                Span::styled(
                    "░".repeat(width - filled),
                    Style::default().fg(Color::DarkGray),
                ),
            ])),
            cols[2],
        );
        let hist = r.history(i);
        let (data, max): (Vec<u64>, u64) = match r.unit() {
            RateUnit::Utilisation => {
                let scale = if is_total { n.max(1) as f64 } else { 1.0 };
                (
                    hist.iter().map(|v| (v / scale * 10.0) as u64).collect(),
                    1000,
                )
            }
            _ => {
                let v: Vec<u64> = hist.iter().map(|v| *v as u64).collect();
                let m = v.iter().copied().max().unwrap_or(0).max(1);
                (v, m)
            }
        };
        // The newest second at the right edge.
        let w = cols[3].width as usize;
        let data = &data[data.len().saturating_sub(w)..];
        f.render_widget(
            Sparkline::default()
                .data(data)
                .max(max)
                .style(Style::default().fg(Color::Cyan)),
            cols[3],
        );
    }
}

/// Split `area` into columns of the given widths, and a last one with the rest.
fn columns(area: Rect, widths: &[u16]) -> Vec<Rect> {
    let mut x = area.x;
    let right = area.x + area.width;
    let mut v: Vec<Rect> = widths
        .iter()
        .map(|&w| {
            let w = w.min(right - x);
            let r = Rect::new(x, area.y, w, area.height);
            x += w;
            r
        })
        .collect();
    v.push(Rect::new(x, area.y, right - x, area.height));
    v
}
