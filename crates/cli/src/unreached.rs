//! Ranks whose probe could not reach `hark run`: what they said.
//!
//! A probe that cannot connect prints one line on its stderr, naming its
//! rank, host and what the connection met (`docs/faults.md`). Launchers
//! (`mpirun`, `mpiexec`, `srun`) gather every rank's stderr, on every
//! node, onto their own; `hark run` passes the launcher's stderr on byte
//! for byte and reads those lines as they go by, so that the summary can
//! say where a missing rank ran and why it is missing. The ranks' own
//! stderr is a pipe to the launcher already: nothing they see changes.

use hark_model::{Run, Unreached};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What the probe's warning says between the rank's host and the address.
const CANNOT_REACH: &str = " cannot reach the Hark server at ";
/// How the probe's warning ends.
const UNMEASURED: &str = "; this process runs unmeasured";
/// Most warnings kept: a job of a million unreachable ranks keeps a
/// bounded list (the summary names a few groups and counts the rest).
const KEPT: usize = 65_536;

/// The warnings read so far, filled while the launcher runs.
#[derive(Clone, Default)]
pub(crate) struct Said(Arc<Mutex<Vec<Unreached>>>, Arc<(Mutex<bool>, Condvar)>);

impl Said {
    /// A pipe for the launcher's stderr, and a thread that copies what
    /// comes out of it to `hark`'s stderr, keeping every probe warning it
    /// carries; the thread ends with the stream, when the launcher and
    /// whatever it left holding its stderr are gone. Give the launcher the
    /// writing end and drop every other copy of it.
    pub(crate) fn pass_on() -> std::io::Result<(Said, std::io::PipeWriter)> {
        let (read, write) = std::io::pipe()?;
        let said = Said::default();
        let keep = said.clone();
        std::thread::Builder::new()
            .name("hark-stderr".into())
            .spawn(move || {
                keep.copy(read);
                let (ended, wake) = &*keep.1;
                *hark_sync::lock(ended) = true;
                wake.notify_all();
            })?;
        Ok((said, write))
    }

    /// Waits, at most `limit`, for the stream to end, so that the last
    /// lines the launcher wrote are read (a daemon it left behind may hold
    /// the stream open: then what was read by `limit` is what counts).
    pub(crate) fn wait_end(&self, limit: Duration) {
        let (ended, wake) = &*self.1;
        let guard = hark_sync::lock(ended);
        let _ = wake.wait_timeout_while(guard, limit, |ended| !*ended);
    }

    fn copy(&self, from: impl Read) {
        let mut from = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match from.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            // Written first: the line reaches the terminal as it would have.
            let _ = std::io::stderr().lock().write_all(&line);
            if let Some(u) = parse(&String::from_utf8_lossy(&line)) {
                let mut kept = hark_sync::lock(&self.0);
                if kept.len() < KEPT {
                    kept.push(u);
                }
            }
        }
    }

    /// Puts what the probes said on the ranks of `run.missing` they name
    /// (a rank that did connect later, after a retry, is left out).
    pub(crate) fn attach(&self, run: &mut Run) {
        let said = hark_sync::lock(&self.0).clone();
        for m in &mut run.missing {
            for u in &said {
                let listed = m.ranks.binary_search(&u.rank).is_ok();
                if listed && !m.unreached.iter().any(|k| k.rank == u.rank) {
                    m.unreached.push(u.clone());
                }
            }
            m.unreached.sort_by_key(|u| u.rank);
        }
    }
}

/// The rank, host and reason of a probe's "cannot reach" warning anywhere
/// in `line` (a launcher may prefix it: `[1,1]<stderr>:`); `None` for any
/// other line, and for a process that named no rank (`pid N on …`).
fn parse(line: &str) -> Option<Unreached> {
    let line = line.trim_end();
    let body = line.strip_suffix(UNMEASURED)?;
    let (who, rest) = body.split_once(CANNOT_REACH)?;
    let who = &who[who.rfind("hark: ")? + "hark: ".len()..];
    let (rank, host) = who.strip_prefix("rank ")?.split_once(" on ")?;
    // "ADDR (REASON)": the address has no " (" in it.
    let (_, reason) = rest.split_once(" (")?;
    Some(Unreached {
        rank: rank.parse().ok()?,
        host: host.to_string(),
        reason: reason.strip_suffix(')')?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probes_warning_is_read_with_or_without_a_launchers_prefix() {
        let line = "hark: rank 1 on n2 cannot reach the Hark server at tcp:10.9.0.1:4100 \
                    (Connection refused (os error 111)); this process runs unmeasured\n";
        let u = parse(line).unwrap();
        assert_eq!((u.rank, u.host.as_str()), (1, "n2"));
        assert_eq!(u.reason, "Connection refused (os error 111)");
        let tagged = format!("[1,3]<stderr>:{}", line.replace("rank 1", "rank 3"));
        assert_eq!(parse(&tagged).unwrap().rank, 3);
        let any = line.replace("tcp:10.9.0.1:4100", "any of its addresses");
        assert_eq!(
            parse(&any).unwrap().reason,
            "Connection refused (os error 111)"
        );
    }

    #[test]
    fn other_lines_are_not_taken_for_it() {
        for line in [
            "",
            "hark: pid 7 on n2 cannot reach the Hark server at unix:/s (x); this process runs unmeasured",
            "rank 1 on n2 cannot reach the Hark server at unix:/s (x); this process runs unmeasured",
            "hark: rank one on n2 cannot reach the Hark server at unix:/s (x); this process runs unmeasured",
            "hark: rank 1 on n2 cannot reach the Hark server at unix:/s (x)",
            "some program's own output",
        ] {
            assert!(parse(line).is_none(), "{line}");
        }
    }

    #[test]
    fn what_was_said_goes_to_the_missing_ranks_it_names() {
        let said = Said::default();
        let u = |rank| Unreached {
            rank,
            host: "n2".into(),
            reason: "refused".into(),
        };
        hark_sync::lock(&said.0).extend([u(3), u(1), u(1), u(5)]);
        let mut run = Run {
            missing: vec![hark_model::MissingRanks {
                job: "j".into(),
                world_size: 4,
                measured: 2,
                ranks: vec![1, 3],
                unreached: Vec::new(),
            }],
            ..Run::default()
        };
        said.attach(&mut run);
        // Rank 5 is no rank of the job's that is missing.
        assert_eq!(run.missing[0].unreached, vec![u(1), u(3)]);
    }
}
