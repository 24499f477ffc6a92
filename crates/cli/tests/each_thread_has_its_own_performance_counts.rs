//! Performance counters per thread (`docs/probe.md`, "Counters") against
//! what each thread measures of itself: `tests/programs/counted_threads.c`
//! starts three threads; thread t touches t × 1000 fresh pages and sleeps
//! t × 10 times, reading its own minor faults and switches
//! (`getrusage(RUSAGE_THREAD)`) around that work, while the main thread
//! touches 1000 pages of its own. Each thread's row in
//! `counter_info.threads` must hold its own counts: at least what it
//! measured and at most [`FAULT_MARGIN`] faults and [`SWITCH_MARGIN`]
//! switches more (the row also counts the thread's start and end). The
//! kernel's `context-switches` counts preemptions as well as sleeps, so
//! the switches compared are both kinds (`ru_nvcsw` + `ru_nivcsw`): CI, on
//! a machine where the thread waited 30 % of its time for a CPU, saw 41
//! against its 30 sleeps. The
//! rank's totals are the sum of the rows, and hold each fault once: within
//! a margin of the whole process's count (`RUSAGE_SELF`) from before the
//! threads started to after they were joined; counted twice, the threads'
//! 6000 faults would show again.

mod common;

use common::*;
use serde_json::Value;

/// Faults a thread's row may count beyond its own pages: the probe's
/// buffer it fills first (16 pages at `--pack-size 64K`, touched on the
/// thread as the pool allocates it), its region's begin and end, its
/// stack, its first `malloc`.
const FAULT_MARGIN: u64 = 64;
/// Switches a thread's row may count beyond those it measured: a lock it
/// waited for at its start or end, a preemption there.
const SWITCH_MARGIN: u64 = 8;

const THREADS: u64 = 3;
const PAGES: u64 = 1000;
const SLEEPS: u64 = 10;

/// The numbers after `what` on each line of `stdout` that starts with it.
fn lines(stdout: &str, what: &str) -> Vec<Vec<u64>> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{what} ")))
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect()
}

fn count(row: &Value, counter: &str) -> u64 {
    row[counter].as_u64().unwrap_or(0)
}

#[test]
fn each_thread_s_page_faults_and_switches_are_its_own_and_add_up() {
    if !have("cc") {
        eprintln!("skipped: no C compiler");
        return;
    }
    let dir = scratch("counters-threads");
    let include = format!("-I{}/../../include", env!("CARGO_MANIFEST_DIR"));
    let exe = compile(
        "cc",
        "counted_threads.c".as_ref(),
        &dir,
        &[&include, "-pthread"],
    );
    let command = vec![
        exe.display().to_string(),
        THREADS.to_string(),
        PAGES.to_string(),
        SLEEPS.to_string(),
    ];
    let (out, run_dir) = hark_run(
        &dir,
        &[
            "--counters",
            "page-faults,context-switches",
            "--pack-size",
            "64K",
        ],
        &command,
    );
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    let rows = p["counter_info"]["threads"][0]
        .as_array()
        .unwrap_or_else(|| panic!("no per-thread counts: {}", p["counter_info"]))
        .clone();
    let shown = format!(
        "{stdout}{}\ncounters: {}\nthreads: {rows:?}",
        String::from_utf8_lossy(&out.stderr),
        p["counters"]
    );
    let own = lines(&stdout, "thread");
    assert_eq!(own.len(), THREADS as usize, "{shown}");
    // The main thread and the three others, numbered in the order of
    // their first events: the main thread first.
    assert_eq!(rows.len(), 1 + THREADS as usize, "{shown}");
    for (t, own) in own.iter().enumerate() {
        let (touched, minflt, slept, nvcsw, all) = (own[1], own[2], own[3], own[4], own[5]);
        assert!(
            minflt >= touched && nvcsw >= slept,
            "the program: {own:?}\n{shown}"
        );
        // The thread's row: the one whose faults are its own (the threads
        // touch 1000, 2000, 3000 pages: one row at most fits each).
        let fits: Vec<usize> = (1..rows.len())
            .filter(|&r| (minflt..=minflt + FAULT_MARGIN).contains(&count(&rows[r], "page-faults")))
            .collect();
        assert_eq!(
            fits.len(),
            1,
            "thread {}: {minflt} faults of its own, no one row of Hark's within {FAULT_MARGIN} above\n{shown}",
            t + 1
        );
        let switches = count(&rows[fits[0]], "context-switches");
        assert!(
            (all..=all + SWITCH_MARGIN).contains(&switches),
            "thread {}: {all} switches of its own ({nvcsw} voluntary while sleeping), Hark {switches}\n{shown}",
            t + 1
        );
    }
    let main = lines(&stdout, "main");
    let main_faults = count(&rows[0], "page-faults");
    assert!(
        main_faults >= main[0][1],
        "the main thread's row has {main_faults} faults, it counted {} itself\n{shown}",
        main[0][1]
    );
    // The totals are the rows' sum, and count each fault once.
    for counter in ["page-faults", "context-switches"] {
        let sum: u64 = rows.iter().map(|r| count(r, counter)).sum();
        assert_eq!(count(&p["counters"][0], counter), sum, "{counter}\n{shown}");
    }
    let whole = lines(&stdout, "self")[0][0];
    let total = count(&p["counters"][0], "page-faults");
    let threads_pages = PAGES * THREADS * (THREADS + 1) / 2;
    assert!(
        total >= whole.saturating_sub(FAULT_MARGIN) && total < whole + threads_pages / 2,
        "{total} faults in all by Hark, {whole} by the process's own count\n{shown}"
    );
    drop(dir);
}
