//! Numbers as an operator reads them: dollars, ages, CPU cores and memory sizes, in the
//! short forms kubectl and k9s use, so columns stay narrow and comparable.

use chrono::TimeDelta;

/// USD per hour, with enough digits to tell spot prices apart.
pub fn per_hour(usd: f64) -> String {
    // A total that sums to a rounding error below zero reads as zero, not "$-0.000/h".
    let usd = if usd.abs() < 0.0005 { 0.0 } else { usd };
    if usd >= 100.0 {
        format!("${usd:.0}/h")
    } else if usd >= 10.0 {
        format!("${usd:.1}/h")
    } else {
        format!("${usd:.3}/h")
    }
}

/// USD per month (730 hours, AWS's convention).
pub fn per_month(usd_per_hour: f64) -> String {
    let m = usd_per_hour * 730.0;
    if m >= 10_000.0 {
        format!("${:.1}k/mo", m / 1000.0)
    } else {
        format!("${m:.0}/mo")
    }
}

/// An age as kubectl prints it: 45s, 3m12s, 5h3m, 2d4h.
pub fn age(d: TimeDelta) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..600 => format!("{}m{}s", s / 60, s % 60),
        600..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A time relative to now: "in 5m" or "3m ago".
pub fn relative(d: TimeDelta) -> String {
    if d >= TimeDelta::zero() {
        format!("in {}", age(d))
    } else {
        format!("{} ago", age(-d))
    }
}

/// Millicores as cores ("3.5", "0.25", "96").
pub fn cores(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else if milli >= 10_000 {
        format!("{:.1}", milli as f64 / 1000.0)
    } else {
        let s = format!("{:.2}", milli as f64 / 1000.0);
        s.trim_end_matches('0').to_string()
    }
}

/// Milli-bytes (the engine's unit) as binary units ("512Mi", "15.3Gi").
pub fn bytes(milli: i64) -> String {
    let b = milli as f64 / 1000.0;
    const GI: f64 = 1024.0 * 1024.0 * 1024.0;
    const MI: f64 = 1024.0 * 1024.0;
    if b >= 1024.0 * GI {
        format!("{:.1}Ti", b / (1024.0 * GI))
    } else if b >= 10.0 * GI {
        format!("{:.0}Gi", b / GI)
    } else if b >= GI {
        format!("{:.1}Gi", b / GI)
    } else {
        format!("{:.0}Mi", b / MI)
    }
}

/// A share as a whole percentage; 0 when the whole is 0.
pub fn percent(part: i64, whole: i64) -> u16 {
    if whole <= 0 {
        0
    } else {
        ((part as f64 / whole as f64) * 100.0)
            .round()
            .clamp(0.0, 999.0) as u16
    }
}

/// Clips text to `width` characters, marking the cut with an ellipsis.
pub fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut s: String = text.chars().take(width - 1).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(age(TimeDelta::seconds(45)), "45s");
        assert_eq!(age(TimeDelta::seconds(192)), "3m12s");
        assert_eq!(age(TimeDelta::seconds(1500)), "25m");
        assert_eq!(age(TimeDelta::seconds(5 * 3600 + 180)), "5h3m");
        assert_eq!(age(TimeDelta::seconds(2 * 86_400 + 4 * 3600)), "2d4h");
        assert_eq!(relative(TimeDelta::seconds(-90)), "1m30s ago");
    }

    #[test]
    fn units_are_short_and_exact_enough() {
        assert_eq!(cores(3500), "3.5");
        assert_eq!(cores(250), "0.25");
        assert_eq!(cores(96_000), "96");
        assert_eq!(bytes(512 * 1024 * 1024 * 1000), "512Mi");
        assert_eq!(bytes(16 * 1024 * 1024 * 1024 * 1000), "16Gi");
        assert_eq!(per_hour(0.192), "$0.192/h");
        assert_eq!(per_hour(-1e-12), "$0.000/h");
        assert_eq!(per_month(1.0), "$730/mo");
        assert_eq!(clip("ip-10-0-0-1", 6), "ip-10…");
    }
}
