//! `topology/<program>.dot`: who sent to whom, as a Graphviz graph, one file
//! per program. Nodes are ranks (with their host); an edge `i -> j` carries
//! the messages and bytes rank `i` sent to rank `j`, its width growing with
//! the bytes. The HTML report draws the same graph with `dot -Tsvg` when
//! Graphviz is installed ([`to_svg`]).

use crate::facts::cell;
use crate::units::{bytes, count};
use crate::{Error, Output};
use hark_model::{Program, Run};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The directory inside a run directory.
pub const DIR_NAME: &str = "topology";

/// The point-to-point topology of `p` in the DOT language.
pub fn render(p: &Program) -> String {
    let mut s = String::new();
    let n = crate::facts::ranks(p);
    let max_bytes = p
        .p2p
        .bytes
        .iter()
        .flatten()
        .copied()
        .max()
        .unwrap_or(0)
        .max(1);
    let _ = writeln!(
        s,
        "// Point-to-point topology of {}, written by Hark.",
        quote(&p.name)
    );
    let _ = writeln!(
        s,
        "// Edge i -> j: messages and bytes rank i sent to rank j."
    );
    let _ = writeln!(s, "digraph {} {{", quote(&p.name));
    // circo draws rings and neighbourhoods legibly up to a few dozen ranks;
    // sfdp stays fast for large ones.
    let layout = if n <= 64 { "circo" } else { "sfdp" };
    let _ = writeln!(
        s,
        "  graph [layout={layout}, label={}, labelloc=t, fontname=\"Helvetica\", bgcolor=\"transparent\"];",
        quote(&format!("{}: point-to-point traffic", p.name))
    );
    let _ = writeln!(
        s,
        "  node [shape=circle, style=filled, fillcolor=\"#dbe8f6\", color=\"#2f5d8a\", fontname=\"Helvetica\"];"
    );
    let _ = writeln!(
        s,
        "  edge [color=\"#2f5d8a\", fontname=\"Helvetica\", fontsize=9, arrowsize=0.6];"
    );
    for r in 0..n {
        let host = p.rank_info.get(r).map_or("", |i| i.host.as_str());
        let _ = writeln!(
            s,
            "  r{r} [label=\"{r}\", tooltip={}];",
            quote(&format!("rank {r} on {host}"))
        );
    }
    for i in 0..n {
        for j in 0..n {
            let m = cell(&p.p2p.messages, i, j);
            let b = cell(&p.p2p.bytes, i, j);
            if m == 0 && b == 0 {
                continue;
            }
            let width = 0.5 + 5.5 * (b as f64 / max_bytes as f64);
            let _ = writeln!(
                s,
                "  r{i} -> r{j} [label={}, penwidth={width:.2}, messages={m}, bytes={b}];",
                quote_lines(&[&format!("{} msgs", count(m)), &bytes(b)])
            );
        }
    }
    s.push_str("}\n");
    s
}

/// A DOT string literal holding `text` verbatim.
fn quote(text: &str) -> String {
    quote_lines(&[text])
}

/// A DOT string literal of several lines (joined by DOT's `\n` escape).
/// Measured names may hold anything; quotes and backslashes are escaped and
/// control characters dropped, so no name can end the literal early.
fn quote_lines(lines: &[&str]) -> String {
    let mut q = String::from("\"");
    for (k, line) in lines.iter().enumerate() {
        if k > 0 {
            q.push_str("\\n");
        }
        for c in line.chars() {
            match c {
                '\\' => q.push_str("\\\\"),
                '"' => q.push_str("\\\""),
                c if c.is_control() => {}
                c => q.push(c),
            }
        }
    }
    q.push('"');
    q
}

/// File names for the programs' DOT files: the program name made safe for a
/// file system, made unique by a `-2`, `-3`... suffix when two programs share
/// a name.
pub fn file_names(run: &Run) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in &run.programs {
        let mut base = crate::units::file_name_part(&p.name);
        if base.is_empty() || base.starts_with('.') {
            base.insert_str(0, "program");
        }
        let mut name = format!("{base}.dot");
        let mut k = 2;
        while names.contains(&name) {
            name = format!("{base}-{k}.dot");
            k += 1;
        }
        names.push(name);
    }
    names
}

/// How long Graphviz may take to lay out one graph before the report falls
/// back to its own drawing.
const DOT_TIMEOUT: Duration = Duration::from_secs(10);

/// The graph laid out by Graphviz as an inline `<svg>` element, or `None`
/// when `dot` is not installed, fails, or takes longer than ten seconds.
pub fn to_svg(dot_source: &str) -> Option<String> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // Feed and read on separate threads so a large graph cannot deadlock
    // on full pipes.
    let mut stdin = child.stdin.take()?;
    let source = dot_source.to_string();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(source.as_bytes());
    });
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).map(|_| out)
    });
    let deadline = Instant::now() + DOT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let _ = feeder.join();
    let out = reader.join().ok()?.ok()?;
    if !status.success() {
        return None;
    }
    // Keep the <svg> element only: the XML prolog and DOCTYPE do not belong
    // inside HTML.
    let start = out.find("<svg")?;
    Some(out[start..].trim_end().to_string())
}

/// Writes `topology/<program>.dot` for each program.
pub(crate) struct Dot;

impl Output for Dot {
    fn name(&self) -> &'static str {
        "dot"
    }

    fn write(&self, run: &Run, dir: &Path) -> Result<(), Error> {
        let topo = dir.join(DIR_NAME);
        std::fs::create_dir_all(&topo).map_err(|e| Error::io(&topo, e))?;
        for (p, name) in run.programs.iter().zip(file_names(run)) {
            crate::write_file(&topo.join(name), render(p).as_bytes())?;
        }
        Ok(())
    }
}
