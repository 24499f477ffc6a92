//! What the probe records of the functions a compiler instrumented
//! (`-finstrument-functions`): the filter file (`HARK_FILTER`) and the
//! throttling rule (`HARK_THROTTLE`). The probe reads both once at start;
//! `hark run` reads them too, before the program starts, so that a bad
//! filter file is refused with its file, line and what is wrong.
//!
//! The filter file takes Score-P's syntax for region names:
//!
//! ```text
//! SCOREP_REGION_NAMES_BEGIN
//!   EXCLUDE *
//!   INCLUDE main solve*
//!   EXCLUDE MANGLED _Z4tinyi
//! SCOREP_REGION_NAMES_END
//! ```
//!
//! Rules are read in order and the last one whose pattern matches decides
//! (a function no rule matches is recorded). A pattern is a shell glob
//! (`*`, `?`, `[a-z]`, `[!a-z]`) matched against the whole demangled name
//! (`solve(int, double)`), or the mangled one after `MANGLED`. `#` starts a
//! comment.
//!
//! Source-file rules go in a `SCOREP_FILE_NAMES_BEGIN` ...
//! `SCOREP_FILE_NAMES_END` block, as in Score-P: `EXCLUDE`/`INCLUDE` globs
//! matched against the whole path of the file a function is defined in (as
//! its debug information names it; `*/solver.cpp`), the last matching rule
//! deciding. A function is left out when its file is or its name is. A
//! function whose file is not known (no debug information) meets no file
//! rule.
//!
//! ```
//! use hark_settings::{Filter, Throttle};
//!
//! let f = Filter::parse("SCOREP_REGION_NAMES_BEGIN\n EXCLUDE tiny*\nSCOREP_REGION_NAMES_END\n").unwrap();
//! assert!(f.excludes("tiny(int)", "_Z4tinyi"));
//! assert!(!f.excludes("main", "main"));
//! assert_eq!(Throttle::parse("100000,10"), Ok(Some(Throttle { calls: 100_000, ns_per_call: 10_000 })));
//! assert_eq!(Throttle::parse("off"), Ok(None));
//! ```

/// A filter file's rules (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    include: bool,
    mangled: bool,
    /// A source-file rule (else a region-name one).
    file: bool,
    pattern: String,
}

/// Which kind of block a line is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Regions,
    Files,
}

impl Block {
    fn begin(self) -> &'static str {
        match self {
            Block::Regions => "SCOREP_REGION_NAMES_BEGIN",
            Block::Files => "SCOREP_FILE_NAMES_BEGIN",
        }
    }

    fn end(self) -> &'static str {
        match self {
            Block::Regions => "SCOREP_REGION_NAMES_END",
            Block::Files => "SCOREP_FILE_NAMES_END",
        }
    }

    /// The block a begin or end word opens or closes, and whether it opens.
    fn of(word: &str) -> Option<(Block, bool)> {
        [Block::Regions, Block::Files].into_iter().find_map(|b| {
            (word == b.begin())
                .then_some((b, true))
                .or_else(|| (word == b.end()).then_some((b, false)))
        })
    }
}

impl Filter {
    /// Reads the filter file at `path`; the error names the file, the line
    /// and what is wrong there.
    pub fn read(path: &str) -> Result<Filter, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!("cannot read the filter file {path}: {e}; give a readable file of Score-P region-name rules")
        })?;
        Filter::parse(&text).map_err(|(line, what)| format!("{path}:{line}: {what}"))
    }

    /// Parses a filter file's text; the error is the line (from 1) and
    /// what is wrong there.
    pub fn parse(text: &str) -> Result<Filter, (usize, String)> {
        let mut rules = Vec::new();
        // The block open, and the line it was opened on.
        let mut inside: Option<(Block, usize)> = None;
        // The rule that later patterns on the following lines extend.
        let mut current: Option<(bool, bool)> = None;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace().peekable();
            while let Some(w) = words.next() {
                if let Some((block, opens)) = Block::of(w) {
                    match (inside, opens) {
                        (None, true) => inside = Some((block, n)),
                        (Some((open, _)), false) if open == block => inside = None,
                        (Some((open, at)), _) => {
                            return Err((n, format!("{w} inside the {} block opened on line {at}; close it with {} first", open.begin(), open.end())))
                        }
                        (None, false) => {
                            return Err((n, format!("{w} without a {} before it", block.begin())))
                        }
                    }
                    current = None;
                    continue;
                }
                let Some((block, _)) = inside else {
                    return Err((n, format!("`{w}` outside a SCOREP_REGION_NAMES_BEGIN ... SCOREP_REGION_NAMES_END or SCOREP_FILE_NAMES_BEGIN ... SCOREP_FILE_NAMES_END block")));
                };
                match w {
                    "EXCLUDE" | "INCLUDE" => {
                        let mangled = words.peek() == Some(&"MANGLED");
                        if mangled {
                            if block == Block::Files {
                                return Err((
                                    n,
                                    "MANGLED in a file block: it applies to region names only"
                                        .into(),
                                ));
                            }
                            words.next();
                        }
                        current = Some((w == "INCLUDE", mangled));
                    }
                    pattern => {
                        let Some((include, mangled)) = current else {
                            return Err((n, format!("pattern `{pattern}` before any EXCLUDE or INCLUDE; start the rule with one of them")));
                        };
                        check_glob(pattern).map_err(|e| (n, e))?;
                        rules.push(Rule {
                            include,
                            mangled,
                            file: block == Block::Files,
                            pattern: pattern.to_string(),
                        });
                    }
                }
            }
        }
        if let Some((block, at)) = inside {
            return Err((
                at,
                format!(
                    "{} is never closed; end the block with {}",
                    block.begin(),
                    block.end()
                ),
            ));
        }
        Ok(Filter { rules })
    }

    /// Whether the function named `name` (demangled) and `mangled` is left
    /// out: the last rule that matches decides; none, and it is recorded.
    pub fn excludes(&self, name: &str, mangled: &str) -> bool {
        self.rules
            .iter()
            .rev()
            .filter(|r| !r.file)
            .find(|r| glob(&r.pattern, if r.mangled { mangled } else { name }))
            .is_some_and(|r| !r.include)
    }

    /// Whether functions defined in the source file at `path` are left out
    /// by the file rules: the last that matches decides.
    pub fn excludes_file(&self, path: &str) -> bool {
        self.rules
            .iter()
            .rev()
            .filter(|r| r.file)
            .find(|r| glob(&r.pattern, path))
            .is_some_and(|r| !r.include)
    }

    /// Whether the filter has source-file rules (they need each function's
    /// file, from debug information).
    pub fn has_file_rules(&self) -> bool {
        self.rules.iter().any(|r| r.file)
    }

    /// Whether the filter has no rule (it excludes nothing).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// An unclosed `[` is the one malformed glob.
fn check_glob(pattern: &str) -> Result<(), String> {
    let b = pattern.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' {
            match b[i + 1..].iter().skip(1).position(|&c| c == b']') {
                Some(at) => i += at + 2,
                None => {
                    return Err(format!(
                        "pattern `{pattern}`: `[` at character {} is never closed by `]`",
                        i + 1
                    ))
                }
            }
        }
        i += 1;
    }
    Ok(())
}

/// Whether `text` matches the shell glob `pattern` as a whole: `*` any
/// run of characters, `?` one, `[abc]`/`[a-z]`/`[!a]` one of a set.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it now stands for.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(p, pi, t[ti]) {
                        if hit {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == b'[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                c if c == t[ti] => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Whether `c` is in the class at `p[at] == b'['`, and where the pattern
/// goes on after it; `None` when the class is not closed.
fn class(p: &[u8], at: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        let &x = p.get(i)?;
        if x == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&y| y != b']') {
            hit |= (x..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= x == c;
            i += 1;
        }
    }
}

/// When the probe stops recording a function (`HARK_THROTTLE`): after
/// more than `calls` calls, if its calls took less than `ns_per_call` each
/// on average (TAU's rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Throttle {
    /// Calls before a function may be throttled.
    pub calls: u64,
    /// Inclusive ns per call under which it is.
    pub ns_per_call: u64,
}

impl Throttle {
    /// TAU's default: more than 100,000 calls at under 10 µs each.
    pub const DEFAULT: Throttle = Throttle {
        calls: 100_000,
        ns_per_call: 10_000,
    };

    /// `calls,µs` or `off` (`None`); empty is the default.
    pub fn parse(text: &str) -> Result<Option<Throttle>, String> {
        let t = text.trim();
        if t.is_empty() {
            return Ok(Some(Throttle::DEFAULT));
        }
        if matches!(t, "off" | "0" | "no" | "false") {
            return Ok(None);
        }
        let bad = || {
            format!("`{t}` is not a valid HARK_THROTTLE: it must be `off` or CALLS,MICROSECONDS (e.g. 100000,10: a function called more than 100000 times at under 10 µs per call is no longer recorded)")
        };
        let (c, us) = t.split_once(',').ok_or_else(bad)?;
        let calls: u64 = c.trim().parse().map_err(|_| bad())?;
        let us: f64 = us.trim().parse().map_err(|_| bad())?;
        if !(us.is_finite() && us >= 0.0) {
            return Err(bad());
        }
        Ok(Some(Throttle {
            calls,
            ns_per_call: (us * 1000.0).round() as u64,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_the_shell_does() {
        for (p, t, m) in [
            ("*", "", true),
            ("tiny*", "tiny(int)", true),
            ("*tiny*", "ns::tiny(int)", true),
            ("tiny", "tiny(int)", false),
            ("t?ny(int)", "tiny(int)", true),
            ("[a-c]x", "bx", true),
            ("[!a-c]x", "bx", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
        ] {
            assert_eq!(glob(p, t), m, "{p} on {t}");
        }
    }

    #[test]
    fn the_last_matching_rule_decides() {
        let f = Filter::parse(
            "# keep only main and solve\nSCOREP_REGION_NAMES_BEGIN\n EXCLUDE *\n INCLUDE main\n   solve*\n EXCLUDE MANGLED _Z5solvev\nSCOREP_REGION_NAMES_END\n",
        )
        .unwrap();
        assert!(!f.excludes("main", "main"));
        assert!(!f.excludes("solve(int)", "_Z5solvei"));
        assert!(f.excludes("solve()", "_Z5solvev"));
        assert!(f.excludes("tiny(int)", "_Z4tinyi"));
        assert!(!Filter::default().excludes("x", "x"));
    }

    #[test]
    fn file_rules_leave_out_the_functions_of_the_files_they_name() {
        let f = Filter::parse(
            "SCOREP_FILE_NAMES_BEGIN\n EXCLUDE */vendor/*\n INCLUDE */vendor/keep.c\nSCOREP_FILE_NAMES_END\nSCOREP_REGION_NAMES_BEGIN\n EXCLUDE tiny*\nSCOREP_REGION_NAMES_END\n",
        )
        .unwrap();
        assert!(f.has_file_rules());
        assert!(f.excludes_file("/src/vendor/lib.c"));
        assert!(!f.excludes_file("/src/vendor/keep.c"));
        assert!(!f.excludes_file("/src/main.c"));
        // File rules are not name rules, nor the other way round.
        assert!(!f.excludes("lib_fn", "lib_fn"));
        assert!(f.excludes("tiny(int)", "_Z4tinyi"));
        assert!(!f.excludes_file("tiny.c"));
        assert!(!Filter::parse("").unwrap().has_file_rules());
    }

    #[test]
    fn bad_files_say_the_line_and_what_is_wrong() {
        for (text, line, what) in [
            ("EXCLUDE x\n", 1, "outside"),
            (
                "SCOREP_REGION_NAMES_BEGIN\n x\nSCOREP_REGION_NAMES_END\n",
                2,
                "before any EXCLUDE",
            ),
            ("SCOREP_REGION_NAMES_BEGIN\n EXCLUDE a\n", 1, "never closed"),
            ("\nSCOREP_REGION_NAMES_END\n", 2, "without"),
            (
                "SCOREP_REGION_NAMES_BEGIN\n EXCLUDE [ab\nSCOREP_REGION_NAMES_END",
                2,
                "never closed by",
            ),
            ("SCOREP_FILE_NAMES_BEGIN\n EXCLUDE x\n", 1, "never closed"),
            (
                "SCOREP_FILE_NAMES_BEGIN\n EXCLUDE MANGLED x\nSCOREP_FILE_NAMES_END\n",
                2,
                "region names only",
            ),
            (
                "SCOREP_FILE_NAMES_BEGIN\nSCOREP_REGION_NAMES_END\n",
                2,
                "inside the SCOREP_FILE_NAMES_BEGIN block opened on line 1",
            ),
        ] {
            let (l, w) = Filter::parse(text).unwrap_err();
            assert_eq!(l, line, "{text:?}: {w}");
            assert!(w.contains(what), "{text:?}: {w}");
        }
    }

    #[test]
    fn throttle_settings_parse_or_say_what_they_should_be() {
        assert_eq!(Throttle::parse(""), Ok(Some(Throttle::DEFAULT)));
        assert_eq!(
            Throttle::parse("5, 2.5"),
            Ok(Some(Throttle {
                calls: 5,
                ns_per_call: 2500
            }))
        );
        assert!(Throttle::parse("5")
            .unwrap_err()
            .contains("CALLS,MICROSECONDS"));
        assert!(Throttle::parse("x,1").is_err());
    }
}
