//! `Board::place_workers` binds the workers to the CPUs it is given, lets
//! only that many of them take jobs, and puts them back when unplaced.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use hark_board::{Board, Entry, KnowledgeSource};

/// The calling thread's CPUs.
fn my_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data, all zeroes an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable for the size passed.
    let got = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(got, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE, inside `set`.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// Runs `n` jobs that each note their thread and its CPUs.
fn run_jobs(board: &Board, n: usize) -> Vec<(String, Vec<usize>)> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let t = board.intern("t");
    let level = board.create_level("p");
    let s = seen.clone();
    let ks = board
        .register(
            level,
            KnowledgeSource::new("note", &[t], move |_, _| {
                let name = std::thread::current().name().unwrap_or("").to_string();
                // Long enough that several workers would share the work.
                std::thread::sleep(std::time::Duration::from_micros(200));
                s.lock().unwrap().push((name, my_cpus()));
            }),
        )
        .unwrap();
    for _ in 0..n {
        board.submit(level, Entry::new(t, ())).unwrap();
    }
    board.drain();
    board.remove(ks);
    let v = seen.lock().unwrap().clone();
    v
}

#[test]
fn placed_workers_run_only_on_their_cpus() {
    let start = my_cpus();
    let one = start[start.len() - 1];
    let board = Board::new(3);
    assert_eq!(board.active_workers(), 3);

    board.place_workers(Some(&[one]));
    assert_eq!(board.active_workers(), 1);
    let placed = run_jobs(&board, 200);
    assert_eq!(placed.len(), 200);
    assert!(
        placed.iter().all(|(_, cpus)| cpus == &vec![one]),
        "a job ran off CPU {one}: {placed:?}"
    );
    let threads: HashSet<&String> = placed.iter().map(|(n, _)| n).collect();
    assert_eq!(
        threads.len(),
        1,
        "one CPU, one worker taking jobs: {threads:?}"
    );

    board.place_workers(None);
    assert_eq!(board.active_workers(), 3);
    let back = run_jobs(&board, 200);
    assert!(back.iter().all(|(_, cpus)| cpus == &start), "{back:?}");
    let threads: HashSet<&String> = back.iter().map(|(n, _)| n).collect();
    assert!(
        threads.len() > 1,
        "unplaced, every worker takes jobs: {threads:?}"
    );
    board.shutdown();
}
