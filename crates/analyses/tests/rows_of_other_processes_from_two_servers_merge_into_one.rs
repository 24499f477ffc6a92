//! Processes without an MPI rank folded into a row of other processes
//! (`OnBoard::fold_away`) keep exact totals, and the rows of two servers
//! whose partials merge become one row: one server or many give the same
//! totals.

mod common;
use common::*;
use hark_analyses::registry;
use hark_engine::{OnBoard, Partial, StreamAccounting};
use hark_model::Program;
use hark_wire::op::io;
use std::sync::Arc;

/// A process without MPI that writes `i + 1` times 10 bytes to fd 1, under a
/// region.
fn process(i: u32) -> Proc {
    let mut p = Proc::mpi("loop", -1, -1);
    p.steps.clear();
    p.hello.pid = 500 + i;
    let writes = (0..=u64::from(i))
        .map(|k| ev(io::WRITE, 100 + 10 * k, 105 + 10 * k).peer(1).bytes(10))
        .collect();
    p.pack(writes).end()
}

/// One server: `procs` through a board, every one but the first folded
/// away once analysed; its partial result.
fn server(procs: &[(u64, &Proc)]) -> Partial {
    let board = hark_board::Board::new(2);
    let on = OnBoard::install(&board, program("loop", Default::default())).unwrap();
    let mut kept = Vec::new();
    let mut gone = Vec::new();
    for (n, &(conn, p)) in procs.iter().enumerate() {
        let info = Arc::new(on.program().stream_info(conn, p.hello.clone(), 0));
        let mut acc = StreamAccounting::default();
        for step in &p.steps {
            match step {
                Step::Pack(e) => {
                    acc.received += e.len() as u64;
                    on.pack(&info, e).unwrap();
                }
                Step::End => acc.end = Some(end_frame(p.events_in_packs())),
                _ => {}
            }
        }
        if n == 0 {
            kept.push((info, acc));
        } else {
            gone.push((info, acc));
        }
    }
    on.drain();
    for (info, acc) in &gone {
        assert!(on.fold_away(info, acc), "a process with I/O folds");
    }
    assert_eq!(on.folded(), gone.len() as u64);
    let partial = on.finish_partial(kept);
    board.shutdown();
    partial
}

fn written(p: &Program) -> Vec<u64> {
    let n = p.rank_info.len();
    (0..n)
        .map(|r| p.io.files.iter().map(|f| f.write_bytes[r]).sum())
        .collect()
}

#[test]
fn two_servers_rows_of_other_processes_merge_into_one_with_exact_totals() {
    let procs: Vec<Proc> = (0..6).map(process).collect();
    let all: Vec<(u64, &Proc)> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| (i as u64, p))
        .collect();
    let each = run(&procs).remove(0);
    assert_eq!(each.rank_info.len(), 6);

    // One server: the first keeps its row, five are folded.
    let one = server(&all).finish(&registry::all(), false).remove(0);
    assert_eq!(one.rank_info.len(), 2);
    assert_eq!(one.rank_info[1].folded, 5);
    assert_eq!(written(&one), [10, written(&each)[1..].iter().sum::<u64>()]);

    // Two servers of three: a row each and a row of others each; merged,
    // one row of others for four processes.
    let analyses = registry::all();
    let mut a = Partial::from_bytes(&server(&all[..3]).to_bytes()).unwrap();
    let b = Partial::from_bytes(&server(&all[3..]).to_bytes()).unwrap();
    a.merge(b, &analyses).unwrap();
    let two = a.finish(&analyses, false).remove(0);
    let folded: Vec<u64> = two.rank_info.iter().map(|r| r.folded).collect();
    assert_eq!(
        folded,
        [0, 0, 4],
        "two rows of their own, one row of others"
    );
    assert_eq!(
        written(&two),
        [10, 40, 20 + 30 + 50 + 60],
        "processes 0 and 3 keep their rows"
    );
    for p in [&one, &two] {
        assert_eq!(p.processes(), 6);
        assert_eq!(p.accounting(), each.accounting(), "exact accounting");
        assert_eq!(
            written(p).iter().sum::<u64>(),
            written(&each).iter().sum::<u64>()
        );
    }
}
