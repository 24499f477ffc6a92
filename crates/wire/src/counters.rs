//! The performance counters a probe can read, by number.
//!
//! Counter events ([`crate::op::COUNTER_SLICE`], [`crate::op::COUNTER_REGION`],
//! [`crate::op::COUNTER_REFUSED`]) name their counter by its index in
//! [`EVENTS`], so no definition frame is needed: the table is part of the
//! format, and new counters are appended only (with a version bump).
//! Names are those `perf list` prints.

/// `perf_event_attr.type` of the processor's generic hardware events.
pub const TYPE_HARDWARE: u32 = 0;
/// `perf_event_attr.type` of the kernel's software events.
pub const TYPE_SOFTWARE: u32 = 1;

/// One counter: its `perf list` name and its `perf_event_attr` type and config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterEvent {
    /// The name `perf list` gives it.
    pub name: &'static str,
    /// [`TYPE_HARDWARE`] or [`TYPE_SOFTWARE`].
    pub kind: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
}

const fn sw(name: &'static str, config: u64) -> CounterEvent {
    CounterEvent {
        name,
        kind: TYPE_SOFTWARE,
        config,
    }
}

const fn hw(name: &'static str, config: u64) -> CounterEvent {
    CounterEvent {
        name,
        kind: TYPE_HARDWARE,
        config,
    }
}

/// Every counter, numbered by position (append only).
pub const EVENTS: &[CounterEvent] = &[
    sw("task-clock", 1),
    sw("context-switches", 3),
    sw("cpu-migrations", 4),
    sw("page-faults", 2),
    sw("minor-faults", 5),
    sw("major-faults", 6),
    hw("cycles", 0),
    hw("instructions", 1),
    hw("cache-references", 2),
    hw("cache-misses", 3),
    hw("branch-misses", 5),
    hw("branch-instructions", 4),
    hw("bus-cycles", 6),
    hw("stalled-cycles-frontend", 7),
    hw("stalled-cycles-backend", 8),
    hw("ref-cycles", 9),
    sw("cpu-clock", 0),
    sw("alignment-faults", 7),
    sw("emulation-faults", 8),
];

/// The counters read when none are chosen: the software ones, always
/// available, then the hardware ones, where the processor's PMU is exposed.
pub const DEFAULT: &[&str] = &[
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "minor-faults",
    "major-faults",
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branch-misses",
];

/// The number of the counter `perf list` calls `name`.
pub fn number(name: &str) -> Option<u16> {
    EVENTS.iter().position(|e| e.name == name).map(|i| i as u16)
}

/// The name of counter `number`, `"unknown"` past the table's end.
pub fn name(number: u16) -> &'static str {
    EVENTS.get(number as usize).map_or("unknown", |e| e.name)
}

/// The counters of a `HARK_COUNTERS` / `--counters` list: comma-separated
/// `perf list` names, `default` for [`DEFAULT`], `none` or `0` for none.
/// Unknown names are returned apart, for a warning that names them.
pub fn parse_list(list: &str) -> (Vec<u16>, Vec<String>) {
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let numbers: Vec<u16> = match word {
            "default" => DEFAULT.iter().filter_map(|n| number(n)).collect(),
            "none" | "0" => Vec::new(),
            _ => match number(word) {
                Some(n) => vec![n],
                None => {
                    unknown.push(word.to_string());
                    continue;
                }
            },
        };
        for n in numbers {
            if !known.contains(&n) {
                known.push(n);
            }
        }
    }
    (known, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_name_counters_as_perf_does() {
        let (k, u) = parse_list("default");
        assert_eq!(k.len(), DEFAULT.len());
        assert!(u.is_empty());
        let (k, u) = parse_list("page-faults, cycles,page-faults,frobs");
        assert_eq!(
            k,
            [number("page-faults").unwrap(), number("cycles").unwrap()]
        );
        assert_eq!(u, ["frobs"]);
        assert!(parse_list("none").0.is_empty());
        assert_eq!(name(3), "page-faults");
        assert_eq!(name(999), "unknown");
    }
}
