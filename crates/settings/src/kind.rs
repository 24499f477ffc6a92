//! What a setting's text may be, how it is read, and how its valid values
//! are said: to a user `hark run` refuses, in a warning the probe gives, and
//! in the documentation's table.

/// The words a flag accepts, on then off.
const ON: [&str; 4] = ["1", "yes", "true", "on"];
const OFF: [&str; 4] = ["0", "no", "false", "off"];

/// What a setting's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// Bytes, with an optional `K` or `M` suffix ([`parse_size`]), from
    /// `min` to `max`.
    Size {
        /// The smallest valid size.
        min: u64,
        /// The largest valid size.
        max: u64,
    },
    /// A whole number from `min` to `max`.
    Count {
        /// The smallest valid number.
        min: u64,
        /// The largest valid number.
        max: u64,
    },
    /// A duration in whole milliseconds from `min` to `max`.
    Millis {
        /// The shortest valid duration.
        min: u64,
        /// The longest valid duration.
        max: u64,
    },
    /// A whole number that may be negative.
    Signed,
    /// On (`1`, `yes`, `true`, `on`) or off (`0`, `no`, `false`, `off`);
    /// empty is unset.
    Flag,
    /// A flag, or `auto` (the same as unset or empty).
    FlagOrAuto,
    /// One of a few words; empty is unset.
    Word(&'static [&'static str]),
    /// Any text: an address, a name, a list the reader parses itself.
    Text,
}

impl Kind {
    /// The number `text` means, if this is a numeric kind and `text` one
    /// of its numbers (in range or not).
    pub(crate) fn number(self, text: &str) -> Option<u64> {
        let text = text.trim();
        match self {
            Kind::Size { .. } => parse_size(text),
            Kind::Count { .. } | Kind::Millis { .. } => text.parse().ok(),
            _ => None,
        }
    }

    /// The bounds of a numeric kind.
    pub(crate) fn bounds(self) -> Option<(u64, u64)> {
        match self {
            Kind::Size { min, max } | Kind::Count { min, max } | Kind::Millis { min, max } => {
                Some((min, max))
            }
            _ => None,
        }
    }

    /// A number of this kind as a user writes it: `64M`, `8`, `3000 ms`.
    pub(crate) fn show(self, v: u64) -> String {
        match self {
            Kind::Size { .. } => show_size(v),
            Kind::Millis { .. } => format!("{v} ms"),
            _ => v.to_string(),
        }
    }

    /// Whether `text` is valid for this kind.
    pub(crate) fn accepts(self, text: &str) -> bool {
        let t = text.trim();
        match self {
            Kind::Size { min, max } | Kind::Count { min, max } | Kind::Millis { min, max } => {
                self.number(t).is_some_and(|v| (min..=max).contains(&v))
            }
            Kind::Signed => t.parse::<i64>().is_ok(),
            Kind::Flag => t.is_empty() || flag(t).is_some(),
            Kind::FlagOrAuto => t.is_empty() || t == "auto" || flag(t).is_some(),
            Kind::Word(words) => t.is_empty() || words.contains(&t),
            Kind::Text => true,
        }
    }

    /// The valid values, as the end of "it must be …".
    pub(crate) fn valid(self) -> String {
        match self {
            Kind::Size { min, max } => format!(
                "a size from {} to {} (e.g. 256K, 4M)",
                show_size(min),
                show_size(max)
            ),
            Kind::Count { min, max } => format!("a whole number from {min} to {max}"),
            Kind::Millis { min, max } => format!("a whole number of ms from {min} to {max}"),
            Kind::Signed => "a whole number (it may be negative)".into(),
            Kind::Flag => format!("{}; {}", or_list(&ON), or_list(&OFF)),
            Kind::FlagOrAuto => format!("{}; {}; or auto", or_list(&ON), or_list(&OFF)),
            Kind::Word(words) => format!("one of: {}", words.join(", ")),
            Kind::Text => "any text".into(),
        }
    }

    /// The valid values as the documentation's table shows them.
    pub(crate) fn valid_markdown(self) -> String {
        let code = |w: &str| format!("`{w}`");
        match self {
            Kind::Size { min, max } => format!(
                "{} to {} (suffixes `K`, `M`, `KiB`, `MiB`)",
                code(&show_size(min)),
                code(&show_size(max))
            ),
            Kind::Count { min, max } => format!("{min} to {max}"),
            Kind::Millis { min, max } => format!("{min} to {max} ms"),
            Kind::Signed => "a whole number".into(),
            Kind::Flag => "`0` or `1` (or `no`/`yes`, `false`/`true`, `off`/`on`)".into(),
            Kind::FlagOrAuto => "`auto`, `0` or `1`".into(),
            Kind::Word(words) => words.iter().map(|w| code(w)).collect::<Vec<_>>().join(", "),
            Kind::Text => "text".into(),
        }
    }
}

/// A flag word → on or off; `None` if it is not one.
pub(crate) fn flag(text: &str) -> Option<bool> {
    let t = text.trim().to_ascii_lowercase();
    if ON.contains(&t.as_str()) {
        Some(true)
    } else if OFF.contains(&t.as_str()) {
        Some(false)
    } else {
        None
    }
}

/// `a, b, c or d`.
fn or_list(words: &[&str]) -> String {
    match words.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// `4096`, `64K`, `1M`, `2MiB` → bytes; `None` if not a size, or if it
/// overflows.
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

/// Bytes as [`parse_size`] reads them back: `64M`, `4K`, `1000`.
pub fn show_size(v: u64) -> String {
    match v {
        0 => "0".into(),
        v if v % (1 << 20) == 0 => format!("{}M", v >> 20),
        v if v % (1 << 10) == 0 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}
