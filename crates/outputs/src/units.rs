//! Numbers for people: durations, byte sizes and counts, each in one place so
//! the summary and the report always print the same value the same way.

/// A duration in nanoseconds as `1.23 s`, `45.6 ms`, `7.89 µs` or `120 ns`.
pub fn duration(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A byte count with binary units: `512 B`, `1.5 KiB`, `3.00 MiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {}", UNITS[unit])
}

pub use hark_model::count;

/// A share as a percentage with one decimal: `23.4 %`; `-` when the whole is 0.
pub fn percent(part: f64, whole: f64) -> String {
    if whole <= 0.0 {
        "-".to_string()
    } else {
        format!("{:.1} %", 100.0 * part / whole)
    }
}

/// A fraction of 1 as a percentage with one decimal: `0.234` reads
/// `23.4 %`; `-` when it is not a number (a hand-edited `profile.json`).
pub fn fraction(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1} %", 100.0 * v)
    } else {
        "-".to_string()
    }
}

/// `text` broken into lines of at most `width` characters at spaces (a
/// longer word gets a line of its own), each after `indent`.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if line > 0 && line + 1 + len > width {
            out.push('\n');
            line = 0;
        }
        if line == 0 {
            out.push_str(indent);
        } else {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += len;
    }
    if line > 0 {
        out.push('\n');
    }
    out
}

/// `name` with every character other than ASCII letters, digits, `-`, `_`
/// and `.` replaced by `_`: safe inside a file name, whatever a measured
/// program is called.
pub fn file_name_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_the_way_people_write_them() {
        let cases: &[(String, &str)] = &[
            (duration(1.5e9), "1.500 s"),
            (duration(45_600_000.0), "45.60 ms"),
            (duration(7_890.0), "7.89 µs"),
            (duration(120.0), "120 ns"),
            (bytes(512), "512 B"),
            (bytes(1536), "1.50 KiB"),
            (bytes(150 << 20), "150 MiB"),
            (bytes(3 << 30), "3.00 GiB"),
            (count(0), "0"),
            (count(999), "999"),
            (count(1000), "1,000"),
            (count(1_234_567), "1,234,567"),
            (percent(1.0, 4.0), "25.0 %"),
            (percent(1.0, 0.0), "-"),
            (fraction(0.8125), "81.2 %"),
            (fraction(f64::NAN), "-"),
            (wrap("one two  three", 7, "> "), "> one two\n> three\n"),
            (wrap("a verylongword b", 4, ""), "a\nverylongword\nb\n"),
            (wrap("", 4, "  "), ""),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
