//! Request bars in the style of eks-node-viewer: a fill of eighth blocks and the
//! percentage, so a column of nodes reads as a histogram of how full each is.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];

/// A bar of `width` cells (including the " 42%" label) for `fraction` (0..1, clamped).
pub fn bar(fraction: f64, width: u16, fill: Style, empty: Style) -> Line<'static> {
    let f = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let label = format!("{:>5}", format!("{:.0}%", f * 100.0));
    let cells = (width as usize).saturating_sub(label.len());
    let eighths = (f * cells as f64 * 8.0).round() as usize;
    let full = eighths / 8;
    let part = eighths % 8;
    let mut filled = "█".repeat(full.min(cells));
    let mut used = full.min(cells);
    if part > 0 && used < cells {
        filled.push(EIGHTHS[part]);
        used += 1;
    }
    let rest = "·".repeat(cells - used);
    Line::from(vec![
        Span::styled(filled, fill),
        Span::styled(rest, empty),
        Span::styled(label, fill),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn bars_fill_in_proportion_and_keep_their_width() {
        let s = Style::default();
        assert_eq!(text(&bar(0.5, 15, s, s)), "█████·····  50%");
        assert_eq!(text(&bar(0.0, 15, s, s)).chars().count(), 15);
        assert_eq!(text(&bar(1.0, 15, s, s)), "██████████ 100%");
        assert_eq!(text(&bar(0.55, 15, s, s)), "█████▌····  55%");
        assert_eq!(text(&bar(f64::NAN, 15, s, s)), "··········   0%");
    }
}
