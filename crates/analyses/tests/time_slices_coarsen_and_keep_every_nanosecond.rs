mod common;
use common::*;
use hark_engine::Config;

fn small() -> Config {
    Config {
        slices: 8,
        slice_shift: 4, // 16 ns
        ..Config::default()
    }
}

fn sum(v: &[u64]) -> u64 {
    v.iter().sum()
}

#[test]
fn a_run_longer_than_the_slices_doubles_their_width_and_keeps_totals() {
    // 1000 barriers of 10 ns every 100 ns: 100 µs, far beyond 8 × 16 ns.
    let events = (0..1000u64)
        .map(|i| mpi("MPI_Barrier", 100 * i, 100 * i + 10))
        .collect();
    let p = run_with(&[Proc::mpi("app", 0, 1).pack(events).end()], small()).remove(0);
    let t = &p.timeslices;
    assert!(
        t.slice_ns >= 100_000 / 8,
        "width {} covers the run",
        t.slice_ns
    );
    assert!(t.slice_ns.is_power_of_two());
    let time = &t.metrics["mpi_time_ns"][0];
    assert!(time.len() <= 8);
    assert_eq!(sum(time), 10_000);
    assert_eq!(sum(&t.metrics["MPI_Barrier.calls"][0]), 1000);
    assert_eq!(sum(&t.metrics["mpi_calls"][0]), 1000);
}

#[test]
fn a_long_call_is_split_over_the_slices_it_spans() {
    let p = run_with(
        &[Proc::mpi("app", 0, 1)
            .pack(vec![
                mpi("MPI_Barrier", 8, 56),
                mpi("MPI_Barrier", 100, 101),
            ])
            .end()],
        small(),
    )
    .remove(0);
    let t = &p.timeslices;
    assert_eq!(t.slice_ns, 16);
    assert_eq!(t.metrics["mpi_time_ns"][0][..4], [8, 16, 16, 8]);
    assert_eq!(t.metrics["mpi_calls"][0][..4], [1, 0, 0, 0]);
}

#[test]
fn ranks_whose_clocks_differ_line_up_on_the_common_timeline() {
    // Rank 1's probe clock is 1000 ns behind: its offset brings it back.
    // Rank 0 runs 10 µs, rank 1 only 100 ns, so rank 1's slices must be
    // coarsened to rank 0's width at the end.
    let r0 = Proc::mpi("app", 0, 2)
        .pack(vec![
            mpi("MPI_Barrier", 50, 60),
            mpi("MPI_Barrier", 10_000, 10_001),
        ])
        .end();
    let r1 = Proc::mpi("app", 1, 2)
        .offset(1000)
        .pack(vec![mpi("MPI_Barrier", 0, 10)])
        .end();
    let p = run_with(&[r0, r1], small()).remove(0);
    let t = &p.timeslices;
    let calls = &t.metrics["mpi_calls"];
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].len(), calls[1].len());
    let slice_of = |ns: u64| (ns / t.slice_ns) as usize;
    assert_eq!(calls[0][slice_of(50)], 1);
    assert_eq!(
        calls[1][slice_of(1000)],
        1,
        "rank 1's call is at 1000 ns on the common timeline"
    );
    assert_eq!(sum(&calls[1]), 1);
}

#[test]
fn a_run_ten_times_as_long_holds_no_more_slices() {
    // The model's time slices hold at most `slices` values per metric and
    // rank whatever the run's length (the server's peak memory is measured
    // in BENCHMARKS.md).
    let shape = |n: u64| {
        let events = (0..n)
            .map(|i| mpi("MPI_Barrier", 1000 * i, 1000 * i + 10))
            .collect();
        let p = run(&[Proc::mpi("app", 0, 1).pack(events).end()]).remove(0);
        let longest = p.timeslices.metrics.values().flatten().map(Vec::len).max();
        (
            p.timeslices.metrics.len(),
            longest.unwrap_or(0),
            p.timeslices.slice_ns,
        )
    };
    let (short, long) = (shape(100_000), shape(1_000_000));
    assert_eq!(short.0, long.0, "same metrics");
    assert!(short.1 <= 256 && long.1 <= 256, "{short:?} {long:?}");
    assert!(
        long.2 > short.2,
        "slices widened instead: {short:?} {long:?}"
    );
}
