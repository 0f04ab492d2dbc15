//! Box-drawing (U+2500–U+257F), block-element (U+2580–U+259F) and Braille characters as
//! geometry.
//!
//! Font glyphs for these characters rarely fill the cell exactly: at a 9×18 cell a `─`
//! from DejaVu Sans Mono stops short of the cell edge and a `│` leaves a gap between rows,
//! so borders and bar gauges come out dotted. Drawn as strokes from the cell centre to the
//! edges they connect, and as rectangles of the right fraction of the cell, adjacent cells
//! meet exactly on the shared edge.
//!
//! Braille patterns (U+2800–U+28FF, the dots of ratatui's canvas and charts) are drawn as
//! dots too: DejaVu Sans Mono has no Braille glyphs, and dots placed on the cell grid line
//! up with the plot's neighbouring cells.

use std::fmt::{self, Write as _};

use super::{CELL_HEIGHT, CELL_WIDTH};

/// Stroke width of a light line, in tenths of a pixel.
const LIGHT: u16 = 12;
/// Stroke width of a heavy line, in tenths of a pixel.
const HEAVY: u16 = 24;
/// Distance of each line of a double line from the cell's centre line.
const OFF: f32 = 1.5;
/// Radius of the rounded corners (╭╮╯╰).
const RADIUS: f32 = 4.0;
/// Radius of a Braille dot.
const DOT: f32 = 1.25;

/// How a piece of geometry is painted; the caller adds the colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Pen {
    /// A stroke of this width in tenths of a pixel (`fill="none"`).
    Stroke(u16),
    /// A fill with this opacity in percent (shades are 25/50/75).
    Fill(u8),
}

/// Arm weights of U+2500..=U+257F, eight characters a row, four digits each in the order
/// left, right, up, down: 0 none, 1 light, 2 heavy, 3 double. Dashes, arcs and diagonals
/// are special-cased in [`draw`] but keep their arms here.
const ARMS: [&str; 16] = [
    "1100 2200 0011 0022 1100 2200 0011 0022", // ─━│┃┄┅┆┇
    "1100 2200 0011 0022 0101 0201 0102 0202", // ┈┉┊┋┌┍┎┏
    "1001 2001 1002 2002 0110 0210 0120 0220", // ┐┑┒┓└┕┖┗
    "1010 2010 1020 2020 0111 0211 0121 0112", // ┘┙┚┛├┝┞┟
    "0122 0221 0212 0222 1011 2011 1021 1012", // ┠┡┢┣┤┥┦┧
    "1022 2021 2012 2022 1101 2101 1201 2201", // ┨┩┪┫┬┭┮┯
    "1102 2102 1202 2202 1110 2110 1210 2210", // ┰┱┲┳┴┵┶┷
    "1120 2120 1220 2220 1111 2111 1211 2211", // ┸┹┺┻┼┽┾┿
    "1121 1112 1122 2121 1221 2112 1212 2221", // ╀╁╂╃╄╅╆╇
    "2212 2122 1222 2222 1100 2200 0011 0022", // ╈╉╊╋╌╍╎╏
    "3300 0033 0301 0103 0303 3001 1003 3003", // ═║╒╓╔╕╖╗
    "0310 0130 0330 3010 1030 3030 0311 0133", // ╘╙╚╛╜╝╞╟
    "0333 3011 1033 3033 3301 1103 3303 3310", // ╠╡╢╣╤╥╦╧
    "1130 3330 3311 1133 3333 0101 1001 1010", // ╨╩╪╫╬╭╮╯
    "0110 0000 0000 0000 1000 0010 0100 0001", // ╰╱╲╳╴╵╶╷
    "2000 0020 0200 0002 1200 0012 2100 0021", // ╸╹╺╻╼╽╾╿
];

/// The arm weights `[left, right, up, down]` of a character in U+2500..=U+257F.
fn arms(code: u32) -> [u8; 4] {
    let i = (code - 0x2500) as usize;
    let digits = &ARMS[i / 8].as_bytes()[i % 8 * 5..];
    [0, 1, 2, 3].map(|k| digits[k] - b'0')
}

/// A number for path data and attributes: at most three decimals (exact
/// for eighths of a cell), no trailing zeros.
pub(super) struct Num(pub(super) f32);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{:.3}", self.0 + 0.0);
        f.write_str(s.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// The geometry of one cell, as path data per pen.
#[derive(Default)]
struct Out(Vec<(Pen, String)>);

impl Out {
    fn path(&mut self, pen: Pen) -> &mut String {
        let i = match self.0.iter().position(|(p, _)| *p == pen) {
            Some(i) => i,
            None => {
                self.0.push((pen, String::new()));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }

    /// A straight line from (x1, y1) to (x2, y2), horizontal or vertical.
    fn line(&mut self, width: u16, (x1, y1): (f32, f32), (x2, y2): (f32, f32)) {
        let d = self.path(Pen::Stroke(width));
        let _ = write!(d, "M{} {}", Num(x1), Num(y1));
        let _ = if y1 == y2 {
            write!(d, "H{}", Num(x2))
        } else {
            write!(d, "V{}", Num(y2))
        };
    }

    /// A horizontal (or vertical) line at y (or x) `at`, from `a` to `b` along the axis.
    fn along(&mut self, horizontal: bool, width: u16, at: f32, a: f32, b: f32) {
        if horizontal {
            self.line(width, (a, at), (b, at));
        } else {
            self.line(width, (at, a), (at, b));
        }
    }

    fn rect(&mut self, alpha: u8, x: f32, y: f32, w: f32, h: f32) {
        let d = self.path(Pen::Fill(alpha));
        let _ = write!(
            d,
            "M{} {}H{}V{}H{}Z",
            Num(x),
            Num(y),
            Num(x + w),
            Num(y + h),
            Num(x)
        );
    }
}

/// Whether `ch` is drawn as geometry by [`draw`] rather than as a font glyph.
pub(super) fn is_geometry(ch: char) -> bool {
    matches!(ch, '\u{2500}'..='\u{259F}' | '\u{2800}'..='\u{28FF}')
}
/// The geometry of `ch` in the cell whose top-left corner is (`x`, `y`), as path data per
/// pen, or `None` when `ch` is not a box-drawing or block character.
pub(super) fn draw(ch: char, x: f32, y: f32) -> Option<Vec<(Pen, String)>> {
    let (w, h) = (CELL_WIDTH as f32, CELL_HEIGHT as f32);
    let mut out = Out::default();
    let code = ch as u32;
    match code {
        0x2500..=0x257F => {
            let arms = arms(code);
            let (cx, cy) = (x + (w / 2.0).floor() + 0.5, y + (h / 2.0).floor() + 0.5);
            match code {
                0x2504..=0x250B | 0x254C..=0x254F => {
                    let pieces = match code {
                        0x2504..=0x2507 => 3,
                        0x2508..=0x250B => 4,
                        _ => 2,
                    };
                    let width = if arms.contains(&2) { HEAVY } else { LIGHT };
                    if arms[0] != 0 {
                        dashes(&mut out, width, pieces, (x, cy), (x + w, cy));
                    } else {
                        dashes(&mut out, width, pieces, (cx, y), (cx, y + h));
                    }
                }
                0x256D..=0x2570 => {
                    // A quarter curve through the centre, straight to both edges.
                    let (sx, sy) = (
                        if arms[1] != 0 { 1.0 } else { -1.0 },
                        if arms[3] != 0 { 1.0 } else { -1.0 },
                    );
                    let (ex, ey) = (
                        if sx > 0.0 { x + w } else { x },
                        if sy > 0.0 { y + h } else { y },
                    );
                    let d = out.path(Pen::Stroke(LIGHT));
                    let _ = write!(d, "M{} {}H{}", Num(ex), Num(cy), Num(cx + sx * RADIUS));
                    let _ = write!(
                        d,
                        "Q{} {} {} {}V{}",
                        Num(cx),
                        Num(cy),
                        Num(cx),
                        Num(cy + sy * RADIUS),
                        Num(ey)
                    );
                }
                0x2571..=0x2573 => {
                    let d = out.path(Pen::Stroke(LIGHT));
                    if code != 0x2572 {
                        let _ = write!(d, "M{} {}L{} {}", Num(x), Num(y + h), Num(x + w), Num(y));
                    }
                    if code != 0x2571 {
                        let _ = write!(d, "M{} {}L{} {}", Num(x), Num(y), Num(x + w), Num(y + h));
                    }
                }
                _ => lines(&mut out, arms, (x, y, w, h), (cx, cy)),
            }
        }
        0x2580..=0x259F => blocks(&mut out, code, x, y, w, h),
        0x2800..=0x28FF => braille(&mut out, code - 0x2800, x, y, w, h),
        _ => return None,
    }
    Some(out.0)
}

/// Stroke width of an arm weight (double lines are drawn as two light strokes).
fn stroke(weight: u8) -> u16 {
    if weight == 2 { HEAVY } else { LIGHT }
}

/// The straight lines of a box-drawing character with arm weights `[left, right, up, down]`.
fn lines(out: &mut Out, arms: [u8; 4], (x, y, w, h): (f32, f32, f32, f32), (cx, cy): (f32, f32)) {
    let [l, r, u, d] = arms;
    if (l == 3 || r == 3) && (u == 3 || d == 3) {
        return double_grid(out, arms, (x, y, w, h), (cx, cy));
    }
    // How far an arm's inner end passes the centre, so corners and tees close: half the
    // widest stroke across it, or the far side of a double line across it.
    let width = |a: u8| if a == 0 { 0 } else { stroke(a) };
    let pass = |a: u8, b: u8| {
        if a == 3 || b == 3 {
            OFF + f32::from(LIGHT) / 20.0
        } else {
            f32::from(width(a).max(width(b))) / 20.0
        }
    };
    let (ph, pv) = (pass(u, d), pass(l, r));
    // Each axis: its low-side and high-side arms, its extent, its centre, how far its
    // arms pass the centre, and the position of its centre line.
    let axes = [
        (true, (l, r), (x, x + w), cx, ph, cy),
        (false, (u, d), (y, y + h), cy, pv, cx),
    ];
    for (horizontal, (lo, hi), (start, end), centre, pass, at) in axes {
        let mut spans = Vec::new();
        if lo == hi && lo != 0 {
            spans.push((lo, start, end));
        } else {
            if lo != 0 {
                spans.push((lo, start, centre + pass));
            }
            if hi != 0 {
                spans.push((hi, centre - pass, end));
            }
        }
        for (weight, a, b) in spans {
            let offsets: &[f32] = if weight == 3 { &[-OFF, OFF] } else { &[0.0] };
            for off in offsets {
                out.along(horizontal, stroke(weight), at + off, a, b);
            }
        }
    }
}

/// The double-line characters whose both axes are double (╔╗╚╝╠╣╦╩╬): two horizontal and
/// two vertical lines, each broken where an arm crosses it, so the inner corners stay open.
fn double_grid(
    out: &mut Out,
    [l, r, u, d]: [u8; 4],
    (x, y, w, h): (f32, f32, f32, f32),
    (cx, cy): (f32, f32),
) {
    let half = f32::from(LIGHT) / 20.0;
    let (x1, x2, y1, y2) = (cx - OFF, cx + OFF, cy - OFF, cy + OFF);
    // Each line: horizontal or not, its position, whether an arm crosses it, whether it
    // has arms on its low and high sides, its extent, and where the crossing arm's lines are.
    let lines = [
        (true, y1, u != 0, (l != 0, r != 0), (x, x + w), (x1, x2)),
        (true, y2, d != 0, (l != 0, r != 0), (x, x + w), (x1, x2)),
        (false, x1, l != 0, (u != 0, d != 0), (y, y + h), (y1, y2)),
        (false, x2, r != 0, (u != 0, d != 0), (y, y + h), (y1, y2)),
    ];
    for (horizontal, at, crossed, (lo, hi), (start, end), (inner_lo, inner_hi)) in lines {
        if crossed {
            // Broken at the crossing arm: the pieces end on the crossing arm's lines.
            if lo {
                out.along(horizontal, LIGHT, at, start, inner_lo + half);
            }
            if hi {
                out.along(horizontal, LIGHT, at, inner_hi - half, end);
            }
        } else if lo || hi {
            let a = if lo { start } else { inner_lo - half };
            let b = if hi { end } else { inner_hi + half };
            out.along(horizontal, LIGHT, at, a, b);
        }
    }
}

/// A dashed line from `from` to `to` in `pieces` dashes, each centred in its share.
fn dashes(out: &mut Out, width: u16, pieces: u8, from: (f32, f32), to: (f32, f32)) {
    let n = f32::from(pieces);
    for i in 0..pieces {
        let (a, b) = (f32::from(i) / n + 0.15 / n, f32::from(i + 1) / n - 0.15 / n);
        let at = |t: f32| (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t);
        out.line(width, at(a), at(b));
    }
}

/// Block elements: eighths, halves, quadrants and shades as rectangles.
fn blocks(out: &mut Out, code: u32, x: f32, y: f32, w: f32, h: f32) {
    let eighth = |n: u32| n as f32 / 8.0;
    match code {
        0x2580 => out.rect(100, x, y, w, h / 2.0),
        0x2581..=0x2588 => {
            let f = eighth(code - 0x2580);
            out.rect(100, x, y + h * (1.0 - f), w, h * f);
        }
        0x2589..=0x258F => out.rect(100, x, y, w * eighth(0x2590 - code), h),
        0x2590 => out.rect(100, x + w / 2.0, y, w / 2.0, h),
        0x2591..=0x2593 => out.rect(((code - 0x2590) * 25) as u8, x, y, w, h),
        0x2594 => out.rect(100, x, y, w, h / 8.0),
        0x2595 => out.rect(100, x + w * 7.0 / 8.0, y, w / 8.0, h),
        _ => {
            // Quadrants: bits upper-left 1, upper-right 2, lower-left 4, lower-right 8.
            const QUADRANTS: [u8; 10] = [
                4,
                8,
                1,
                1 | 4 | 8,
                1 | 8,
                1 | 2 | 4,
                1 | 2 | 8,
                2,
                2 | 4,
                2 | 4 | 8,
            ];
            let bits = QUADRANTS[(code - 0x2596) as usize];
            let (hw, hh) = (w / 2.0, h / 2.0);
            for (bit, qx, qy) in [
                (1, x, y),
                (2, x + hw, y),
                (4, x, y + hh),
                (8, x + hw, y + hh),
            ] {
                if bits & bit != 0 {
                    out.rect(100, qx, qy, hw, hh);
                }
            }
        }
    }
}

/// The dots of a Braille pattern: two columns of four, bits 0-2 and 6 on the left from
/// the top, bits 3-5 and 7 on the right.
fn braille(out: &mut Out, bits: u32, x: f32, y: f32, w: f32, h: f32) {
    const DOTS: [(u8, u8); 8] = [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
        (0, 3),
        (1, 3),
    ];
    for (bit, (col, row)) in DOTS.into_iter().enumerate() {
        if bits & (1 << bit) != 0 {
            let cx = x + w * (1.0 + 2.0 * f32::from(col)) / 4.0;
            let cy = y + h * (1.0 + 2.0 * f32::from(row)) / 8.0;
            let d = out.path(Pen::Fill(100));
            let (r, r2) = (Num(DOT), Num(2.0 * DOT));
            let _ = write!(
                d,
                "M{} {}a{r} {r} 0 1 0 {r2} 0a{r} {r} 0 1 0 -{r2} 0Z",
                Num(cx - DOT),
                Num(cy)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoints of every stroke of `ch` drawn at the origin.
    fn endpoints(ch: char) -> Vec<(f32, f32)> {
        let mut points = Vec::new();
        for (pen, d) in draw(ch, 0.0, 0.0).expect("geometry") {
            assert!(matches!(pen, Pen::Stroke(_)), "{ch}: lines are strokes");
            let mut cur = (0.0, 0.0);
            let mut rest = d.as_str();
            while let Some(cmd) = rest.chars().next() {
                let end = rest[1..]
                    .find(|c: char| c.is_ascii_alphabetic())
                    .map_or(rest.len(), |i| i + 1);
                let nums: Vec<f32> = rest[1..end]
                    .split(' ')
                    .map(|n| n.parse().unwrap())
                    .collect();
                cur = match cmd {
                    'M' | 'L' => (nums[0], nums[1]),
                    'H' => (nums[0], cur.1),
                    'V' => (cur.0, nums[0]),
                    'Q' => (nums[2], nums[3]),
                    other => panic!("unexpected command {other} in {d}"),
                };
                points.push(cur);
                rest = &rest[end..];
            }
        }
        points
    }

    #[test]
    fn every_line_reaches_the_edges_it_connects_and_no_others() {
        let (w, h) = (CELL_WIDTH as f32, CELL_HEIGHT as f32);
        for code in 0x2500..=0x257Fu32 {
            if matches!(code, 0x2504..=0x250B | 0x254C..=0x254F | 0x2571..=0x2573) {
                continue; // dashed lines stop short of the edges by design; diagonals hit corners
            }
            let ch = char::from_u32(code).unwrap();
            let points = endpoints(ch);
            let reached = [
                points.iter().any(|p| p.0 == 0.0),
                points.iter().any(|p| p.0 == w),
                points.iter().any(|p| p.1 == 0.0),
                points.iter().any(|p| p.1 == h),
            ];
            let connected = arms(code).map(|a| a != 0);
            assert_eq!(
                reached, connected,
                "{ch} (U+{code:04X}), [left, right, up, down]: {points:?}"
            );
        }
    }

    #[test]
    fn double_lines_are_two_strokes_and_heavy_lines_are_wider() {
        let double = draw('═', 0.0, 0.0).unwrap();
        assert_eq!(
            double,
            vec![(Pen::Stroke(LIGHT), "M0 8H9M0 11H9".to_string())]
        );
        assert_eq!(
            draw('━', 9.0, 18.0).unwrap(),
            vec![(Pen::Stroke(HEAVY), "M9 27.5H18".to_string())]
        );
        assert_eq!(
            draw('│', 0.0, 0.0).unwrap(),
            vec![(Pen::Stroke(LIGHT), "M4.5 0V18".to_string())]
        );
    }

    #[test]
    fn blocks_fill_their_fraction_of_the_cell() {
        let rect = |ch| draw(ch, 0.0, 0.0).unwrap();
        assert_eq!(
            rect('█'),
            vec![(Pen::Fill(100), "M0 0H9V18H0Z".to_string())]
        );
        assert_eq!(
            rect('▄'),
            vec![(Pen::Fill(100), "M0 9H9V18H0Z".to_string())]
        );
        assert_eq!(
            rect('▌'),
            vec![(Pen::Fill(100), "M0 0H4.5V18H0Z".to_string())]
        );
        assert_eq!(
            rect('▏'),
            vec![(Pen::Fill(100), "M0 0H1.125V18H0Z".to_string())]
        );
        assert_eq!(
            rect('▊'),
            vec![(Pen::Fill(100), "M0 0H6.75V18H0Z".to_string())]
        );
        assert_eq!(rect('▒'), vec![(Pen::Fill(50), "M0 0H9V18H0Z".to_string())]);
        assert_eq!(
            rect('▚'),
            vec![(Pen::Fill(100), "M0 0H4.5V9H0ZM4.5 9H9V18H4.5Z".to_string())]
        );
        assert!(
            draw('●', 0.0, 0.0).is_none() && !is_geometry('●'),
            "other symbols are glyphs"
        );
    }

    #[test]
    fn braille_dots_sit_on_a_two_by_four_grid() {
        let dot =
            |x: &str, y: &str| format!("M{x} {y}a1.25 1.25 0 1 0 2.5 0a1.25 1.25 0 1 0 -2.5 0Z");
        let left: String = ["2.25", "6.75", "11.25", "15.75"]
            .map(|y| dot("1", y))
            .concat();
        assert_eq!(draw('⡇', 0.0, 0.0).unwrap(), vec![(Pen::Fill(100), left)]);
        assert_eq!(
            draw('⠈', 9.0, 0.0).unwrap(),
            vec![(Pen::Fill(100), dot("14.5", "2.25"))]
        );
        assert_eq!(
            draw('⢀', 0.0, 0.0).unwrap(),
            vec![(Pen::Fill(100), dot("5.5", "15.75"))]
        );
        assert!(draw('\u{2800}', 0.0, 0.0).unwrap().is_empty() && is_geometry('\u{2800}'));
    }
}
