//! Every setting of a measured job, in one table: the `HARK_*` environment
//! variables the probe (and an analyser rank) reads, each with its
//! [`Kind`] (and so its valid values), its default and a one-line doc.
//!
//! Three readers share the table, so that a range is written once:
//!
//! - the probe reads its settings once at start through [`Setting::number`],
//!   [`Setting::flag`] and friends, which give the value to use and, for
//!   text it cannot use, the warning that says so;
//! - `hark run` checks the environment the measured processes will see with
//!   [`Setting::check`] before anything starts, and refuses a bad value
//!   with its valid range;
//! - the table in `docs/probe.md` is [`docs_table`]'s output, and a test
//!   fails when the two differ.
//!
//! Beside the table, [`cpu_list`]: the kernel's CPU lists, which the probe
//! and the server both read; [`Filter`] and [`Throttle`]: what the probe
//! records of compiler-instrumented functions, which the probe and
//! `hark run` both read.
//!
//! ```
//! use hark_settings::{BUFFERS, PACK_SIZE};
//!
//! assert_eq!(PACK_SIZE.name, "HARK_PACK_SIZE");
//! assert_eq!(PACK_SIZE.number(Some("64K")).value, 64 << 10);
//! let bad = BUFFERS.number(Some("0"));
//! assert_eq!(bad.value, 8);
//! assert_eq!(
//!     bad.warning.as_deref(),
//!     Some("HARK_BUFFERS=\"0\" is not valid (expected 2 to 4096); using 8")
//! );
//! assert!(BUFFERS.check("1").unwrap_err().contains("from 2 to 4096"));
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cpus;
mod functions;
mod kind;
mod table;

pub use cpus::cpu_list;
pub use functions::{glob, Filter, Throttle};
pub use kind::{parse_size, show_size, Kind};
pub use table::*;

/// One setting: an environment variable, what it may hold, its default and
/// what it does.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The variable's name, `HARK_…`.
    pub name: &'static str,
    /// What its value is, and so its valid values.
    pub kind: Kind,
    /// The value used when it is unset.
    pub default: DefaultValue,
    /// Who sets it, when not the user.
    pub set_by: SetBy,
    /// What it does, in one line of Markdown (the documentation's table).
    pub doc: &'static str,
}

/// A setting's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// A number of the setting's kind.
    Number(u64),
    /// A flag's default.
    Flag(bool),
    /// A default that is no value of the kind (`auto`, "the pack size"),
    /// said in words; the reader decides what it means.
    Words(&'static str),
}

/// Who sets a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetBy {
    /// The user, or `hark run` from its options.
    User,
    /// `hark run` or the probe itself, never the user: `hark run` still
    /// refuses a bad value the user exported.
    Hark,
    /// Tests only.
    Tests,
}

/// A value read for the probe: the value to use, and the warning to give
/// when the text was set but not usable (it names the setting, the text,
/// the valid values and the value used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading<T> {
    /// The value to use.
    pub value: T,
    /// Why the text was not used, if it was not.
    pub warning: Option<String>,
}

impl<T> Reading<T> {
    fn fine(value: T) -> Reading<T> {
        Reading {
            value,
            warning: None,
        }
    }
}

impl Setting {
    /// `Ok` if `text` is valid for this setting; otherwise the error says
    /// the text, the setting and the valid values:
    /// ``"`0` is not a valid HARK_BUFFERS: it must be a whole number from 2 to 4096"``.
    pub fn check(&self, text: &str) -> Result<(), String> {
        // Two texts the probe parses itself: the same parsers check them.
        if self.name == FILTER.name && !text.is_empty() {
            return Filter::read(text).map(|_| ());
        }
        if self.name == THROTTLE.name {
            return Throttle::parse(text).map(|_| ());
        }
        if self.kind.accepts(text) {
            return Ok(());
        }
        Err(format!(
            "`{text}` is not a valid {}: it must be {}",
            self.name,
            self.kind.valid()
        ))
    }

    /// A numeric setting's value: `text` within the setting's range, or
    /// else the default (text that is no number, or 0 where 0 is not
    /// valid) or the nearest bound (a number out of range), with a warning.
    /// A setting whose default is not a number falls back to its smallest
    /// value: read it with [`Setting::number_or`].
    pub fn number(&self, text: Option<&str>) -> Reading<u64> {
        let (min, _) = self.kind.bounds().unwrap_or((0, 0));
        let default = match self.default {
            DefaultValue::Number(d) => d,
            _ => min,
        };
        self.number_or(text, default)
    }

    /// As [`Setting::number`], with `default` for the default.
    pub fn number_or(&self, text: Option<&str>, default: u64) -> Reading<u64> {
        let Some(text) = text else {
            return Reading::fine(default);
        };
        let (min, max) = self.kind.bounds().unwrap_or((0, u64::MAX));
        let used = match self.kind.number(text) {
            Some(v) if (min..=max).contains(&v) => return Reading::fine(v),
            Some(v) if v > 0 => v.clamp(min, max),
            // Zero where it is not valid is no amount at all, like a word.
            _ => default,
        };
        let show = |v| self.kind.show(v);
        Reading {
            value: used,
            warning: Some(format!(
                "{}={text:?} is not valid (expected {} to {}); using {}",
                self.name,
                show(min),
                show(max),
                show(used)
            )),
        }
    }

    /// A flag's value: on or off, or else (not a flag word) the default,
    /// with a warning. Empty text counts as unset.
    pub fn flag(&self, text: Option<&str>) -> Reading<bool> {
        let default = matches!(self.default, DefaultValue::Flag(true));
        match text.map(str::trim) {
            None | Some("") => Reading::fine(default),
            Some(t) => match kind::flag(t) {
                Some(on) => Reading::fine(on),
                None => Reading {
                    value: default,
                    warning: Some(format!(
                        "{}={:?} is not valid (expected 0 or 1); using {}",
                        self.name,
                        text.unwrap_or_default(),
                        u8::from(default)
                    )),
                },
            },
        }
    }

    /// A flag-or-auto's value: `Some(on)`, or `None` for auto (unset,
    /// empty, `auto`, or else, with a warning, text that is none of these).
    pub fn flag_or_auto(&self, text: Option<&str>) -> Reading<Option<bool>> {
        match text.map(str::trim) {
            None | Some("" | "auto") => Reading::fine(None),
            Some(t) => match kind::flag(t) {
                Some(on) => Reading::fine(Some(on)),
                None => Reading {
                    value: None,
                    warning: Some(format!(
                        "{}={:?} is not valid (expected 0, 1 or auto); using auto",
                        self.name,
                        text.unwrap_or_default()
                    )),
                },
            },
        }
    }

    /// A word setting's value: one of its words, or `None` for the default
    /// (unset, empty, or else, with a warning, text that is not one of them).
    pub fn word(&self, text: Option<&str>) -> Reading<Option<&'static str>> {
        let Kind::Word(words) = self.kind else {
            return Reading::fine(None);
        };
        match text.map(str::trim) {
            None | Some("") => Reading::fine(None),
            Some(t) => match words.iter().find(|w| **w == t) {
                Some(w) => Reading::fine(Some(*w)),
                None => Reading {
                    value: None,
                    warning: Some(format!(
                        "{}={:?} is not valid (expected {}); using {}",
                        self.name,
                        text.unwrap_or_default(),
                        words.join(", "),
                        self.default_text()
                    )),
                },
            },
        }
    }

    /// A signed setting's value, or else 0, with a warning. Empty text
    /// counts as unset.
    pub fn signed(&self, text: Option<&str>) -> Reading<i64> {
        match text.map(str::trim) {
            None | Some("") => Reading::fine(0),
            Some(t) => match t.parse() {
                Ok(v) => Reading::fine(v),
                Err(_) => Reading {
                    value: 0,
                    warning: Some(format!(
                        "{}={:?} is not valid (expected a whole number); using 0",
                        self.name,
                        text.unwrap_or_default()
                    )),
                },
            },
        }
    }

    /// The default as the documentation shows it: `1M`, `3000`, `0`, `auto`.
    pub fn default_text(&self) -> String {
        match self.default {
            DefaultValue::Number(v) => match self.kind {
                Kind::Size { .. } => show_size(v),
                _ => v.to_string(),
            },
            DefaultValue::Flag(on) => u8::from(on).to_string(),
            DefaultValue::Words(w) => w.to_string(),
        }
    }
}

/// The setting named `name`, if the table has one.
pub fn find(name: &str) -> Option<&'static Setting> {
    ALL.iter().copied().find(|s| s.name == name)
}

/// The table of settings as `docs/probe.md` shows it (Markdown, one row
/// per setting, in the order of [`ALL`]).
pub fn docs_table() -> String {
    let mut out = String::from(
        "| variable | default | valid values | meaning |\n\
         |----------|---------|--------------|---------|\n",
    );
    for s in ALL {
        let default = match s.default_text() {
            d if d.is_empty() => String::new(),
            // A word default is code when it is one of the setting's words.
            d if matches!(s.default, DefaultValue::Words(_))
                && !matches!(s.kind, Kind::Word(words) if words.contains(&d.as_str())) =>
            {
                d
            }
            d => format!("`{d}`"),
        };
        let who = match s.set_by {
            SetBy::User => "",
            SetBy::Hark => "**set by Hark**, not by users: ",
            SetBy::Tests => "**for tests only**: ",
        };
        out.push_str(&format!(
            "| `{}` | {default} | {} | {who}{} |\n",
            s.name,
            s.kind.valid_markdown(),
            s.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up setting of `kind` with `default`.
    fn setting(kind: Kind, default: DefaultValue) -> Setting {
        Setting {
            name: "HARK_X",
            kind,
            default,
            set_by: SetBy::User,
            doc: "",
        }
    }

    /// For each text: `check`'s error (or "ok"), then the value read and
    /// its warning.
    fn check(s: Setting, cases: &[(&str, &str, &str, Option<&str>)]) {
        for (text, checked, value, warning) in cases {
            let got = match s.check(text) {
                Ok(()) => "ok".to_string(),
                Err(e) => e,
            };
            assert_eq!(&got, checked, "check {text:?}");
            let reading = match s.kind {
                Kind::Size { .. } | Kind::Count { .. } | Kind::Millis { .. } => {
                    let r = s.number(Some(text));
                    (s.kind.show(r.value), r.warning)
                }
                Kind::Signed => {
                    let r = s.signed(Some(text));
                    (r.value.to_string(), r.warning)
                }
                Kind::Flag => {
                    let r = s.flag(Some(text));
                    (r.value.to_string(), r.warning)
                }
                Kind::FlagOrAuto => {
                    let r = s.flag_or_auto(Some(text));
                    (format!("{:?}", r.value), r.warning)
                }
                Kind::Word(_) => {
                    let r = s.word(Some(text));
                    (format!("{:?}", r.value), r.warning)
                }
                Kind::Text => (text.to_string(), None),
            };
            assert_eq!(
                (reading.0.as_str(), reading.1.as_deref()),
                (*value, *warning),
                "read {text:?}"
            );
        }
    }

    #[test]
    fn sizes_take_units_and_are_clamped_or_defaulted() {
        let s = setting(
            Kind::Size {
                min: 4 << 10,
                max: 64 << 20,
            },
            DefaultValue::Number(1 << 20),
        );
        let range = "a size from 4K to 64M (e.g. 256K, 4M)";
        let bad = |t: &str| format!("`{t}` is not a valid HARK_X: it must be {range}");
        check(
            s,
            &[
                ("65536", "ok", "64K", None),
                ("2MiB", "ok", "2M", None),
                (" 4k ", "ok", "4K", None),
                (
                    "1",
                    &bad("1"),
                    "4K",
                    Some("HARK_X=\"1\" is not valid (expected 4K to 64M); using 4K"),
                ),
                (
                    "1000M",
                    &bad("1000M"),
                    "64M",
                    Some("HARK_X=\"1000M\" is not valid (expected 4K to 64M); using 64M"),
                ),
                (
                    "abc",
                    &bad("abc"),
                    "1M",
                    Some("HARK_X=\"abc\" is not valid (expected 4K to 64M); using 1M"),
                ),
                (
                    "-5",
                    &bad("-5"),
                    "1M",
                    Some("HARK_X=\"-5\" is not valid (expected 4K to 64M); using 1M"),
                ),
                (
                    "0",
                    &bad("0"),
                    "1M",
                    Some("HARK_X=\"0\" is not valid (expected 4K to 64M); using 1M"),
                ),
                (
                    "17592186044417M",
                    &bad("17592186044417M"),
                    "1M",
                    Some("HARK_X=\"17592186044417M\" is not valid (expected 4K to 64M); using 1M"),
                ),
                (
                    "",
                    &bad(""),
                    "1M",
                    Some("HARK_X=\"\" is not valid (expected 4K to 64M); using 1M"),
                ),
            ],
        );
        assert_eq!(s.number(None), Reading::fine(1 << 20));
        assert_eq!(s.number_or(None, 7), Reading::fine(7));
    }

    #[test]
    fn counts_are_whole_numbers_in_range() {
        let s = setting(Kind::Count { min: 2, max: 4096 }, DefaultValue::Number(8));
        let bad = |t: &str| {
            format!("`{t}` is not a valid HARK_X: it must be a whole number from 2 to 4096")
        };
        check(
            s,
            &[
                ("16", "ok", "16", None),
                (
                    "0",
                    &bad("0"),
                    "8",
                    Some("HARK_X=\"0\" is not valid (expected 2 to 4096); using 8"),
                ),
                (
                    "-1",
                    &bad("-1"),
                    "8",
                    Some("HARK_X=\"-1\" is not valid (expected 2 to 4096); using 8"),
                ),
                (
                    "1",
                    &bad("1"),
                    "2",
                    Some("HARK_X=\"1\" is not valid (expected 2 to 4096); using 2"),
                ),
                (
                    "9999",
                    &bad("9999"),
                    "4096",
                    Some("HARK_X=\"9999\" is not valid (expected 2 to 4096); using 4096"),
                ),
                (
                    "4K",
                    &bad("4K"),
                    "8",
                    Some("HARK_X=\"4K\" is not valid (expected 2 to 4096); using 8"),
                ),
            ],
        );
    }

    #[test]
    fn durations_are_milliseconds_and_zero_only_where_valid() {
        let s = setting(
            Kind::Millis {
                min: 1,
                max: 3_600_000,
            },
            DefaultValue::Number(60_000),
        );
        let bad = |t: &str| {
            format!(
                "`{t}` is not a valid HARK_X: it must be a whole number of ms from 1 to 3600000"
            )
        };
        check(
            s,
            &[
                ("5000", "ok", "5000 ms", None),
                (
                    "0",
                    &bad("0"),
                    "60000 ms",
                    Some("HARK_X=\"0\" is not valid (expected 1 ms to 3600000 ms); using 60000 ms"),
                ),
                (
                    "1h",
                    &bad("1h"),
                    "60000 ms",
                    Some(
                        "HARK_X=\"1h\" is not valid (expected 1 ms to 3600000 ms); using 60000 ms",
                    ),
                ),
            ],
        );
        let zero = setting(
            Kind::Millis {
                min: 0,
                max: 3_600_000,
            },
            DefaultValue::Number(1000),
        );
        check(zero, &[("0", "ok", "0 ms", None)]);
    }

    #[test]
    fn signed_numbers_may_be_negative() {
        let s = setting(Kind::Signed, DefaultValue::Number(0));
        check(
            s,
            &[
                ("-250", "ok", "-250", None),
                ("7", "ok", "7", None),
                (
                    "x",
                    "`x` is not a valid HARK_X: it must be a whole number (it may be negative)",
                    "0",
                    Some("HARK_X=\"x\" is not valid (expected a whole number); using 0"),
                ),
            ],
        );
    }

    #[test]
    fn flags_take_the_usual_words_and_empty_is_unset() {
        let s = setting(Kind::Flag, DefaultValue::Flag(true));
        let range = "1, yes, true or on; 0, no, false or off";
        check(
            s,
            &[
                ("0", "ok", "false", None),
                (" off ", "ok", "false", None),
                ("YES", "ok", "true", None),
                ("", "ok", "true", None),
                (
                    "2",
                    &format!("`2` is not a valid HARK_X: it must be {range}"),
                    "true",
                    Some("HARK_X=\"2\" is not valid (expected 0 or 1); using 1"),
                ),
                (
                    "maybe",
                    &format!("`maybe` is not a valid HARK_X: it must be {range}"),
                    "true",
                    Some("HARK_X=\"maybe\" is not valid (expected 0 or 1); using 1"),
                ),
            ],
        );
    }

    #[test]
    fn flags_or_auto_take_auto_too() {
        let s = setting(Kind::FlagOrAuto, DefaultValue::Words("auto"));
        check(
            s,
            &[
                ("1", "ok", "Some(true)", None),
                ("0", "ok", "Some(false)", None),
                ("auto", "ok", "None", None),
                ("", "ok", "None", None),
                ("7", "`7` is not a valid HARK_X: it must be 1, yes, true or on; 0, no, false or off; or auto", "None", Some("HARK_X=\"7\" is not valid (expected 0, 1 or auto); using auto")),
            ],
        );
    }

    #[test]
    fn words_are_one_of_a_list() {
        let s = setting(Kind::Word(&["tree", "gather"]), DefaultValue::Words("tree"));
        check(
            s,
            &[
                ("gather", "ok", "Some(\"gather\")", None),
                ("", "ok", "None", None),
                (
                    "ring",
                    "`ring` is not a valid HARK_X: it must be one of: tree, gather",
                    "None",
                    Some("HARK_X=\"ring\" is not valid (expected tree, gather); using tree"),
                ),
            ],
        );
    }

    #[test]
    fn text_is_anything() {
        check(
            setting(Kind::Text, DefaultValue::Words("")),
            &[("unix:/x", "ok", "unix:/x", None)],
        );
    }

    #[test]
    fn every_default_is_valid_and_every_name_unique() {
        for s in ALL {
            assert!(s.name.starts_with("HARK_"), "{}", s.name);
            assert_eq!(
                find(s.name).map(|f| f.name),
                Some(s.name),
                "{} twice",
                s.name
            );
            assert!(
                !s.doc.contains('\n') && !s.doc.contains('|'),
                "{}: one line",
                s.name
            );
            match (s.kind, s.default) {
                (_, DefaultValue::Number(_)) | (Kind::Flag, DefaultValue::Flag(_)) => {
                    assert_eq!(s.check(&s.default_text()), Ok(()), "{}", s.name)
                }
                (_, DefaultValue::Words(_)) => {}
                (k, d) => panic!("{}: a {k:?} with default {d:?}", s.name),
            }
        }
    }
}
