//! Workers with nothing to do sleep: an idle board's threads use almost no
//! processor time, and wake up at once when work comes.

use std::fs;
use std::time::Duration;

use hark_board::{Board, Entry, KnowledgeSource};

/// Processor time (user + system, in clock ticks) of this process's
/// threads named `hark-board-*`.
fn board_ticks() -> u64 {
    let mut ticks = 0;
    for task in fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("hark-board-") {
            continue;
        }
        let stat = fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        ticks += f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    }
    ticks
}

#[test]
fn an_idle_board_does_not_spin() {
    let board = Board::new(4);
    let t = board.intern("t");
    let level = board.create_level("p");
    board
        .register(level, KnowledgeSource::new("noop", &[t], |_, _| {}))
        .unwrap();
    for _ in 0..1000 {
        board.submit(level, Entry::new(t, ())).unwrap();
    }
    board.drain();
    std::thread::sleep(Duration::from_millis(100));
    let before = board_ticks();
    std::thread::sleep(Duration::from_millis(1000));
    let used = board_ticks() - before;
    // Four spinning workers would burn about 400 ticks (100 per second each).
    assert!(used <= 10, "idle workers used {used} ticks in one second");
    // And they still wake up for new work.
    board.submit(level, Entry::new(t, ())).unwrap();
    board.drain();
    assert_eq!(board.stats().knowledge_sources[0].jobs_run, 1001);
}
