//! ARCHITECTURE.md makes claims a script can check; each is checked here,
//! so the map cannot drift from the tree unnoticed:
//!
//! - every path it cites exists;
//! - each crate depends only on the Hark crates its "Floors" table allows;
//! - the CLI has no `unsafe`; crates without `unsafe` forbid it;
//! - only `hark-mpi` and the probe resolve symbols at run time (besides
//!   the board's plugin loader and the user API);
//! - the analysis crates open no file and no socket;
//! - only boundary crates derive `Serialize`;
//! - no source file over 1,500 lines, no function over 150.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn map() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the root")
}

/// Every `.rs` file below `dir`, skipping build output.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target") {
                    todo.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The workspace's crates: directory name → (package name, Hark crates it
/// depends on, build and normal dependencies only).
fn crates() -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        let manifest = e.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let mut name = String::new();
        let mut deps = Vec::new();
        let mut section = String::new();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.trim_matches(['[', ']']).to_string();
            } else if section == "package" && line.starts_with("name") {
                name = line.split('"').nth(1).unwrap_or_default().to_string();
            } else if (section == "dependencies" || section == "build-dependencies")
                && line.starts_with("hark-")
            {
                let dep = line.split(['.', ' ', '=']).next().unwrap().to_string();
                if !deps.contains(&dep) {
                    deps.push(dep);
                }
            }
        }
        let dir = e.file_name().to_string_lossy().into_owned();
        out.insert(dir, (name, deps));
    }
    out
}

#[test]
fn every_cited_path_exists() {
    let root = root();
    let mut cited = 0;
    let mut missing = Vec::new();
    for (i, part) in map().split('`').enumerate() {
        // Odd parts are inside backticks; keep those that look like repo paths.
        let looks_like_path = part.contains('/')
            && !part.contains('*')
            && !part.contains(' ')
            && ["crates/", "docs/", "include/", "scripts/", "tests/"]
                .iter()
                .any(|p| part.starts_with(p));
        if i % 2 == 1 && looks_like_path {
            cited += 1;
            if !root.join(part).exists() {
                missing.push(part.to_string());
            }
        }
    }
    assert!(
        cited >= 10,
        "expected ARCHITECTURE.md to cite paths, found {cited}"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md cites paths that do not exist: {missing:?}"
    );
}

/// The "Floors" table: `| hark-x | hark-a, hark-b |` rows, a crate and the
/// Hark crates it may depend on.
fn floors() -> BTreeMap<String, Vec<String>> {
    let map = map();
    let section = map
        .split("\n## ")
        .find(|s| s.starts_with("Floors"))
        .expect("ARCHITECTURE.md has a \"## Floors\" section");
    section
        .lines()
        .filter(|l| l.starts_with("| `hark-"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            let may = cells[2]
                .split(',')
                .map(|d| d.trim().trim_matches('`').to_string())
                .filter(|d| d.starts_with("hark-"))
                .collect();
            (name, may)
        })
        .collect()
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let floors = floors();
    let crates = crates();
    let edges: usize = crates.values().map(|(_, deps)| deps.len()).sum();
    assert!(
        floors.len() >= 20 && edges >= 40,
        "read {} floors and {edges} dependencies: the table or the manifests were not understood",
        floors.len()
    );
    let mut wrong = Vec::new();
    for (dir, (name, deps)) in crates {
        let Some(may) = floors.get(&name) else {
            wrong.push(format!("{name} (crates/{dir}) is not in the Floors table"));
            continue;
        };
        for d in deps {
            if !may.contains(&d) {
                wrong.push(format!(
                    "{name} depends on {d}, which its floor does not allow"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Whether `text` has the keyword `unsafe` outside comments and strings'
/// obvious cases (lint attributes name it too).
fn uses_unsafe(text: &str) -> bool {
    text.lines().any(|l| {
        let code = l.split("//").next().unwrap_or("");
        code.split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| w == "unsafe")
            && !code.contains("unsafe_code")
            && !code.contains("unsafe_op_in_unsafe_fn")
    })
}

#[test]
fn the_cli_has_no_unsafe_and_crates_without_unsafe_forbid_it() {
    let mut wrong = Vec::new();
    for dir in crates().keys() {
        let src = root().join("crates").join(dir).join("src");
        let has = rust_files(&src)
            .iter()
            .any(|f| uses_unsafe(&std::fs::read_to_string(f).unwrap()));
        if dir == "cli" && has {
            wrong.push("crates/cli uses unsafe".to_string());
        }
        if !has {
            let lib = ["lib.rs", "main.rs"]
                .iter()
                .map(|f| src.join(f))
                .find(|p| p.exists());
            let forbids = lib.is_some_and(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .contains("#![forbid(unsafe_code)]")
            });
            if !forbids {
                wrong.push(format!("crates/{dir} has no unsafe but does not forbid it"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn only_the_mpi_layer_and_the_probe_resolve_symbols_at_run_time() {
    let mut wrong = Vec::new();
    for dir in crates().keys() {
        if ["mpi", "probe", "user", "board"].contains(&dir.as_str()) {
            continue;
        }
        for f in rust_files(&root().join("crates").join(dir).join("src")) {
            let text = std::fs::read_to_string(&f).unwrap();
            if text.contains("dlsym") || text.contains("dlopen") {
                wrong.push(f.display().to_string());
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "resolve symbols at run time outside crates/mpi and crates/probe: {wrong:?}"
    );
}

/// The length in lines of each `fn` in `text` (a brace count that skips
/// comments, strings and character literals).
fn function_lengths(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let Some(at) = t.find("fn ") else { continue };
        let head = &t[..at];
        let is_fn = head.split_whitespace().all(|w| {
            [
                "pub",
                "pub(crate)",
                "pub(super)",
                "const",
                "async",
                "unsafe",
                "extern",
                "\"C\"",
            ]
            .contains(&w)
        });
        if !is_fn {
            continue;
        }
        let name: String = t[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut started) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            let code = strip(l);
            if !started && code.trim_end().ends_with(';') {
                break;
            }
            for c in code.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        started = true
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if started && depth <= 0 {
                out.push((i + 1, name.clone(), j - i + 1));
                break;
            }
        }
    }
    out
}

/// `line` without its comment, string contents and character literals.
fn strip(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A character literal ('{', '\n') or a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    let n = rest.find('\'').map_or(0, |k| k + 1);
                    for _ in 0..n.max(2) {
                        chars.next();
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[test]
fn no_file_over_1500_lines_and_no_function_over_150() {
    let mut wrong = Vec::new();
    for f in rust_files(&root().join("crates")) {
        let text = std::fs::read_to_string(&f).unwrap();
        let shown = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
        let n = text.lines().count();
        if n > 1500 && !shown.contains("/tests/") {
            wrong.push(format!("{shown}: {n} lines"));
        }
        for (line, name, len) in function_lengths(&text) {
            if len > 150 {
                wrong.push(format!("{shown}:{line}: fn {name} is {len} lines"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The text of every source file of crate directory `dir`.
fn sources(dir: &str) -> Vec<(PathBuf, String)> {
    rust_files(&root().join("crates").join(dir).join("src"))
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect()
}

#[test]
fn analysis_is_a_function_of_its_input() {
    let io = [
        "std::fs",
        "std::net",
        "std::os::unix::net",
        "libc::open",
        "File::open",
        "File::create",
    ];
    let mut wrong = Vec::new();
    for dir in ["analyses", "engine", "model", "wire"] {
        for (f, text) in sources(dir) {
            for word in io {
                if text.contains(word) {
                    wrong.push(format!("{} uses {word}", f.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn only_boundary_crates_derive_serialize() {
    let boundary = ["model", "live", "analyses", "engine"];
    let mut wrong = Vec::new();
    for dir in crates().keys() {
        if boundary.contains(&dir.as_str()) {
            continue;
        }
        for (f, text) in sources(dir) {
            if text.contains("Serialize)") || text.contains("Serialize,") {
                wrong.push(f.display().to_string());
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "Serialize derived outside the boundary crates: {wrong:?}"
    );
}

/// Whether `text` names an issue by number: the word, a space, a digit.
fn names_an_issue(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.match_indices("issue ").any(|(i, m)| {
        lower[i + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

#[test]
fn code_and_docs_say_what_is_not_which_issue_asked() {
    let mut files = rust_files(&root().join("crates"));
    for dir in ["docs", "scripts"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            files.push(e.path());
        }
    }
    files.extend(["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"].map(|f| root().join(f)));
    let wrong: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .is_ok_and(|t| names_an_issue(&t) || t.contains(&["the", "seed"].join(" ")))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        wrong.is_empty(),
        "name an issue by number, or cite a paper as a seed: {wrong:?}"
    );
}
