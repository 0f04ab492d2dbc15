//! How a table's columns share the width it has. Each column has a natural width, the
//! narrowest it may shrink to (its text then ends in "…") and a priority. When the table
//! is narrower than its columns, the lowest-priority columns shrink first; only a column
//! already at its narrowest vanishes, lowest priority first, so the columns an operator
//! reads to decide (why pending, disruption, budget, savings) are the last to go. The
//! wide mode (ctrl-w, as in k9s) instead shows every column at the width of its text and
//! scrolls sideways, the first column (the row's name) staying in place.

use ratatui::layout::Constraint;

/// A column: its heading, its natural width (`Length(n)`: n; `Min(n)`: at least n and
/// whatever is left over), the narrowest it shrinks to, and how long it is kept.
#[derive(Clone, Debug)]
pub struct Column {
    pub title: &'static str,
    pub width: Constraint,
    /// Higher is kept longer (and shrunk later).
    pub priority: u8,
    /// The narrowest it shrinks to before it is dropped.
    pub min: u16,
}

const fn natural_of(width: Constraint) -> u16 {
    match width {
        Constraint::Length(n) | Constraint::Min(n) => n,
        _ => 1,
    }
}

/// A column that neither shrinks nor outlives others (priority 0): set both with
/// [`Column::keep`] and [`Column::shrink`].
pub const fn col(title: &'static str, width: Constraint) -> Column {
    Column {
        title,
        width,
        priority: 0,
        min: natural_of(width),
    }
}

impl Column {
    /// How long the column is kept when space runs out (higher: longer).
    pub const fn keep(mut self, priority: u8) -> Column {
        self.priority = priority;
        self
    }

    /// The narrowest the column shrinks to (its text ellipsized) before it is dropped.
    pub const fn shrink(mut self, min: u16) -> Column {
        let natural = natural_of(self.width);
        self.min = if min < natural { min } else { natural };
        self
    }

    pub const fn natural(&self) -> u16 {
        natural_of(self.width)
    }

    fn grows(&self) -> bool {
        matches!(self.width, Constraint::Min(_))
    }
}

/// A column placed on screen: which one and how wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    pub index: usize,
    pub width: u16,
}

/// Fits `columns` into `width` cells (one cell between columns), in their order.
pub fn plan(columns: &[Column], width: u16) -> Vec<Placed> {
    if columns.is_empty() {
        return Vec::new();
    }
    let width = width as u32;
    let mut shown: Vec<usize> = (0..columns.len()).collect();
    let need = |shown: &[usize]| -> u32 {
        shown.iter().map(|&i| columns[i].min as u32).sum::<u32>() + shown.len() as u32 - 1
    };
    // Drop, lowest priority first (the rightmost of equals), while even the narrowest
    // widths do not fit.
    while shown.len() > 1 && need(&shown) > width {
        let Some(pos) =
            (0..shown.len()).min_by_key(|&p| (columns[shown[p]].priority, usize::MAX - p))
        else {
            break;
        };
        shown.remove(pos);
    }
    let mut widths: Vec<u32> = shown.iter().map(|&i| columns[i].min as u32).collect();
    let mut left = width.saturating_sub(need(&shown));
    // Give back what is left, highest priority first (the leftmost of equals).
    let mut order: Vec<usize> = (0..shown.len()).collect();
    order.sort_by_key(|&p| (std::cmp::Reverse(columns[shown[p]].priority), p));
    for &p in &order {
        let c = &columns[shown[p]];
        let more = (c.natural() as u32).saturating_sub(widths[p]).min(left);
        widths[p] += more;
        left -= more;
    }
    // Whatever remains goes to the columns that grow (split evenly, the first gets the
    // odd cells).
    let growing: Vec<usize> = (0..shown.len())
        .filter(|&p| columns[shown[p]].grows())
        .collect();
    if !growing.is_empty() {
        let each = left / growing.len() as u32;
        let mut odd = left % growing.len() as u32;
        for &p in &growing {
            widths[p] += each + u32::from(odd > 0);
            odd = odd.saturating_sub(1);
        }
    }
    // A lone column wider than the table is cut to it.
    if shown.len() == 1 {
        widths[0] = widths[0].min(width);
    }
    shown
        .iter()
        .zip(widths)
        .map(|(&index, w)| Placed {
            index,
            width: w.min(u16::MAX as u32) as u16,
        })
        .collect()
}

/// Wide mode: every column as wide as its text (`full[i]`, at least its natural width),
/// the first column kept in place and the others from `scroll` on, as many as fit (the
/// last one cut). Returns the columns and whether more lie to the left and to the right.
pub fn plan_wide(
    columns: &[Column],
    full: &[u16],
    scroll: usize,
    width: u16,
) -> (Vec<Placed>, bool, bool) {
    let wide = |i: usize| full.get(i).copied().unwrap_or(0).max(columns[i].natural());
    let mut out = Vec::new();
    if columns.is_empty() {
        return (out, false, false);
    }
    let mut used = wide(0).min(width) as u32;
    out.push(Placed {
        index: 0,
        width: used as u16,
    });
    let first = 1 + scroll.min(columns.len().saturating_sub(2));
    let mut right = false;
    for i in first..columns.len() {
        let room = (width as u32).saturating_sub(used + 1);
        if room == 0 {
            right = true;
            break;
        }
        let w = (wide(i) as u32).min(room);
        out.push(Placed {
            index: i,
            width: w as u16,
        });
        used += w + 1;
        if w < wide(i) as u32 {
            right = true;
            break;
        }
    }
    (out, first > 1, right)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widths(p: &[Placed]) -> Vec<(usize, u16)> {
        p.iter().map(|p| (p.index, p.width)).collect()
    }

    fn cols() -> Vec<Column> {
        vec![
            col("NAME", Constraint::Length(20)).keep(9).shrink(10),
            col("LOW", Constraint::Length(10)).keep(1),
            col("MID", Constraint::Length(10)).keep(5).shrink(6),
            col("WHY", Constraint::Min(20)).keep(10).shrink(12),
        ]
    }

    #[test]
    fn room_enough_gives_every_column_its_width_and_the_rest_to_the_growing_one() {
        assert_eq!(
            widths(&plan(&cols(), 70)),
            [(0, 20), (1, 10), (2, 10), (3, 27)]
        );
    }

    #[test]
    fn the_lowest_priority_shrinks_then_goes_and_the_operators_column_stays() {
        // 20+10+10+20+3 = 63 natural; at 55 MID (priority 5) shrinks all the way before
        // NAME (9) gives a cell, and WHY (10) keeps its width. LOW cannot shrink.
        assert_eq!(
            widths(&plan(&cols(), 55)),
            [(0, 16), (1, 10), (2, 6), (3, 20)]
        );
        // At 40 LOW goes, and the others get back what they can, WHY first.
        assert_eq!(widths(&plan(&cols(), 40)), [(0, 12), (2, 6), (3, 20)]);
        // At 23 only the two highest remain, both at their narrowest.
        assert_eq!(widths(&plan(&cols(), 23)), [(0, 10), (3, 12)]);
        assert_eq!(widths(&plan(&cols(), 5)), [(3, 5)]);
    }

    #[test]
    fn wide_mode_shows_full_widths_and_scrolls_keeping_the_first_column() {
        let c = cols();
        let full = [30, 4, 25, 60];
        let (p, l, r) = plan_wide(&c, &full, 0, 80);
        assert_eq!(widths(&p), [(0, 30), (1, 10), (2, 25), (3, 12)]);
        assert!(!l && r);
        let (p, l, r) = plan_wide(&c, &full, 2, 100);
        assert_eq!(widths(&p), [(0, 30), (3, 60)]);
        assert!(l && !r);
    }
}
