mod common;
use common::*;
use hark_wire::{op, NameKind};

fn begin(id: u32, t: u64) -> hark_wire::Event {
    ev(op::REGION_BEGIN, t, t).obj(id)
}
fn end(id: u32, t: u64) -> hark_wire::Event {
    ev(op::REGION_END, t, t).obj(id)
}

#[test]
fn inclusive_and_exclusive_times_follow_the_nesting() {
    let defs = vec![
        name(1, NameKind::Region, "solve"),
        name(2, NameKind::Region, "halo"),
        name(3, NameKind::Counter, "residual"),
        name(4, NameKind::Mark, "step"),
    ];
    let proc = Proc::mpi("app", 0, 1)
        .defs(defs)
        // solve [0, 100) holds halo [10, 30) and halo [50, 60); the end of
        // the second halo comes in the next pack.
        .pack(vec![begin(1, 0), begin(2, 10), end(2, 30), begin(2, 50)])
        .pack(vec![
            end(2, 60),
            end(1, 100),
            begin(2, 200),
            end(2, 205),
            ev(op::COUNTER, 1, 1).obj(3).bytes(10),
            ev(op::COUNTER, 2, 2).obj(3).bytes((-4i64) as u64),
            ev(op::MARK, 3, 3).obj(4).bytes(1),
            ev(op::MARK, 4, 4).obj(4).bytes(2),
        ])
        .end();
    let p = run(&[proc]).remove(0);
    let r = &p.regions.paths;
    assert_eq!(r["solve"].calls, vec![1]);
    assert_eq!(r["solve"].inclusive_ns, vec![100]);
    assert_eq!(r["solve"].exclusive_ns, vec![70]);
    assert_eq!(r["solve/halo"].calls, vec![2]);
    assert_eq!(r["solve/halo"].inclusive_ns, vec![30]);
    assert_eq!(
        r["halo"].inclusive_ns,
        vec![5],
        "a top-level halo is another path"
    );
    let c = &p.regions.counters["residual"];
    assert_eq!((c.count, c.min, c.max, c.mean), (2, -4, 10, 3.0));
    let m = &p.regions.counters["mark:step"];
    assert_eq!((m.count, m.min, m.max), (2, 1, 2));
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
}

#[test]
fn threads_nest_separately_and_unbalanced_ends_are_counted_not_fatal() {
    let proc = Proc::mpi("app", 0, 1)
        .defs(vec![
            name(1, NameKind::Region, "a"),
            name(2, NameKind::Region, "b"),
        ])
        .pack(vec![
            begin(1, 0),
            begin(2, 5).thread(1),
            begin(2, 10),
            // Ends "a" while "b" is open on thread 0: closes "b" too.
            end(1, 20),
            end(2, 30).thread(1),
            end(2, 40),
        ])
        .end();
    let p = run(&[proc]).remove(0);
    let r = &p.regions.paths;
    assert_eq!(r["a"].inclusive_ns, vec![20]);
    assert_eq!(r["a/b"].inclusive_ns, vec![10]);
    assert_eq!(r["b"].inclusive_ns, vec![25], "thread 1's b is top-level");
    assert_eq!(p.diagnostics.len(), 2, "{:?}", p.diagnostics);
}

#[test]
fn recursion_deeper_than_the_limit_folds_into_its_ancestor() {
    let depth = 200u64;
    let mut events: Vec<_> = (0..depth).map(|i| begin(1, i)).collect();
    events.extend((0..depth).map(|i| end(1, 1000 + i)));
    let proc = Proc::mpi("app", 0, 1)
        .defs(vec![name(1, NameKind::Region, "r")])
        .pack(events)
        .end();
    let p = run(&[proc]).remove(0);
    assert_eq!(p.regions.paths.len(), 64);
    let total_exclusive: u64 = p.regions.paths.values().map(|r| r.exclusive_ns[0]).sum();
    assert_eq!(
        total_exclusive,
        1000 + depth - 1,
        "no time lost or counted twice"
    );
}

#[test]
fn mpi_calls_are_attributed_to_the_call_path_open_on_their_thread() {
    let proc = Proc::mpi("app", 0, 1)
        .defs(vec![
            name(1, NameKind::Region, "solve"),
            name(2, NameKind::Region, "halo"),
        ])
        .pack(vec![
            mpi("MPI_Barrier", 0, 3),
            begin(1, 10),
            mpi("MPI_Allreduce", 11, 15),
            begin(2, 20),
            mpi("MPI_Send", 21, 22),
            mpi("MPI_Send", 23, 27),
            // Thread 1 has no region open: its call is outside any region.
            mpi("MPI_Send", 24, 25).thread(1),
            end(2, 30),
            end(1, 40),
        ])
        .end();
    let p = run(&[proc]).remove(0);
    let m = &p.regions.mpi;
    let calls_time = |path: &str, f: &str| (m[path][f].calls[0], m[path][f].time_ns[0]);
    assert_eq!(calls_time("", "MPI_Barrier"), (1, 3));
    assert_eq!(calls_time("", "MPI_Send"), (1, 1));
    assert_eq!(calls_time("solve", "MPI_Allreduce"), (1, 4));
    assert_eq!(calls_time("solve/halo", "MPI_Send"), (2, 5));
    // Over the call paths, each function's totals are the MPI profile's.
    for (f, prof) in &p.mpi {
        let over_paths: u64 = m
            .values()
            .filter_map(|fs| fs.get(f))
            .map(|c| c.time_ns[0])
            .sum();
        assert_eq!(over_paths, prof.time_ns[0], "{f}");
    }
}
