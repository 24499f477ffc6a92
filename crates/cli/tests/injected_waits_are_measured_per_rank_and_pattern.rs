//! Our own C and Fortran programs inject waits of known length for every
//! wait-state pattern (`tests/programs/waits.c`, `waits.f90` through
//! `use mpi`, `waits_f08.f90` through `use mpi_f08`): one side sleeps, without
//! MPI, before its call while the other is already in its own. Measured
//! through real `mpirun` with Open MPI and MPICH at 2 to 4 ranks, the waiting
//! per rank and pattern in `profile.json` must be what was injected, within
//! 10 % or 5 ms (whichever is larger), with exactly one instance per waiting
//! call, and zero (within 5 ms in all) where nothing was injected.
//!
//! The programs' schedule, which [`waits_in`] mirrors: in repetition `k`,
//! point-to-point patterns pair rank `2i` with `2i + 1` and the rank whose
//! parity is `k`'s waits (an odd last rank sits out); collectives are late on
//! rank (or rooted at) `k % size`: everyone else waits, except in
//! `early_reduce` where only the root does. The ranks meet between
//! repetitions by polling `MPI_Testall`, which is no wait state.
//!
//! "What was injected" is measured, not assumed: with fewer cores than ranks
//! and other work on the machine, a sleeper may wake some milliseconds late,
//! or a rank be switched out just before its call (seen: 20 ms, once 165 ms,
//! with the load at 12 on 2 cores). So each program stamps, from
//! `CLOCK_MONOTONIC`, the moment before each of its pattern calls, and the
//! truth is the pattern's definition applied to those stamps ([`happened`]).
//! It must be within half to one and a half times the schedule, or the test
//! says the program did not inject what it was asked to.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Milliseconds injected per pattern: distinct, so that a wait counted under
/// the wrong pattern shows.
const INJECTED_MS: [(&str, u64); 7] = [
    ("late_sender", 100),
    ("late_sender_wrong_order", 140),
    ("late_receiver", 160),
    ("wait_nxn", 180),
    ("wait_barrier", 200),
    ("late_broadcast", 220),
    ("early_reduce", 240),
];

/// Patterns each Fortran program implements.
const USE_MPI: &[&str] = &[
    "late_sender",
    "late_receiver",
    "wait_nxn",
    "wait_barrier",
    "late_broadcast",
    "early_reduce",
];
const USE_MPI_F08: &[&str] = &[
    "late_sender",
    "late_sender_wrong_order",
    "wait_nxn",
    "wait_barrier",
    "late_broadcast",
    "early_reduce",
];

const MS: u64 = 1_000_000;

/// Whether rank `r` is the one that waits in repetition `k` of `pattern` at
/// `np` ranks, by the programs' schedule.
fn waits_in(pattern: &str, r: usize, k: usize, np: usize) -> bool {
    match pattern {
        "late_sender" | "late_sender_wrong_order" | "late_receiver" => {
            r < np / 2 * 2 && r % 2 == k % 2
        }
        "wait_nxn" | "wait_barrier" | "late_broadcast" => r != k % np,
        "early_reduce" => r == k % np,
        _ => unreachable!("{pattern}"),
    }
}

/// Per rank, the waiting (ns) and instances that `reps` repetitions of
/// `pattern` with `ms` injected should give at `np` ranks.
fn scheduled(pattern: &str, ms: u64, np: usize, reps: usize) -> Vec<(u64, u64)> {
    (0..np)
        .map(|r| {
            let n = (0..reps).filter(|&k| waits_in(pattern, r, k, np)).count() as u64;
            (n * ms * MS, n)
        })
        .collect()
}

/// The programs' stamps: `(pattern, repetition) -> rank -> ns` when the
/// rank entered its call (`PREFIX.RANK` files of `PATTERN K RANK NS` lines).
type Stamps = BTreeMap<(String, usize), BTreeMap<usize, u64>>;

fn read_stamps(prefix: &Path, np: usize) -> Stamps {
    let mut stamps = Stamps::new();
    for r in 0..np {
        let path = prefix.with_extension(r.to_string());
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("the program wrote no {}: {e}", path.display()));
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let bad = || panic!("{}: bad line {line:?}", path.display());
            let [pattern, k, rank, ns] = f[..] else { bad() };
            let (Ok(k), Ok(rank), Ok(ns)) = (k.parse(), rank.parse(), ns.parse()) else {
                bad()
            };
            stamps
                .entry((pattern.to_string(), k))
                .or_default()
                .insert(rank, ns);
        }
    }
    stamps
}

/// Per rank, the waiting (ns) and instances of `pattern` that really
/// happened: the pattern's definition applied to the enter times the
/// program stamped, for every rank the pattern lets wait (a positive wait is
/// an instance).
fn happened(pattern: &str, np: usize, reps: usize, stamps: &Stamps) -> Vec<(u64, u64)> {
    let mut per_rank = vec![(0, 0); np];
    for k in 0..reps {
        let Some(enter) = stamps.get(&(pattern.to_string(), k)) else {
            continue;
        };
        let at = |r: usize| -> i64 {
            *enter
                .get(&r)
                .unwrap_or_else(|| panic!("rank {r} stamped no {pattern} {k}")) as i64
        };
        let root = k % np;
        for (r, cell) in per_rank.iter_mut().enumerate() {
            let wait = match pattern {
                // The receiver (the sender in late_receiver) waits for its
                // partner's enter.
                "late_sender" | "late_sender_wrong_order" | "late_receiver" => {
                    if !waits_in(pattern, r, k, np) {
                        continue;
                    }
                    at(r ^ 1) - at(r)
                }
                "wait_nxn" | "wait_barrier" => (0..np).map(at).max().unwrap() - at(r),
                "late_broadcast" if r != root => at(root) - at(r),
                "early_reduce" if r == root => {
                    (0..np).filter(|&o| o != r).map(at).min().unwrap() - at(r)
                }
                "late_broadcast" | "early_reduce" => continue,
                _ => unreachable!("{pattern}"),
            };
            if wait > 0 {
                cell.0 += wait as u64;
                cell.1 += 1;
            }
        }
    }
    per_rank
}

/// What one pattern should show per rank: as scheduled, and as it happened.
struct Truth {
    pattern: &'static str,
    scheduled: Vec<(u64, u64)>,
    happened: Vec<(u64, u64)>,
}

/// Every difference between what Hark measured and what happened, one line
/// each: per rank within 10 % or 5 ms, instances exact, and at most 5 ms in
/// all where nothing happened.
fn compare(profile: &serde_json::Value, truth: &[Truth]) -> Vec<String> {
    let ms = |ns: u64| ns as f64 / MS as f64;
    let mut failures = Vec::new();
    for t in truth {
        let (time, instances) = waits(profile, 0, t.pattern);
        let mut stray = 0;
        for (r, &(want_ns, want_n)) in t.happened.iter().enumerate() {
            let (got_ns, got_n) = (time[r], instances[r]);
            let tolerance = (want_ns / 10).max(5 * MS);
            if got_ns.abs_diff(want_ns) > tolerance || got_n != want_n {
                failures.push(format!(
                    "  rank {r} {}: injected {:.1} ms in {} instances, happened {:.1} ms in \
                     {want_n}, Hark measured {:.1} ms in {got_n} (tolerance {:.1} ms)",
                    t.pattern,
                    ms(t.scheduled[r].0),
                    t.scheduled[r].1,
                    ms(want_ns),
                    ms(got_ns),
                    ms(tolerance),
                ));
            }
            if want_n == 0 {
                stray += got_ns;
            }
        }
        if stray > 5 * MS {
            failures.push(format!(
                "  {}: {:.1} ms where nothing happened (at most 5 ms in all)",
                t.pattern,
                ms(stray)
            ));
        }
    }
    failures
}

/// One program's run: what it is and what it injects.
struct Run<'a> {
    mpi: Mpi,
    source: &'a str,
    np: usize,
    reps: usize,
    patterns: &'a [&'a str],
}

impl Run<'_> {
    /// The program's arguments: the repetitions, where to stamp, and each
    /// pattern's ms.
    fn args(&self, stamps: &Path) -> Vec<String> {
        let mut args = vec![
            format!("reps={}", self.reps),
            format!("stamps={}", stamps.display()),
        ];
        for (pattern, ms) in INJECTED_MS {
            if self.patterns.contains(&pattern) {
                args.push(format!("{pattern}={ms}"));
            }
        }
        args
    }

    /// Per pattern, what should be and what happened. Panics if the program
    /// did not inject what it was asked to (a busy machine may move a wait by
    /// some milliseconds, not by half of it).
    fn truth(&self, stamps: &Stamps) -> Vec<Truth> {
        INJECTED_MS
            .iter()
            .map(|&(pattern, ms)| {
                let (scheduled, happened) = if self.patterns.contains(&pattern) {
                    for k in 0..self.reps {
                        let key = (pattern.to_string(), k);
                        assert!(stamps.contains_key(&key), "no stamps of {pattern} {k}");
                    }
                    let scheduled = scheduled(pattern, ms, self.np, self.reps);
                    let happened = happened(pattern, self.np, self.reps, stamps);
                    let total = |v: &[(u64, u64)]| v.iter().map(|c| c.0).sum::<u64>() as f64;
                    let ratio = total(&happened) / total(&scheduled);
                    assert!(
                        (0.5..=1.5).contains(&ratio),
                        "{} did not inject {pattern} as scheduled: {scheduled:?} ns, \
                         happened {happened:?}",
                        self.source
                    );
                    (scheduled, happened)
                } else {
                    (vec![(0, 0); self.np], vec![(0, 0); self.np])
                };
                Truth {
                    pattern,
                    scheduled,
                    happened,
                }
            })
            .collect()
    }

    /// Compiles the program, runs it under `hark run` (the launcher
    /// followed by `wrap` and the program), and checks its waits.
    fn check(&self, tag: &str, wrap: &[&str], env: &[(&str, &str)]) {
        let compiler = if self.source.ends_with(".c") {
            self.mpi.cc
        } else {
            self.mpi.fc
        };
        if !have(compiler) || !have(self.mpi.run) {
            eprintln!("skipped: {} ({compiler}) is not installed", self.mpi.name);
            return;
        }
        let dir = scratch(tag);
        let exe = compile(compiler, Path::new(self.source), &dir, &[]);
        // One more run if the first disagrees: on an oversubscribed machine
        // a rank can be switched out between its stamp and its call, which
        // moves the truth, not Hark. A real error shows in both runs.
        let mut failures = Vec::new();
        for attempt in 0..2 {
            failures = self.attempt(&dir, &exe, wrap, env);
            if failures.is_empty() {
                break;
            }
            eprintln!("attempt {attempt} disagreed:\n{}", failures.join("\n"));
        }
        assert!(
            failures.is_empty(),
            "{} on {}, {} ranks, {} repetitions: Hark's waits differ from what happened, twice\n{}",
            self.source,
            self.mpi.name,
            self.np,
            self.reps,
            failures.join("\n"),
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// One run under `hark run`: what differs from the truth, with the
    /// summary (empty when everything fits).
    fn attempt(&self, dir: &Path, exe: &Path, wrap: &[&str], env: &[(&str, &str)]) -> Vec<String> {
        let stamps = dir.join("stamps");
        let _ = std::fs::remove_dir_all(dir.join("run"));
        for r in 0..self.np {
            let _ = std::fs::remove_file(format!("{}.{r}", stamps.display()));
        }
        let mut command = launcher(self.mpi, self.np);
        command.extend(wrap.iter().map(|w| w.to_string()));
        command.push(exe.display().to_string());
        command.extend(self.args(&stamps));
        let (out, run_dir) = hark_run_env(dir, &[], &command, env);
        assert_exit(&out, 0);
        let truth = self.truth(&read_stamps(&stamps, self.np));
        let profile = profile(&run_dir);
        assert_eq!(lost(&profile), 0, "events lost");
        assert_eq!(
            profile["programs"].as_array().map(Vec::len),
            Some(1),
            "one program"
        );
        check_waits_fit(&profile, 0);
        let mut failures = compare(&profile, &truth);
        if !failures.is_empty() {
            failures.push(format!(
                "--- hark\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        failures
    }
}

#[test]
fn c_waits_of_every_pattern_on_open_mpi_at_four_ranks() {
    Run {
        mpi: OPEN_MPI,
        source: "waits.c",
        np: 4,
        reps: 4,
        patterns: &WAIT_PATTERNS,
    }
    .check("waits-c-ompi", &[], &[]);
}

#[test]
fn c_waits_of_every_pattern_on_mpich_at_three_ranks() {
    Run {
        mpi: MPICH,
        source: "waits.c",
        np: 3,
        reps: 4,
        patterns: &WAIT_PATTERNS,
    }
    .check("waits-c-mpich", &[], &[]);
}

#[test]
fn fortran_use_mpi_waits_on_open_mpi_at_three_ranks() {
    Run {
        mpi: OPEN_MPI,
        source: "waits.f90",
        np: 3,
        reps: 2,
        patterns: USE_MPI,
    }
    .check("waits-f-ompi", &[], &[]);
}

#[test]
fn fortran_use_mpi_waits_on_mpich_at_two_ranks() {
    Run {
        mpi: MPICH,
        source: "waits.f90",
        np: 2,
        reps: 2,
        patterns: USE_MPI,
    }
    .check("waits-f-mpich", &[], &[]);
}

#[test]
fn fortran_use_mpi_f08_waits_on_open_mpi_at_two_ranks() {
    Run {
        mpi: OPEN_MPI,
        source: "waits_f08.f90",
        np: 2,
        reps: 2,
        patterns: USE_MPI_F08,
    }
    .check("waits-f08-ompi", &[], &[]);
}

#[test]
fn fortran_use_mpi_f08_waits_on_mpich_at_three_ranks() {
    Run {
        mpi: MPICH,
        source: "waits_f08.f90",
        np: 3,
        reps: 2,
        patterns: USE_MPI_F08,
    }
    .check("waits-f08-mpich", &[], &[]);
}

/// Rank 1's clock runs 50 ms ahead (`HARK_TEST_CLOCK_SKEW_NS`, a test-only
/// probe setting): the aligned timeline must still give the true waits. Without
/// alignment rank 0 would seem to wait 50 ms longer for rank 1 in each
/// instance, and rank 1 50 ms less. A shell, left unmeasured by `HARK_SKIP`,
/// sets the variable for rank 1 only (from the launcher's rank variable) and
/// `exec`s the program.
fn skewed(mpi: Mpi, tag: &str) {
    if !test_hooks_or_skip() {
        return;
    }
    let skew = "if [ \"${OMPI_COMM_WORLD_RANK:-$PMI_RANK}\" = 1 ]; then \
                export HARK_TEST_CLOCK_SKEW_NS=50000000; fi; exec \"$0\" \"$@\"";
    Run {
        mpi,
        source: "waits.c",
        np: 2,
        reps: 4,
        patterns: &["late_sender", "late_receiver", "wait_barrier"],
    }
    .check(tag, &["sh", "-c", skew], &[("HARK_SKIP", "sh,dash")]);
}

#[test]
fn a_clock_skewed_by_50_ms_still_gives_the_true_waits_on_open_mpi() {
    skewed(OPEN_MPI, "waits-skew-ompi");
}

#[test]
fn a_clock_skewed_by_50_ms_still_gives_the_true_waits_on_mpich() {
    skewed(MPICH, "waits-skew-mpich");
}

/// A profile whose waits are the truth's, each cell passed through `shift`.
fn profile_of(truth: &[Truth], shift: impl Fn(&str, usize, &mut (u64, u64))) -> serde_json::Value {
    let waits: serde_json::Map<String, serde_json::Value> = truth
        .iter()
        .map(|t| {
            let mut cells = t.happened.clone();
            for (r, cell) in cells.iter_mut().enumerate() {
                shift(t.pattern, r, cell);
            }
            let (time_ns, instances): (Vec<u64>, Vec<u64>) = cells.into_iter().unzip();
            let cell = serde_json::json!({ "time_ns": time_ns, "instances": instances });
            (t.pattern.to_string(), cell)
        })
        .collect();
    serde_json::json!({ "programs": [{ "waits": waits }] })
}

/// The comparison itself, on a profile made from the truth: it passes the
/// truth, and names the rank and pattern of a wait that is 70 ms (over
/// 10 %) off or of an instance too many.
#[test]
fn the_comparison_passes_the_truth_and_names_what_is_off() {
    let truth: Vec<Truth> = INJECTED_MS
        .iter()
        .map(|&(pattern, ms)| {
            let cells = if USE_MPI.contains(&pattern) {
                scheduled(pattern, ms, 3, 4)
            } else {
                vec![(0, 0); 3]
            };
            Truth {
                pattern,
                scheduled: cells.clone(),
                happened: cells,
            }
        })
        .collect();
    assert_eq!(
        compare(&profile_of(&truth, |_, _, _| {}), &truth),
        Vec::<String>::new()
    );
    let off = compare(
        &profile_of(&truth, |pattern, r, cell| {
            if pattern == "wait_barrier" && r == 2 {
                cell.0 += 70 * MS;
            }
            if pattern == "late_sender_wrong_order" && r == 1 {
                *cell = (MS, 1);
            }
        }),
        &truth,
    );
    assert_eq!(off.len(), 2, "{off:#?}");
    assert!(
        off[0].contains("rank 1 late_sender_wrong_order: injected 0.0 ms in 0 instances"),
        "{off:#?}"
    );
    assert!(
        off[1].contains("rank 2 wait_barrier: injected 600.0 ms in 3 instances, happened 600.0 ms in 3, Hark measured 670.0 ms in 3"),
        "{off:#?}"
    );
}

/// The truth from stamps: waits follow the definitions (the last rank has no
/// instance, whoever it is; early_reduce counts from the earliest non-root).
#[test]
fn the_truth_follows_the_definitions() {
    let mut stamps = Stamps::new();
    let mut put = |pattern: &str, k: usize, enters: &[u64]| {
        let e = enters
            .iter()
            .enumerate()
            .map(|(r, &t)| (r, t * MS))
            .collect();
        stamps.insert((pattern.to_string(), k), e);
    };
    // 3 ranks; the late rank (or root) of repetition k is k.
    put("wait_barrier", 0, &[300, 100, 120]);
    put("early_reduce", 1, &[150, 100, 140]);
    put("late_broadcast", 2, &[100, 130, 120]);
    put("late_sender", 0, &[100, 160, 999]); // rank 2 sits out at 3 ranks
                                             // Rank 1 came last, not rank 0 as scheduled: rank 0 waited.
    put("wait_nxn", 0, &[100, 300, 120]);
    assert_eq!(
        happened("wait_barrier", 3, 1, &stamps),
        vec![(0, 0), (200 * MS, 1), (180 * MS, 1)]
    );
    let reduce = happened("early_reduce", 3, 2, &stamps);
    assert_eq!(reduce, vec![(0, 0), (40 * MS, 1), (0, 0)]);
    // Rank 1 entered after the root: it did not wait.
    let bcast = happened("late_broadcast", 3, 3, &stamps);
    assert_eq!(bcast, vec![(20 * MS, 1), (0, 0), (0, 0)]);
    assert_eq!(
        happened("wait_nxn", 3, 1, &stamps),
        vec![(200 * MS, 1), (0, 0), (180 * MS, 1)]
    );
    let p2p = happened("late_sender", 3, 1, &stamps);
    assert_eq!(p2p, vec![(60 * MS, 1), (0, 0), (0, 0)]);
}
