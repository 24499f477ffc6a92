//! The probe settings `hark run` hands on, checked before the program starts.
//!
//! The measured processes read `HARK_*` from their environment: the values
//! `hark run` sets from its options, and any the user exported, which pass
//! through. A probe that meets a bad value can only warn and fall back to a
//! default, once per process, after the run has begun; `hark run` can say
//! so before anything starts. Every setting here has one valid range, the
//! probe's (`docs/probe.md`), and a bad value is refused with its name, the
//! value and that range.

use anyhow::{bail, Result};

/// How a setting's value is read.
enum Shape {
    /// A size in bytes with an optional `K` or `M` suffix, within bounds.
    Size(u64, u64),
    /// A whole number within bounds.
    Count(u64, u64),
    /// A yes/no flag.
    Flag,
    /// One of a few words.
    Word(&'static [&'static str]),
}

/// Every setting `hark run` checks, with its valid values. Zero is valid
/// only where it has a documented meaning: `HARK_FLUSH_MS=0` ships full
/// buffers only, `HARK_DRAIN_TIMEOUT_MS=0` does not wait for the last packs
/// at exit. A zero send or connect timeout would mean, to the kernel, wait
/// forever, which hangs a lossless program on a stopped server: refused.
const SETTINGS: &[(&str, Shape)] = &[
    ("HARK_PACK_SIZE", Shape::Size(4 << 10, 64 << 20)),
    ("HARK_BUFFERS", Shape::Count(2, 4096)),
    ("HARK_LOSSLESS", Shape::Flag),
    ("HARK_IO", Shape::Flag),
    ("HARK_CLOCK", Shape::Word(&["", "tsc", "monotonic"])),
    ("HARK_CONNECT_TIMEOUT_MS", Shape::Count(1, 3_600_000)),
    ("HARK_SEND_TIMEOUT_MS", Shape::Count(1, 3_600_000)),
    ("HARK_DRAIN_TIMEOUT_MS", Shape::Count(0, 3_600_000)),
    ("HARK_FLUSH_MS", Shape::Count(0, 3_600_000)),
    ("HARK_SOCKET_BUFFER", Shape::Size(4 << 10, 1 << 30)),
];

const FLAGS: [&str; 8] = ["1", "yes", "true", "on", "0", "no", "false", "off"];

/// `4096`, `64K`, `1M`, `2MiB` → bytes; `None` if not a size (or if it
/// overflows).
pub fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Checks `value` for the setting `name` (one of [`SETTINGS`]; other names
/// pass). The error names the value, the setting and the valid range.
pub fn check(name: &str, value: &str) -> Result<(), String> {
    let Some((_, shape)) = SETTINGS.iter().find(|(n, _)| *n == name) else {
        return Ok(());
    };
    let v = value.trim();
    let (ok, range) = match shape {
        Shape::Size(lo, hi) => (
            parse_size(v).is_some_and(|b| (*lo..=*hi).contains(&b)),
            format!(
                "a size from {} to {} (e.g. 256K, 4M)",
                bytes_text(*lo),
                bytes_text(*hi)
            ),
        ),
        Shape::Count(lo, hi) => (
            v.parse::<u64>().is_ok_and(|n| (*lo..=*hi).contains(&n)),
            format!("a whole number from {lo} to {hi}"),
        ),
        Shape::Flag => (
            FLAGS.contains(&v.to_ascii_lowercase().as_str()),
            "1, yes, true or on; 0, no, false or off".to_string(),
        ),
        Shape::Word(words) => (
            words.contains(&v),
            format!("one of: {}", words.join(", ").trim_start_matches(", ")),
        ),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a valid {name}: it must be {range}"
        ))
    }
}

fn bytes_text(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// Checks every `HARK_*` setting the measured processes will see: `set`,
/// what `hark run` sets from its options, over the inherited environment.
pub fn check_all(set: &[(String, String)]) -> Result<()> {
    let mut bad = Vec::new();
    for (name, _) in SETTINGS {
        let (value, from) = match set.iter().find(|(k, _)| k == name) {
            Some((_, v)) => (v.clone(), "set by hark run"),
            None => match std::env::var(name) {
                Ok(v) => (v, "in the environment"),
                Err(_) => continue,
            },
        };
        if let Err(e) = check(name, &value) {
            bad.push(format!("{e} ({from})"));
        }
    }
    if !bad.is_empty() {
        bail!(
            "{}; the command was not started",
            bad.join("\nhark: error: ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_units_and_do_not_overflow() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("256K"), Some(256 << 10));
        assert_eq!(parse_size("2MiB"), Some(2 << 20));
        assert_eq!(parse_size("17592186044417M"), None);
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-5"), None);
    }

    #[test]
    fn bad_values_are_named_with_their_setting_and_range() {
        let e = check("HARK_BUFFERS", "0").unwrap_err();
        assert_eq!(
            e,
            "`0` is not a valid HARK_BUFFERS: it must be a whole number from 2 to 4096"
        );
        let e = check("HARK_PACK_SIZE", "10G").unwrap_err();
        assert!(e.contains("from 4K to 64M"), "{e}");
        for (name, value) in [
            ("HARK_PACK_SIZE", "abc"),
            ("HARK_PACK_SIZE", "-5"),
            ("HARK_BUFFERS", "-1"),
            ("HARK_BUFFERS", "abc"),
            ("HARK_SEND_TIMEOUT_MS", "0"),
            ("HARK_LOSSLESS", "maybe"),
            ("HARK_CLOCK", "sundial"),
        ] {
            assert!(check(name, value).is_err(), "{name}={value}");
        }
        for (name, value) in [
            ("HARK_PACK_SIZE", "1M"),
            ("HARK_BUFFERS", "8"),
            ("HARK_FLUSH_MS", "0"),
            ("HARK_DRAIN_TIMEOUT_MS", "0"),
            ("HARK_IO", "off"),
            ("HARK_CLOCK", "monotonic"),
            ("HARK_JOB", "anything"),
        ] {
            assert_eq!(check(name, value), Ok(()), "{name}={value}");
        }
    }
}
