//! A rank sampled out by a service sends `Counts` frames in place of its
//! packs: the MPI and I/O profiles and the summary add them to what its
//! events gave, so its calls, bytes and times, MPI time and span stay exact; the diagnostics name it; and the same
//! holds by hand, through a board, and split between two servers whose
//! partials merge.

mod common;
use common::*;
use hark_analyses::registry;
use hark_engine::Partial;
use hark_wire::{op, Count, Counts};

fn procs() -> Vec<Proc> {
    let send = op::mpi_op("MPI_Send").unwrap();
    let sends = |n: u64, from: u64| -> Vec<_> {
        (0..n)
            .map(|i| mpi("MPI_Send", from + 10 * i, from + 10 * i + 4).bytes(8))
            .collect()
    };
    let counted = Counts {
        since_ns: 1_000,
        until_ns: 1_100,
        events: 6,
        cells: vec![
            Count {
                op: send,
                calls: 4,
                bytes: 32,
                time_ns: 20,
                min_ns: 2,
                max_ns: 8,
                ..Count::default()
            },
            Count {
                op: op::io::PWRITE,
                obj: 5,
                peer: 3,
                calls: 2,
                bytes: 200,
                time_ns: 6,
                min_ns: 3,
                max_ns: 3,
            },
        ],
    };
    vec![
        Proc::mpi("app", 0, 2).pack(sends(5, 0)).end(),
        Proc::mpi("app", 1, 2)
            .defs(vec![file(5, "/tmp/out")])
            .pack(sends(1, 0))
            .counts(counted)
            .end(),
    ]
}

fn check(p: &hark_model::Program) {
    let send = &p.mpi["MPI_Send"];
    assert_eq!(send.calls, vec![5, 5]);
    assert_eq!(send.bytes, vec![40, 40]);
    assert_eq!(send.time_ns, vec![20, 24]);
    assert_eq!(send.min_ns, vec![4, 2]);
    assert_eq!(send.max_ns, vec![4, 8]);
    assert_eq!(p.mpi_time_ns, vec![20, 24], "MPI time from counts too");
    assert_eq!(p.rank_wall_ns[1], 1_100, "to the last event counted");
    let w = &p.io.per_rank[1]["pwrite"];
    assert_eq!((w.calls, w.bytes, w.time_ns), (2, 200, 6));
    let f = p.io.files.iter().find(|f| f.path == "/tmp/out").unwrap();
    assert_eq!(f.write_bytes, vec![0, 200]);
    assert!(
        p.diagnostics
            .iter()
            .any(|d| d.starts_with("sampling: ranks 1 sampled out from t=")),
        "{:?}",
        p.diagnostics
    );
    let acc = p.accounting();
    assert_eq!(acc.events_written, 12);
    assert_eq!(
        (acc.events_received, acc.events_analysed),
        (12, 12),
        "counted events are received and analysed"
    );
}

#[test]
fn counts_fold_by_hand_and_on_a_board() {
    let procs = procs();
    check(&run(&procs)[0]);
    check(&run_on_board(&procs, 2)[0]);
}

#[test]
fn counts_of_a_rank_on_another_server_merge() {
    let procs = procs();
    let a = partial_by_hand("app", &[(0, &procs[0])], Default::default());
    let b = partial_by_hand("app", &[(1, &procs[1])], Default::default());
    let b = Partial::from_bytes(&b.to_bytes()).unwrap();
    let mut merged = a;
    merged.merge(b, &registry::all()).unwrap();
    check(&merged.finish(&registry::all(), false)[0]);
}
