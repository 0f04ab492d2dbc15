//! The windowed table every list view uses. Rows are built once per snapshot, or, for
//! the big views (Nodes, Pending), formatted on demand from a [`Source`]: a new snapshot
//! costs the rows' ids, a frame formats only the rows on screen (once each), a sort
//! builds only its column's keys, and only a filter formats every row (it matches their
//! text). Filtering and sorting happen when the rows, the filter or the sort change,
//! never per frame, so 5,000 nodes cost what 40 do.

use std::cell::OnceCell;
use std::cmp::Ordering;
use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell as TuiCell, Row as TuiRow, Table, TableState};
use regex::Regex;

use crate::tui::format;
use crate::tui::theme::Styles;
use crate::tui::widgets::bar::bar;
use crate::tui::widgets::columns;

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

pub use crate::tui::widgets::columns::{Column, col};

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

/// Rows a view formats on demand: the table asks for every id when the data changes,
/// and for cells only for the rows it draws, sorts by or filters. Formatting a row
/// through a source must give exactly the row an eager build would have.
pub trait Source: Send + Sync {
    /// Every row's id, in the source's order (the order an unsorted table shows).
    fn ids(&self) -> Vec<String>;
    /// The rows at these positions, formatted, in the same order.
    fn rows(&self, at: &[usize]) -> Vec<Row>;
    /// Every row's cell in one column (what a sort compares), without formatting the
    /// other columns; None when the source cannot do better than formatting every row.
    fn column(&self, _column: usize) -> Option<Vec<Cell>> {
        None
    }
}

/// A shared source (cloned with the table).
#[derive(Clone)]
struct Shared(Arc<dyn Source>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Source")
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

/// A table's rows and where the operator is in them.
#[derive(Clone, Debug, Default)]
pub struct TableView {
    /// Every row's id (the selection follows it across new data).
    ids: Vec<String>,
    /// Each row once formatted: all of them for eager rows, on demand from `source`.
    rows: Vec<OnceCell<Row>>,
    source: Option<Shared>,
    /// Sort keys of one column from the source (column, one per row).
    keys: Option<(usize, Vec<Cell>)>,
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
    /// Every column at the width of its text, scrolled sideways by `hscroll` columns.
    wide: bool,
    hscroll: usize,
}

impl TableView {
    /// Replaces the rows (new data), keeping the selected row selected if it still exists.
    pub fn set_rows(&mut self, rows: Vec<Row>) {
        let keep = self.selected_id().map(str::to_string);
        self.ids = rows.iter().map(|r| r.id.clone()).collect();
        self.rows = rows.into_iter().map(OnceCell::from).collect();
        self.source = None;
        self.renew(keep);
    }

    /// Replaces the rows with ones formatted on demand (new data), keeping the selected
    /// row selected if it still exists.
    pub fn set_source(&mut self, source: Arc<dyn Source>) {
        let keep = self.selected_id().map(str::to_string);
        self.ids = source.ids();
        self.rows = (0..self.ids.len()).map(|_| OnceCell::new()).collect();
        if let Some(old) = self.source.replace(Shared(source)) {
            // Often the last holder of the previous snapshot: freed off this thread.
            crate::tui::retire::retire(old);
        }
        self.renew(keep);
    }

    fn renew(&mut self, keep: Option<String>) {
        self.keys = None;
        self.haystacks = Vec::new();
        self.recompute(keep);
    }

    pub fn set_filter(&mut self, filter: Option<Filter>) {
        let keep = self.selected_id().map(str::to_string);
        self.filter = filter;
        self.recompute(keep);
    }

    /// Formats the rows at these positions that are not formatted yet, in one call to
    /// the source (which builds what the rows share once).
    fn format(&mut self, at: impl Iterator<Item = usize>) {
        let Some(Shared(source)) = &self.source else {
            return;
        };
        let missing: Vec<usize> = at.filter(|&i| self.rows[i].get().is_none()).collect();
        if missing.is_empty() {
            return;
        }
        for (i, row) in missing.iter().zip(source.rows(&missing)) {
            let _ = self.rows[*i].set(row);
        }
    }

    /// The row at a position in the source, formatted (alone) if it was not yet.
    fn row(&self, i: usize) -> &Row {
        self.rows[i].get_or_init(|| {
            self.source
                .as_ref()
                .and_then(|Shared(s)| s.rows(&[i]).pop())
                .unwrap_or_else(|| Row::new(self.ids[i].clone(), Vec::new()))
        })
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
        let n = self.ids.len();
        if self.filter.is_some() && self.haystacks.len() != n {
            // A filter reads every row's text.
            self.format(0..n);
            self.haystacks = (0..n).map(|i| self.row(i).haystack()).collect();
        }
        self.order = (0..n)
            .filter(|&i| match &self.filter {
                Some(f) => f.keeps(&self.haystacks[i]),
                None => true,
            })
            .collect();
        if let Some((c, desc)) = self.sort {
            let formatted = self.rows.iter().all(|r| r.get().is_some());
            if !formatted && self.keys.as_ref().is_none_or(|(k, _)| *k != c) {
                let column = self.source.as_ref().and_then(|Shared(s)| s.column(c));
                match column {
                    Some(keys) if keys.len() == n => self.keys = Some((c, keys)),
                    _ => self.format(0..n),
                }
            }
            let keys = match &self.keys {
                Some((k, keys)) if *k == c && !formatted => Some(keys),
                _ => None,
            };
            let rows = &self.rows;
            let cell = |i: usize| match keys {
                Some(keys) => keys.get(i),
                None => rows[i].get().and_then(|r| r.cells.get(c)),
            };
            self.order.sort_by(|&a, &b| {
                let o = match (cell(a), cell(b)) {
                    (Some(x), Some(y)) => compare(x, y),
                    _ => Ordering::Equal,
                };
                if desc { o.reverse() } else { o }
            });
        }
        if let Some(id) = keep
            && let Some(pos) = self.order.iter().position(|&i| self.ids[i] == id)
        {
            self.selected = pos;
        }
        self.selected = self.selected.min(self.order.len().saturating_sub(1));
    }

    /// Rows shown (after the filter), in order.
    pub fn visible(&self) -> impl Iterator<Item = &Row> {
        self.order.iter().map(|&i| self.row(i))
    }

    /// The ids of the rows shown, in order (formats nothing).
    pub fn visible_ids(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(|&i| self.ids[i].as_str())
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn total(&self) -> usize {
        self.ids.len()
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.order.get(self.selected).map(|&i| self.row(i))
    }

    /// The selected row's id, without formatting it.
    pub fn selected_id(&self) -> Option<&str> {
        self.order.get(self.selected).map(|&i| self.ids[i].as_str())
    }

    pub fn select_id(&mut self, id: &str) -> bool {
        match self.order.iter().position(|&i| self.ids[i] == id) {
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

    /// Turns the wide mode on or off (ctrl-w): every column at full width, scrolled
    /// sideways, instead of columns shrunk and dropped to fit.
    pub fn toggle_wide(&mut self) -> bool {
        self.wide = !self.wide;
        self.hscroll = 0;
        self.wide
    }

    pub fn is_wide(&self) -> bool {
        self.wide
    }

    /// Scrolls a wide table sideways by whole columns (the first column stays).
    pub fn scroll_sideways(&mut self, delta: i64) {
        self.hscroll = (self.hscroll as i64 + delta).max(0) as usize;
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
        let counts = if self.order.len() == self.ids.len() {
            format!("{} ", self.ids.len())
        } else {
            format!("{}/{} ", self.order.len(), self.ids.len())
        };
        title_spans.push(Span::styled(counts, styles.muted));
        if let Some(f) = &self.filter {
            title_spans.push(Span::styled(format!("/{} ", f.text), styles.warn));
        }
        if self.wide {
            self.hscroll = self.hscroll.min(columns.len().saturating_sub(2));
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
        let inner = Block::default().borders(Borders::ALL).inner(area);
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
        let window: Vec<usize> = self
            .order
            .iter()
            .skip(self.offset)
            .take(body)
            .copied()
            .collect();
        self.format(window.into_iter());
        let (placed, more_left, more_right) = if self.wide {
            let full = self.full_widths(columns, body);
            columns::plan_wide(columns, &full, self.hscroll, inner.width)
        } else {
            (columns::plan(columns, inner.width), false, false)
        };
        let widths: Vec<Constraint> = placed.iter().map(|p| Constraint::Length(p.width)).collect();
        let rows: Vec<TuiRow> = self
            .order
            .iter()
            .skip(self.offset)
            .take(body)
            .map(|&i| {
                let row = self.row(i);
                let row_style = row.tone.style(styles);
                let cells: Vec<TuiCell> = placed
                    .iter()
                    .map(|p| match row.cells.get(p.index) {
                        None => TuiCell::from(""),
                        Some(Cell {
                            bar: Some((f, kind)),
                            ..
                        }) => {
                            let fill = match kind {
                                BarKind::Cpu => styles.bar_cpu,
                                BarKind::Memory => styles.bar_memory,
                            };
                            TuiCell::from(bar(*f, p.width, fill, styles.bar_empty))
                        }
                        Some(c) => TuiCell::from(Span::styled(
                            format::clip(&c.text, p.width as usize),
                            c.tone.style(styles),
                        )),
                    })
                    .collect();
                TuiRow::new(cells).style(row_style)
            })
            .collect();
        let header = TuiRow::new(
            placed
                .iter()
                .map(|p| TuiCell::from(format::clip(columns[p.index].title, p.width as usize))),
        )
        .style(styles.table_header);
        let table = Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .row_highlight_style(styles.selected);
        let mut state = TableState::default();
        if !self.order.is_empty() && focused {
            state.select(Some(self.selected - self.offset));
        }
        if self.wide {
            let arrows = match (more_left, more_right) {
                (true, true) => "◀ ▶",
                (true, false) => "◀",
                (false, true) => "▶",
                (false, false) => "",
            };
            title_spans.push(Span::styled(format!("wide {arrows} "), styles.accent));
        }
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(if focused { styles.title } else { styles.border })
            .title(Line::from(title_spans));
        frame.render_widget(block, area);
        frame.render_stateful_widget(table, inner, &mut state);
    }

    /// Wide mode: each column's widest text among the rows on screen and its title.
    fn full_widths(&self, columns: &[Column], body: usize) -> Vec<u16> {
        let mut full: Vec<u16> = columns
            .iter()
            .map(|c| c.title.chars().count() as u16)
            .collect();
        for &i in self.order.iter().skip(self.offset).take(body) {
            for (w, c) in full.iter_mut().zip(&self.row(i).cells) {
                if c.bar.is_none() {
                    *w = (*w).max(c.text.chars().count().min(u16::MAX as usize) as u16);
                }
            }
        }
        full
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
