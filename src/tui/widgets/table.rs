//! The windowed table every list view uses. Rows are built once per snapshot; filtering
//! and sorting happen when the rows, the filter or the sort change, never per frame; a
//! frame turns only the rows on screen into ratatui rows, so 5,000 nodes cost what 40 do.

use std::cmp::Ordering;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell as TuiCell, Row as TuiRow, Table, TableState};
use regex::Regex;

use crate::tui::theme::Styles;
use crate::tui::widgets::bar::bar;

/// How a cell or row is coloured, by theme slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tone {
    #[default]
    Normal,
    Muted,
    Ok,
    Warn,
    Bad,
    Accent,
}

impl Tone {
    pub fn style(self, s: &Styles) -> Style {
        match self {
            Tone::Normal => Style::default(),
            Tone::Muted => s.muted,
            Tone::Ok => s.ok,
            Tone::Warn => s.warn,
            Tone::Bad => s.bad,
            Tone::Accent => s.accent,
        }
    }
}

/// Which bar colour a bar cell uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BarKind {
    Cpu,
    Memory,
}

/// A column: its heading and width.
#[derive(Clone, Debug)]
pub struct Column {
    pub title: &'static str,
    pub width: Constraint,
}

pub const fn col(title: &'static str, width: Constraint) -> Column {
    Column { title, width }
}

/// What a cell sorts by: its number, or else its text (case-insensitive, compared only
/// when a sort asks, so building rows allocates nothing for it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SortKey {
    Text,
    Num(f64),
}

fn compare(a: &Cell, b: &Cell) -> Ordering {
    match (a.sort, b.sort) {
        (SortKey::Num(x), SortKey::Num(y)) => x.total_cmp(&y),
        (SortKey::Num(_), SortKey::Text) => Ordering::Less,
        (SortKey::Text, SortKey::Num(_)) => Ordering::Greater,
        (SortKey::Text, SortKey::Text) => a
            .text
            .chars()
            .flat_map(char::to_lowercase)
            .cmp(b.text.chars().flat_map(char::to_lowercase)),
    }
}

/// One cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
    pub bar: Option<(f64, BarKind)>,
    pub sort: SortKey,
}

impl Cell {
    pub fn text(text: impl Into<String>) -> Cell {
        Cell {
            sort: SortKey::Text,
            text: text.into(),
            tone: Tone::Normal,
            bar: None,
        }
    }

    /// Text that sorts by a number (ages, prices, counts).
    pub fn num(text: impl Into<String>, value: f64) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Normal,
            bar: None,
            sort: SortKey::Num(value),
        }
    }

    /// A request bar for `fraction`; `text` is what the filter matches ("3.5/8").
    pub fn bar(text: impl Into<String>, fraction: f64, kind: BarKind) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Normal,
            bar: Some((fraction, kind)),
            sort: SortKey::Num(fraction),
        }
    }

    /// A request bar of `used` out of `total`, reading "used/total" in `fmt`'s units.
    pub fn usage(used: i64, total: i64, fmt: fn(i64) -> String, kind: BarKind) -> Cell {
        Cell::bar(
            format!("{}/{}", fmt(used), fmt(total)),
            used as f64 / total.max(1) as f64,
            kind,
        )
    }

    pub fn tone(mut self, tone: Tone) -> Cell {
        self.tone = tone;
        self
    }
}

/// One row: a stable id (selection survives updates) and its cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub id: String,
    pub cells: Vec<Cell>,
    pub tone: Tone,
}

impl Row {
    pub fn new(id: impl Into<String>, cells: Vec<Cell>) -> Row {
        Row {
            id: id.into(),
            cells,
            tone: Tone::Normal,
        }
    }

    pub fn tone(mut self, tone: Tone) -> Row {
        self.tone = tone;
        self
    }

    fn haystack(&self) -> String {
        let mut s = String::new();
        for c in &self.cells {
            s.push_str(&c.text);
            s.push(' ');
        }
        s
    }
}

/// A filter: a regular expression over a row's text, maybe inverted.
#[derive(Clone, Debug)]
pub struct Filter {
    pub text: String,
    regex: Regex,
    invert: bool,
}

impl Filter {
    /// `!expr` keeps the rows that do not match. Case-insensitive unless the expression
    /// has an upper-case letter (smart case, as in k9s and ripgrep).
    pub fn parse(text: &str) -> Result<Filter, String> {
        let (invert, expr) = match text.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let insensitive = !expr.chars().any(char::is_uppercase);
        let regex = regex::RegexBuilder::new(expr)
            .case_insensitive(insensitive)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("filter {expr:?}: {}", first_line(&e.to_string())))?;
        Ok(Filter {
            text: text.to_string(),
            regex,
            invert,
        })
    }

    fn keeps(&self, haystack: &str) -> bool {
        self.regex.is_match(haystack) != self.invert
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .to_string()
}

/// How many leading columns fit in `width` cells at their minimum widths (at least one).
fn fitting(columns: &[Column], width: u16) -> usize {
    let mut used = 0u32;
    for (i, c) in columns.iter().enumerate() {
        let w = match c.width {
            Constraint::Length(n) | Constraint::Min(n) => n as u32,
            _ => 1,
        };
        used += w + if i > 0 { 1 } else { 0 };
        if used > width as u32 {
            return i.max(1);
        }
    }
    columns.len()
}

/// A table's rows and where the operator is in them.
#[derive(Clone, Debug, Default)]
pub struct TableView {
    rows: Vec<Row>,
    haystacks: Vec<String>,
    /// Indices of the rows shown, in display order.
    order: Vec<usize>,
    selected: usize,
    offset: usize,
    /// Column and descending.
    sort: Option<(usize, bool)>,
    filter: Option<Filter>,
    /// Rows on screen at the last draw (for paging).
    page: usize,
    /// Where the rows (under the header) were drawn at the last draw, for the mouse.
    rows_area: Rect,
}

impl TableView {
    /// Replaces the rows (new data), keeping the selected row selected if it still exists.
    pub fn set_rows(&mut self, rows: Vec<Row>) {
        let keep = self.selected_row().map(|r| r.id.clone());
        self.haystacks = if self.filter.is_some() {
            rows.iter().map(Row::haystack).collect()
        } else {
            Vec::new()
        };
        self.rows = rows;
        self.recompute(keep);
    }

    pub fn set_filter(&mut self, filter: Option<Filter>) {
        let keep = self.selected_row().map(|r| r.id.clone());
        if filter.is_some() && self.haystacks.len() != self.rows.len() {
            self.haystacks = self.rows.iter().map(Row::haystack).collect();
        }
        self.filter = filter;
        self.recompute(keep);
    }

    pub fn filter(&self) -> Option<&Filter> {
        self.filter.as_ref()
    }

    /// Sorts by the next column (none -> first -> ... -> last -> none).
    pub fn cycle_sort(&mut self, columns: usize) {
        let keep = self.selected_row().map(|r| r.id.clone());
        self.sort = match self.sort {
            None if columns > 0 => Some((0, false)),
            Some((c, d)) if c + 1 < columns => Some((c + 1, d)),
            _ => None,
        };
        self.recompute(keep);
    }

    pub fn reverse_sort(&mut self) {
        let keep = self.selected_row().map(|r| r.id.clone());
        self.sort = Some(match self.sort {
            None => (0, true),
            Some((c, d)) => (c, !d),
        });
        self.recompute(keep);
    }

    pub fn sort(&self) -> Option<(usize, bool)> {
        self.sort
    }

    fn recompute(&mut self, keep: Option<String>) {
        self.order = (0..self.rows.len())
            .filter(|&i| match &self.filter {
                Some(f) => f.keeps(&self.haystacks[i]),
                None => true,
            })
            .collect();
        if let Some((c, desc)) = self.sort {
            let rows = &self.rows;
            self.order.sort_by(|&a, &b| {
                let o = match (rows[a].cells.get(c), rows[b].cells.get(c)) {
                    (Some(x), Some(y)) => compare(x, y),
                    _ => Ordering::Equal,
                };
                if desc { o.reverse() } else { o }
            });
        }
        if let Some(id) = keep
            && let Some(pos) = self.order.iter().position(|&i| self.rows[i].id == id)
        {
            self.selected = pos;
        }
        self.selected = self.selected.min(self.order.len().saturating_sub(1));
    }

    /// Rows shown (after the filter), in order.
    pub fn visible(&self) -> impl Iterator<Item = &Row> {
        self.order.iter().map(|&i| &self.rows[i])
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn total(&self) -> usize {
        self.rows.len()
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.order.get(self.selected).map(|&i| &self.rows[i])
    }

    pub fn select_id(&mut self, id: &str) -> bool {
        match self.order.iter().position(|&i| self.rows[i].id == id) {
            Some(p) => {
                self.selected = p;
                true
            }
            None => false,
        }
    }

    pub fn move_by(&mut self, delta: i64) {
        if self.order.is_empty() {
            return;
        }
        let last = self.order.len() as i64 - 1;
        self.selected = (self.selected as i64 + delta).clamp(0, last) as usize;
    }

    pub fn page(&self) -> i64 {
        self.page.max(1) as i64
    }

    pub fn top(&mut self) {
        self.selected = 0;
    }

    pub fn bottom(&mut self) {
        self.selected = self.order.len().saturating_sub(1);
    }

    /// Draws the rows on screen inside a bordered block titled with the counts, the
    /// filter and the sort.
    pub fn render(
        &mut self,
        frame: &mut Frame,
        area: Rect,
        title: &str,
        columns: &[Column],
        styles: &Styles,
        focused: bool,
    ) {
        let mut title_spans = vec![Span::styled(format!(" {title} "), styles.title)];
        let counts = if self.order.len() == self.rows.len() {
            format!("{} ", self.rows.len())
        } else {
            format!("{}/{} ", self.order.len(), self.rows.len())
        };
        title_spans.push(Span::styled(counts, styles.muted));
        if let Some(f) = &self.filter {
            title_spans.push(Span::styled(format!("/{} ", f.text), styles.warn));
        }
        if let Some((c, desc)) = self.sort
            && let Some(column) = columns.get(c)
        {
            let arrow = if desc { "↓" } else { "↑" };
            title_spans.push(Span::styled(
                format!("sort:{}{arrow} ", column.title),
                styles.accent,
            ));
        }
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(if focused { styles.title } else { styles.border })
            .title(Line::from(title_spans));
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let body = inner.height.saturating_sub(1) as usize;
        self.page = body;
        self.rows_area = Rect {
            y: inner.y.saturating_add(1),
            height: inner.height.saturating_sub(1),
            ..inner
        };
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if body > 0 && self.selected >= self.offset + body {
            self.offset = self.selected + 1 - body;
        }
        self.offset = self
            .offset
            .min(self.order.len().saturating_sub(body.max(1)));
        // Narrow terminals: drop columns from the right (views order them by importance)
        // rather than squeezing every column until none is readable.
        let columns = &columns[..fitting(columns, inner.width)];
        let widths: Vec<Constraint> = columns.iter().map(|c| c.width).collect();
        // Bars need their column's width; solve the layout the way Table does.
        let col_widths: Vec<u16> = ratatui::layout::Layout::horizontal(widths.clone())
            .spacing(1)
            .split(inner)
            .iter()
            .map(|r| r.width)
            .collect();
        let rows: Vec<TuiRow> = self
            .order
            .iter()
            .skip(self.offset)
            .take(body)
            .map(|&i| {
                let row = &self.rows[i];
                let row_style = row.tone.style(styles);
                let cells: Vec<TuiCell> = row
                    .cells
                    .iter()
                    .take(columns.len())
                    .enumerate()
                    .map(|(ci, c)| match c.bar {
                        Some((f, kind)) => {
                            let fill = match kind {
                                BarKind::Cpu => styles.bar_cpu,
                                BarKind::Memory => styles.bar_memory,
                            };
                            TuiCell::from(bar(
                                f,
                                col_widths.get(ci).copied().unwrap_or(10),
                                fill,
                                styles.bar_empty,
                            ))
                        }
                        None => TuiCell::from(Span::styled(c.text.as_str(), c.tone.style(styles))),
                    })
                    .collect();
                TuiRow::new(cells).style(row_style)
            })
            .collect();
        let header =
            TuiRow::new(columns.iter().map(|c| TuiCell::from(c.title))).style(styles.table_header);
        let table = Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .row_highlight_style(styles.selected);
        let mut state = TableState::default();
        if !self.order.is_empty() && focused {
            state.select(Some(self.selected - self.offset));
        }
        frame.render_stateful_widget(table, inner, &mut state);
    }
}

/// The mouse: which row a click lands on, as of the last draw.
impl TableView {
    /// The position (in display order) of the row drawn at column `x`, line `y`.
    pub fn row_at(&self, x: u16, y: u16) -> Option<usize> {
        let a = self.rows_area;
        if x < a.x || x >= a.x + a.width || y < a.y || y >= a.y + a.height {
            return None;
        }
        let i = self.offset + (y - a.y) as usize;
        (i < self.order.len()).then_some(i)
    }

    /// The selected row's position in display order.
    pub fn selected_index(&self) -> usize {
        self.selected
    }

    /// Selects the row at a position in display order (clamped to the rows shown).
    pub fn select_index(&mut self, i: usize) {
        self.selected = i.min(self.order.len().saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        ["beta 3", "alpha 10", "gamma 2"]
            .iter()
            .map(|t| {
                let (name, n) = t.split_once(' ').unwrap();
                Row::new(
                    name,
                    vec![Cell::text(name), Cell::num(n, n.parse().unwrap())],
                )
            })
            .collect()
    }

    fn ids(t: &TableView) -> Vec<&str> {
        t.visible().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn sorting_by_text_then_number_then_reversed() {
        let mut t = TableView::default();
        t.set_rows(rows());
        assert_eq!(ids(&t), ["beta", "alpha", "gamma"]);
        t.cycle_sort(2);
        assert_eq!(ids(&t), ["alpha", "beta", "gamma"]);
        t.cycle_sort(2);
        assert_eq!(ids(&t), ["gamma", "beta", "alpha"]);
        t.reverse_sort();
        assert_eq!(ids(&t), ["alpha", "beta", "gamma"]);
        t.cycle_sort(2);
        assert_eq!(t.sort(), None);
    }

    #[test]
    fn filters_are_regexes_and_bang_inverts() {
        let mut t = TableView::default();
        t.set_rows(rows());
        t.set_filter(Some(Filter::parse("^(al|ga)").unwrap()));
        assert_eq!(ids(&t), ["alpha", "gamma"]);
        t.set_filter(Some(Filter::parse("!alpha").unwrap()));
        assert_eq!(ids(&t), ["beta", "gamma"]);
        assert!(Filter::parse("(").unwrap_err().starts_with("filter \"(\":"));
        // New data keeps the filter.
        t.set_rows(rows());
        assert_eq!(ids(&t), ["beta", "gamma"]);
    }

    #[test]
    fn narrow_tables_drop_trailing_columns() {
        let cols = [
            col("A", Constraint::Length(5)),
            col("B", Constraint::Length(10)),
            col("C", Constraint::Min(10)),
        ];
        assert_eq!(fitting(&cols, 100), 3);
        assert_eq!(fitting(&cols, 27), 3);
        assert_eq!(fitting(&cols, 26), 2);
        assert_eq!(fitting(&cols, 3), 1);
    }

    #[test]
    fn selection_follows_the_row_through_updates() {
        let mut t = TableView::default();
        t.set_rows(rows());
        t.move_by(1);
        assert_eq!(t.selected_row().unwrap().id, "alpha");
        t.cycle_sort(2);
        assert_eq!(t.selected_row().unwrap().id, "alpha");
        let mut fewer = rows();
        fewer.remove(0);
        t.set_rows(fewer);
        assert_eq!(t.selected_row().unwrap().id, "alpha");
        t.move_by(100);
        assert_eq!(t.selected_row().unwrap().id, "gamma");
    }
}
