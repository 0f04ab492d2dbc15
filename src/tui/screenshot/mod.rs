//! Screenshots of the console: a ratatui [`Buffer`] rendered as SVG and as PNG.
//!
//! A frame is drawn on a grid of fixed-size cells, so the picture matches the terminal
//! column for column: every glyph is placed at its cell's x position (never left to the
//! font's advance, which would drift), box-drawing and block characters are geometry that
//! meets exactly at cell edges, Braille patterns (which the font lacks) are dots (see
//! `boxes.rs`), and wide characters take two cells. The PNG is rendered with resvg against
//! fonts embedded in the binary (DejaVu Sans Mono, regular and bold), so a screenshot looks
//! the same on any machine, with or without system fonts.

mod boxes;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::{Arc, OnceLock};

use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::style::{Color, Modifier};
use resvg::usvg::fontdb;
use resvg::{tiny_skia, usvg};

use self::boxes::{Num, Pen};

/// Width of one terminal cell in SVG user units (pixels at scale 1): DejaVu Sans Mono's
/// advance at [`FONT_SIZE`] is 9.03 px, so glyphs fill their cells without overlapping.
pub const CELL_WIDTH: u32 = 9;
/// Height of one terminal cell: the font's ascent plus descent at [`FONT_SIZE`] (17.4 px),
/// rounded up so rows don't touch.
pub const CELL_HEIGHT: u32 = 18;
/// Font size of the text, in pixels.
pub const FONT_SIZE: u32 = 15;
/// The text's baseline, from the top of its cell (the font's ascent at [`FONT_SIZE`]).
const BASELINE: u32 = 14;
/// The SVG's font-family: the embedded font first, so other SVG viewers use it if
/// installed and a monospace font otherwise.
pub const FONT_FAMILY: &str = "DejaVu Sans Mono, monospace";

/// The embedded fonts: the PNG must not depend on what the machine has installed.
static FONT_REGULAR: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSansMono.ttf");
static FONT_BOLD: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSansMono-Bold.ttf");

/// Colours for `Color::Reset` when the caller's defaults are themselves `Reset` (a theme
/// that leaves the terminal's colours alone): xterm's default grey on black.
const FALLBACK_FG: [u8; 3] = [229, 229, 229];
const FALLBACK_BG: [u8; 3] = [0, 0, 0];

/// xterm's colours for the 16 named colours, in ANSI order (Black..Gray, DarkGray..White).
const NAMED: [[u8; 3]; 16] = [
    [0, 0, 0],
    [205, 0, 0],
    [0, 205, 0],
    [205, 205, 0],
    [0, 0, 238],
    [205, 0, 205],
    [0, 205, 205],
    [229, 229, 229],
    [127, 127, 127],
    [255, 0, 0],
    [0, 255, 0],
    [255, 255, 0],
    [92, 92, 255],
    [255, 0, 255],
    [0, 255, 255],
    [255, 255, 255],
];

/// Why a screenshot could not be rendered to PNG.
#[derive(Debug, thiserror::Error)]
pub enum ScreenshotError {
    /// The SVG was not valid (or had no size, as for an empty buffer).
    #[error("could not parse the screenshot SVG: {0}")]
    Svg(#[from] usvg::Error),
    /// The image size was zero (empty SVG, or a scale that is not positive) or too large.
    #[error("could not allocate a {width}x{height} pixel image for the screenshot")]
    Pixmap { width: u32, height: u32 },
    /// The PNG encoder failed.
    #[error("could not encode the screenshot as PNG: {0}")]
    Png(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The RGB value of a ratatui colour: named colours through xterm's palette, indexed ones
/// through the xterm 256-colour table; `None` for `Reset` (the caller's default).
fn rgb(color: Color) -> Option<[u8; 3]> {
    let named = |i: usize| Some(NAMED[i]);
    match color {
        Color::Reset => None,
        Color::Black => named(0),
        Color::Red => named(1),
        Color::Green => named(2),
        Color::Yellow => named(3),
        Color::Blue => named(4),
        Color::Magenta => named(5),
        Color::Cyan => named(6),
        Color::Gray => named(7),
        Color::DarkGray => named(8),
        Color::LightRed => named(9),
        Color::LightGreen => named(10),
        Color::LightYellow => named(11),
        Color::LightBlue => named(12),
        Color::LightMagenta => named(13),
        Color::LightCyan => named(14),
        Color::White => named(15),
        Color::Rgb(r, g, b) => Some([r, g, b]),
        Color::Indexed(n @ 0..=15) => named(usize::from(n)),
        Color::Indexed(n @ 16..=231) => {
            let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * v };
            let i = n - 16;
            Some([level(i / 36), level(i / 6 % 6), level(i % 6)])
        }
        Color::Indexed(n) => Some([8 + 10 * (n - 232); 3]),
    }
}

/// `#rrggbb`.
struct Hex([u8; 3]);

impl fmt::Display for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [r, g, b] = self.0;
        write!(f, "#{r:02x}{g:02x}{b:02x}")
    }
}

/// What a glyph looks like; cells with equal ink share one `<text>` element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ink {
    fg: [u8; 3],
    bold: bool,
    italic: bool,
    underline: bool,
    crossed: bool,
    dim: bool,
}

/// One column of a row, after wide characters have claimed the columns they cover.
#[derive(Clone, Copy)]
struct Slot<'a> {
    /// `None` for a column covered by the wide character before it, a cell the terminal
    /// leaves alone (`CellDiffOption::Skip`) or hidden text.
    symbol: Option<&'a str>,
    bg: [u8; 3],
    ink: Ink,
}

impl<'a> Slot<'a> {
    fn of(cell: &'a Cell, fg0: [u8; 3], bg0: [u8; 3]) -> Self {
        let m = cell.modifier;
        let (mut fg, mut bg) = (rgb(cell.fg).unwrap_or(fg0), rgb(cell.bg).unwrap_or(bg0));
        if m.contains(Modifier::REVERSED) {
            (fg, bg) = (bg, fg);
        }
        let hidden = m.contains(Modifier::HIDDEN) || cell.diff_option == CellDiffOption::Skip;
        Slot {
            symbol: (!hidden).then(|| cell.symbol()),
            bg,
            ink: Ink {
                fg,
                bold: m.contains(Modifier::BOLD),
                italic: m.contains(Modifier::ITALIC),
                underline: m.contains(Modifier::UNDERLINED),
                crossed: m.contains(Modifier::CROSSED_OUT),
                dim: m.contains(Modifier::DIM),
            },
        }
    }
}

/// The columns of one row. A wide character's symbol sits in its first column and the
/// columns it covers get its background (as a terminal paints them) and no symbol.
fn row_slots(buffer: &Buffer, row: usize, fg0: [u8; 3], bg0: [u8; 3]) -> Vec<Slot<'_>> {
    let cols = usize::from(buffer.area.width);
    let cells = &buffer.content[row * cols..(row + 1) * cols];
    let mut slots = Vec::with_capacity(cols);
    while slots.len() < cols {
        let cell = &cells[slots.len()];
        let slot = Slot::of(cell, fg0, bg0);
        slots.push(slot);
        let covered = usize::from(cell.cell_width())
            .saturating_sub(1)
            .min(cols - slots.len());
        slots.extend(std::iter::repeat_n(
            Slot {
                symbol: None,
                ..slot
            },
            covered,
        ));
    }
    slots
}

/// Characters that draw nothing (and control characters, which XML cannot carry).
fn invisible(c: char) -> bool {
    c.is_whitespace() || c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}'
}

/// A `<text>` element in the making: glyphs of one ink, each with its own x.
struct Run {
    ink: Ink,
    xs: String,
    text: String,
}

impl Run {
    /// Adds a symbol at `x`. Only its first character gets a position: in SVG every
    /// positioned character starts a new text chunk, which would split a grapheme cluster.
    fn push(&mut self, x: u32, symbol: &str) {
        let sep = if self.xs.is_empty() { "" } else { " " };
        let _ = write!(self.xs, "{sep}{x}");
        for c in symbol.chars() {
            match c {
                '&' => self.text.push_str("&amp;"),
                '<' => self.text.push_str("&lt;"),
                '>' => self.text.push_str("&gt;"),
                '"' => self.text.push_str("&quot;"),
                '\'' => self.text.push_str("&apos;"),
                c if invisible(c) => self.text.push(' '),
                c => self.text.push(c),
            }
        }
    }

    fn write(self, out: &mut String, row: usize) {
        let Ink {
            fg,
            bold,
            italic,
            underline,
            crossed,
            dim,
        } = self.ink;
        let y = row as u32 * CELL_HEIGHT + BASELINE;
        let _ = write!(out, r#"<text x="{}" y="{y}" fill="{}""#, self.xs, Hex(fg));
        if bold {
            out.push_str(r#" font-weight="bold""#);
        }
        if italic {
            out.push_str(r#" font-style="italic""#);
        }
        match (underline, crossed) {
            (true, true) => out.push_str(r#" text-decoration="underline line-through""#),
            (true, false) => out.push_str(r#" text-decoration="underline""#),
            (false, true) => out.push_str(r#" text-decoration="line-through""#),
            (false, false) => {}
        }
        if dim {
            out.push_str(r#" opacity="0.6""#);
        }
        let _ = writeln!(out, r#" xml:space="preserve">{}</text>"#, self.text);
    }
}

/// Writes out the open run, if any.
fn close(run: &mut Option<Run>, out: &mut String, row: usize) {
    if let Some(r) = run.take() {
        r.write(out, row);
    }
}

/// Renders `buffer` as an SVG document, one [`CELL_WIDTH`]×[`CELL_HEIGHT`] cell per
/// terminal cell. `default_fg`/`default_bg` stand in for `Color::Reset` (pass the theme's
/// base colours, so the screenshot looks like the terminal it was taken in). The SVG is
/// meant to be saved as is (it scales without blurring) or handed to [`to_png`].
pub fn to_svg(buffer: &Buffer, default_fg: Color, default_bg: Color) -> String {
    let fg0 = rgb(default_fg).unwrap_or(FALLBACK_FG);
    let bg0 = rgb(default_bg).unwrap_or(FALLBACK_BG);
    let rows: Vec<Vec<Slot<'_>>> = (0..usize::from(buffer.area.height))
        .map(|row| row_slots(buffer, row, fg0, bg0))
        .collect();
    let width = u32::from(buffer.area.width) * CELL_WIDTH;
    let height = u32::from(buffer.area.height) * CELL_HEIGHT;

    let mut svg = String::with_capacity(rows.len() * usize::from(buffer.area.width) * 12 + 512);
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{width}" height="{height}" fill="{}"/>"#,
        Hex(bg0)
    );

    // Backgrounds that differ from the default, one rect per horizontal run.
    svg.push_str("<g shape-rendering=\"crispEdges\">\n");
    for (row, slots) in rows.iter().enumerate() {
        let mut col = 0;
        while col < slots.len() {
            let bg = slots[col].bg;
            let run = slots[col..].iter().take_while(|s| s.bg == bg).count();
            if bg != bg0 {
                let (x, y, w) = (
                    col as u32 * CELL_WIDTH,
                    row as u32 * CELL_HEIGHT,
                    run as u32 * CELL_WIDTH,
                );
                let _ = writeln!(
                    svg,
                    r#"<rect x="{x}" y="{y}" width="{w}" height="{CELL_HEIGHT}" fill="{}"/>"#,
                    Hex(bg)
                );
            }
            col += run;
        }
    }
    svg.push_str("</g>\n");

    // Box and block characters as geometry, merged into one path per colour and pen;
    // everything else as text runs.
    let mut shapes: BTreeMap<([u8; 3], Pen, bool), String> = BTreeMap::new();
    let mut texts = String::new();
    for (row, slots) in rows.iter().enumerate() {
        let mut run: Option<Run> = None;
        // Blank columns after the open run: they join it if the run goes on.
        let mut blanks: Vec<u32> = Vec::new();
        for (col, slot) in slots.iter().enumerate() {
            let Some(symbol) = slot.symbol else { continue };
            let (x, y) = (col as u32 * CELL_WIDTH, row as u32 * CELL_HEIGHT);
            let mut chars = symbol.chars();
            if let (Some(ch), None) = (chars.next(), chars.next())
                && boxes::is_geometry(ch)
            {
                for (pen, d) in boxes::draw(ch, x as f32, y as f32).unwrap_or_default() {
                    shapes
                        .entry((slot.ink.fg, pen, slot.ink.dim))
                        .or_default()
                        .push_str(&d);
                }
                close(&mut run, &mut texts, row);
                blanks.clear();
                continue;
            }
            if symbol.chars().all(invisible) && !slot.ink.underline && !slot.ink.crossed {
                if run.is_some() {
                    blanks.push(x);
                }
                continue;
            }
            if run.as_ref().is_none_or(|r| r.ink != slot.ink) {
                close(&mut run, &mut texts, row);
                blanks.clear();
                run = Some(Run {
                    ink: slot.ink,
                    xs: String::new(),
                    text: String::new(),
                });
            }
            let r = run.as_mut().expect("a run was just opened");
            blanks.drain(..).for_each(|bx| r.push(bx, " "));
            r.push(x, symbol);
            if symbol.chars().nth(1).is_some() {
                // Its later characters are unpositioned: nothing may follow them.
                close(&mut run, &mut texts, row);
            }
        }
        close(&mut run, &mut texts, row);
    }

    for ((fg, pen, dim), d) in shapes {
        let dim = if dim { 0.6 } else { 1.0 };
        match pen {
            Pen::Stroke(w) => {
                let _ = write!(
                    svg,
                    r#"<path d="{d}" fill="none" stroke="{}" stroke-width="{}""#,
                    Hex(fg),
                    Num(f32::from(w) / 10.0)
                );
                if dim < 1.0 {
                    let _ = write!(svg, r#" stroke-opacity="{}""#, Num(dim));
                }
            }
            Pen::Fill(alpha) => {
                let _ = write!(svg, r#"<path d="{d}" fill="{}""#, Hex(fg));
                let opacity = f32::from(alpha) / 100.0 * dim;
                if opacity < 1.0 {
                    let _ = write!(svg, r#" fill-opacity="{}""#, Num(opacity));
                }
            }
        }
        svg.push_str("/>\n");
    }
    let _ = writeln!(
        svg,
        r#"<g font-family="{FONT_FAMILY}" font-size="{FONT_SIZE}">"#
    );
    svg.push_str(&texts);
    svg.push_str("</g>\n</svg>\n");
    svg
}

/// The font database for rendering: only the embedded fonts, with DejaVu Sans Mono as
/// every generic family, so no text falls back to a font the machine happens to have.
/// Built once: parsing the fonts on every screenshot would be wasted work.
fn fonts() -> Arc<fontdb::Database> {
    static FONTS: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = fontdb::Database::new();
            for font in [FONT_REGULAR, FONT_BOLD] {
                db.load_font_source(fontdb::Source::Binary(Arc::new(font)));
            }
            db.set_monospace_family("DejaVu Sans Mono");
            db.set_sans_serif_family("DejaVu Sans Mono");
            db.set_serif_family("DejaVu Sans Mono");
            Arc::new(db)
        })
        .clone()
}

/// Renders an SVG from [`to_svg`] to PNG bytes at `scale` (1.0: one pixel per SVG unit;
/// 2.0 for high-DPI screens), using only the embedded fonts so the result is the same on
/// every machine.
pub fn to_png(svg: &str, scale: f32) -> Result<Vec<u8>, ScreenshotError> {
    let options = usvg::Options {
        fontdb: fonts(),
        font_family: "DejaVu Sans Mono".to_owned(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &options)?;
    let size = tree.size();
    // `as` saturates: a NaN or negative scale gives 0 and fails the allocation below.
    let (width, height) = (
        (size.width() * scale).round() as u32,
        (size.height() * scale).round() as u32,
    );
    let mut pixmap =
        tiny_skia::Pixmap::new(width, height).ok_or(ScreenshotError::Pixmap { width, height })?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| ScreenshotError::Png(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use ratatui::layout::Rect;
    use ratatui::style::Style;
    use ratatui::widgets::{Block, Widget};

    use super::*;

    /// A 20×5 frame: a bordered block titled "Pods", styled text and one red cell.
    fn frame() -> Buffer {
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 5));
        Block::bordered().title("Pods").render(buf.area, &mut buf);
        buf.set_string(1, 1, "a<b & \"c\"", Style::new().green().bold());
        buf.set_string(
            1,
            2,
            "x y",
            Style::new().fg(Color::Indexed(208)).italic().dim(),
        );
        buf[(2, 3)].set_bg(Color::Red);
        buf
    }

    /// The stroked paths' straight segments as (x1, y1, x2, y2).
    fn segments(svg: &str) -> Vec<(f32, f32, f32, f32)> {
        let mut out = Vec::new();
        for element in svg
            .split("<path d=\"")
            .skip(1)
            .filter(|e| e.contains("stroke="))
        {
            let d = &element[..element.find('"').unwrap()];
            let mut cur = (0.0, 0.0);
            let mut rest = d;
            while let Some(c) = rest.chars().next() {
                let end = rest[1..]
                    .find(|c: char| c.is_ascii_alphabetic())
                    .map_or(rest.len(), |i| i + 1);
                let n: Vec<f32> = rest[1..end]
                    .split(' ')
                    .map(|n| n.parse().unwrap())
                    .collect();
                let next = match c {
                    'M' | 'L' => (n[0], n[1]),
                    'H' => (n[0], cur.1),
                    'V' => (cur.0, n[0]),
                    'Q' => (n[2], n[3]),
                    other => panic!("unexpected {other} in {d}"),
                };
                if c != 'M' {
                    out.push((cur.0, cur.1, next.0, next.1));
                }
                cur = next;
                rest = &rest[end..];
            }
        }
        out
    }

    #[test]
    fn svg_parses_with_the_grid_size() {
        let svg = to_svg(&frame(), Color::Reset, Color::Reset);
        let options = usvg::Options {
            fontdb: fonts(),
            ..usvg::Options::default()
        };
        let tree = usvg::Tree::from_str(&svg, &options).expect("valid SVG");
        assert_eq!((tree.size().width(), tree.size().height()), (180.0, 90.0));
    }

    #[test]
    fn box_drawing_is_geometry_not_glyphs() {
        let svg = to_svg(&frame(), Color::Reset, Color::Reset);
        for ch in ['─', '│', '┌', '┐', '└', '┘'] {
            assert!(!svg.contains(ch), "{ch} drawn as a glyph");
        }
        assert!(
            svg.contains(r##"stroke="#e5e5e5" stroke-width="1.2""##),
            "{svg}"
        );
    }

    #[test]
    fn adjacent_border_cells_touch() {
        let segs = segments(&to_svg(&frame(), Color::Reset, Color::Reset));
        let (bottom, left) = (4.0 * 18.0 + 9.5, 4.5);
        // Every ─ of the bottom border spans its cell from edge to edge.
        for col in 1..19 {
            let x = col as f32 * 9.0;
            assert!(
                segs.contains(&(x, bottom, x + 9.0, bottom)),
                "─ at column {col}: {segs:?}"
            );
        }
        // Every │ of the left border spans its cell from top to bottom.
        for row in 1..4 {
            let y = row as f32 * 18.0;
            assert!(
                segs.contains(&(left, y, left, y + 18.0)),
                "│ at row {row}: {segs:?}"
            );
        }
        // └ reaches the right edge and the top edge of its cell, and closes its corner.
        let corner: Vec<_> = segs.iter().filter(|s| s.0 < 9.0 && s.1 >= 72.0).collect();
        assert!(
            corner
                .iter()
                .any(|s| s.1 == bottom && s.3 == bottom && s.0 < left && s.2 == 9.0),
            "{corner:?}"
        );
        assert!(
            corner
                .iter()
                .any(|s| s.0 == left && s.1 == 72.0 && s.3 > bottom),
            "{corner:?}"
        );
    }

    #[test]
    fn text_runs_are_escaped_positioned_and_styled() {
        let svg = to_svg(&frame(), Color::Reset, Color::Reset);
        let run = r##"<text x="9 18 27 36 45 54 63 72 81" y="32" fill="#00cd00" font-weight="bold" xml:space="preserve">a&lt;b &amp; &quot;c&quot;</text>"##;
        assert!(svg.contains(run), "{svg}");
        let run = r##"<text x="9 18 27" y="50" fill="#ff8700" font-style="italic" opacity="0.6" xml:space="preserve">x y</text>"##;
        assert!(svg.contains(run), "{svg}");
        assert!(svg.contains(r#"xml:space="preserve">Pods</text>"#), "{svg}");
        assert!(svg.contains(r#"font-family="DejaVu Sans Mono, monospace" font-size="15""#));
    }

    #[test]
    fn wide_characters_and_clusters_keep_columns_aligned() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 8, 1));
        buf.set_string(0, 0, "日本x", Style::new().on_blue());
        buf.set_string(5, 0, "ae\u{301}b", Style::new());
        let svg = to_svg(&buf, Color::White, Color::Black);
        // A wide character takes two columns: the next glyph is placed after both. A
        // combining sequence takes one column and ends its run (only its first character
        // is positioned), so the glyph after it starts a new run at its own column.
        let text = "<text x=\"0 18 36 45 54\" y=\"14\" fill=\"#ffffff\" xml:space=\"preserve\">\
                    日本xae\u{301}</text>\n\
                    <text x=\"63\" y=\"14\" fill=\"#ffffff\" xml:space=\"preserve\">b</text>";
        assert!(svg.contains(text), "{svg}");
        // The columns a wide character covers take its background: one rect, not three.
        let rect = r##"<rect x="0" y="0" width="45" height="18" fill="#0000ee"/>"##;
        assert!(svg.contains(rect), "{svg}");
    }

    #[test]
    fn colours_follow_the_xterm_palette_and_modifiers() {
        assert_eq!(rgb(Color::Reset), None);
        assert_eq!(rgb(Color::Red), Some([205, 0, 0]));
        assert_eq!(rgb(Color::DarkGray), Some([127, 127, 127]));
        assert_eq!(rgb(Color::LightBlue), Some([92, 92, 255]));
        assert_eq!(rgb(Color::Indexed(9)), Some([255, 0, 0]));
        assert_eq!(rgb(Color::Indexed(16)), Some([0, 0, 0]));
        assert_eq!(rgb(Color::Indexed(110)), Some([135, 175, 215]));
        assert_eq!(rgb(Color::Indexed(231)), Some([255, 255, 255]));
        assert_eq!(rgb(Color::Indexed(244)), Some([128, 128, 128]));
        assert_eq!(rgb(Color::Rgb(1, 2, 3)), Some([1, 2, 3]));

        let mut buf = Buffer::empty(Rect::new(0, 0, 3, 1));
        buf.set_string(0, 0, "R", Style::new().red().reversed().underlined());
        buf.set_string(1, 0, "▌", Style::new().yellow().dim());
        let svg = to_svg(&buf, Color::Gray, Color::Black);
        assert!(
            svg.contains(r##"<rect x="0" y="0" width="9" height="18" fill="#cd0000"/>"##),
            "{svg}"
        );
        assert!(
            svg.contains(r##"fill="#000000" text-decoration="underline" xml:space="preserve">R<"##),
            "{svg}"
        );
        assert!(
            svg.contains(r##"<path d="M9 0H13.5V18H9Z" fill="#cdcd00" fill-opacity="0.6"/>"##),
            "{svg}"
        );
    }

    #[test]
    fn png_has_the_grid_size_and_paints_backgrounds_and_borders() {
        let svg = to_svg(&frame(), Color::Reset, Color::Reset);
        for scale in [1u32, 2] {
            let png = to_png(&svg, scale as f32).expect("PNG");
            let pixmap = tiny_skia::Pixmap::decode_png(&png).expect("decodable PNG");
            assert_eq!(
                (pixmap.width(), pixmap.height()),
                (20 * CELL_WIDTH * scale, 5 * CELL_HEIGHT * scale)
            );
            let at = |col: u32, row: u32, dx: u32, dy: u32| {
                let p = pixmap
                    .pixel(
                        (col * CELL_WIDTH + dx) * scale,
                        (row * CELL_HEIGHT + dy) * scale,
                    )
                    .unwrap();
                [p.red(), p.green(), p.blue(), p.alpha()]
            };
            assert_eq!(
                at(2, 3, 4, 9),
                [205, 0, 0, 255],
                "red cell at scale {scale}"
            );
            assert_eq!(
                at(2, 3, 0, 0),
                [205, 0, 0, 255],
                "red cell's corner at scale {scale}"
            );
            assert_eq!(
                at(10, 3, 4, 9),
                [0, 0, 0, 255],
                "default background at scale {scale}"
            );
            // The bottom border is continuous, including on the edge between two cells.
            assert_eq!(
                at(5, 4, 4, 9),
                [229, 229, 229, 255],
                "border at scale {scale}"
            );
            assert_eq!(
                at(6, 4, 0, 9),
                [229, 229, 229, 255],
                "border at a cell edge, scale {scale}"
            );
        }
    }

    #[test]
    fn png_draws_text_with_the_embedded_fonts() {
        for style in [Style::new(), Style::new().bold()] {
            let mut buf = Buffer::empty(Rect::new(0, 0, 1, 1));
            buf.set_string(0, 0, "M", style);
            let png = to_png(&to_svg(&buf, Color::White, Color::Black), 1.0).expect("PNG");
            let pixmap = tiny_skia::Pixmap::decode_png(&png).unwrap();
            let ink = pixmap.pixels().iter().filter(|p| p.red() > 128).count();
            assert!(
                ink > 10,
                "{style:?}: only {ink} lit pixels; the font did not load"
            );
        }
    }

    #[test]
    fn to_png_reports_what_failed() {
        let err = to_png("<svg", 1.0).unwrap_err();
        assert!(
            matches!(err, ScreenshotError::Svg(_))
                && err.to_string().starts_with("could not parse"),
            "{err}"
        );
        let svg = to_svg(&frame(), Color::Reset, Color::Reset);
        let err = to_png(&svg, 0.0).unwrap_err();
        assert!(
            matches!(
                err,
                ScreenshotError::Pixmap {
                    width: 0,
                    height: 0
                }
            ),
            "{err}"
        );
    }
}
