//! The whole summary of the fixture run, line by line. Update with
//! `UPDATE_EXPECT=1 cargo test -p hark-outputs --test summary_reads_like_this`
//! after checking that the change is wanted.

mod common;

use expect_test::{expect, Expect};
use hark_model::Run;

fn check(run: &Run, expected: Expect) {
    expected.assert_eq(&hark_outputs::summary::render(run));
}

#[test]
fn summary_of_a_two_program_run() {
    check(
        &common::two_programs(),
        expect![[r#"
            Hark 0.1.0: 2 programs, 6 ranks

            == ocean — 4 ranks, wall time 2.450 s, MPI 22.6 % of rank time
               command: ./ocean -n 1000
               MPI share per rank: min 21.0 % (rank 1), mean 22.6 %, max 24.2 % (rank 0)

               Efficiency       parallel  load balance  communication  serialisation  transfer
               whole program      77.3 %        97.9 %         78.9 %         91.7 %    86.1 %
               region timestep    78.9 %        96.2 %         82.1 %         91.8 %    89.5 %

               Findings, costliest first:
               medium  Late Sender in MPI_Waitall — 350.00 ms, 3.6 % of rank time
                       Late Sender in MPI_Waitall costs 3.6 % of rank time; ranks 0 and 3 wait longest, for
                       neighbours still in region `timestep/solve`: look at the balance of `timestep/solve`.
               low     Wait at N×N in MPI_Allreduce — 195.00 ms, 2.0 % of rank time
                       Wait at N×N in MPI_Allreduce costs 2.0 % of rank time; rank 0 arrives last in 76 % of the
                       instances, after region `timestep/solve`: look at the balance of `timestep/solve`.
               low     Load imbalance — 160.00 ms, 1.6 % of rank time
                       Load balance is 97.9 %: rank 1 computes 1.925 s, the mean rank 1.885 s.

               MPI function   calls     bytes       time   % MPI        min/rank  mean/rank        max/rank
               MPI_Waitall    4,000       0 B  955.00 ms  43.4 %  180.00 ms (r1)  238.75 ms  310.00 ms (r0)
               MPI_Allreduce  4,000  31.2 KiB  495.00 ms  22.5 %   95.00 ms (r0)  123.75 ms  150.00 ms (r1)
               MPI_Init           4       0 B  486.00 ms  22.1 %  120.00 ms (r0)  121.50 ms  123.00 ms (r3)
               MPI_Isend      8,000  62.5 MiB  172.00 ms   7.8 %   40.00 ms (r0)   43.00 ms   46.00 ms (r3)
               MPI_Irecv      8,000  62.5 MiB   48.00 ms   2.2 %   12.00 ms (r0)   12.00 ms   12.00 ms (r0)
               MPI_Barrier       12       0 B   20.00 ms   0.9 %    1.00 ms (r1)    5.00 ms    9.00 ms (r0)
               MPI_Bcast         40   160 KiB   14.00 ms   0.6 %    2.00 ms (r0)    3.50 ms    5.00 ms (r3)
               MPI_Finalize       4       0 B   12.00 ms   0.5 %    3.00 ms (r0)    3.00 ms    3.00 ms (r0)

               Heaviest pairs  messages     bytes
               0 -> 1             1,000  7.81 MiB
               0 -> 3             1,000  7.81 MiB
               1 -> 0             1,000  7.81 MiB
               1 -> 2             1,000  7.81 MiB
               2 -> 1             1,000  7.81 MiB

               I/O: 2 files, 66 calls, read 8.98 KiB, written 48.0 MiB, 85.95 ms in I/O calls
               File                              read   written
               /scratch/run42/ocean_0001.nc       0 B  48.0 MiB
               namelist.ocean                8.98 KiB       0 B
               Events: 164,006 events, 0 lost
               Clocks: 4 of 4 ranks aligned with world rank 0 by ping-pong (round trips up to 6.00 µs); residual alignment error at most 3.00 µs; 0 clock-condition violations

            == atmos — 2 ranks, wall time 2.380 s, MPI 12.2 % of rank time
               command: ./atmos --grid C48
               MPI share per rank: min 10.3 % (rank 4), mean 12.2 %, max 14.1 % (rank 5)

               Efficiency     parallel  load balance  communication  serialisation  transfer
               whole program    87.9 %        97.8 %         89.9 %         92.8 %    96.8 %

               Findings, costliest first:
               low     Late Sender in MPI_Recv — 90.00 ms, 1.9 % of rank time
                       Late Sender in MPI_Recv costs 1.9 % of rank time; rank 1 waits for rank 0 in all 400
                       instances, at `atmos.f90:120`.

               MPI function  calls     bytes       time   % MPI        min/rank  mean/rank        max/rank
               MPI_Init          2       0 B  236.00 ms  40.7 %  118.00 ms (r4)  118.00 ms  118.00 ms (r4)
               MPI_Recv      1,000  62.5 MiB  170.00 ms  29.3 %   40.00 ms (r4)   85.00 ms  130.00 ms (r5)
               MPI_Send      1,000  62.5 MiB  134.00 ms  23.1 %   64.00 ms (r5)   67.00 ms   70.00 ms (r4)
               MPI_Reduce      200  1.56 KiB   27.00 ms   4.7 %    5.00 ms (r4)   13.50 ms   22.00 ms (r5)
               MPI_Put         300  1.17 MiB    9.00 ms   1.6 %       0 ns (r5)    4.50 ms    9.00 ms (r4)
               MPI_Finalize      2       0 B    4.00 ms   0.7 %    2.00 ms (r4)    2.00 ms    2.00 ms (r4)

               Call site      function  calls     bytes       time   waiting
               atmos.f90:120  MPI_Recv  1,000  62.5 KiB  170.00 ms  90.00 ms
               atmos.f90:98   MPI_Send  1,000  62.5 KiB  134.00 ms      0 ns
               io.f90:57         write     40  2.50 KiB   12.00 ms      0 ns

               Heaviest pairs  messages     bytes
               4 -> 5               500  31.2 MiB
               5 -> 4               500  31.2 MiB

               Heaviest one-sided pairs  operations     bytes
               4 -> 5                           300  1.17 MiB

               I/O: none recorded
               Note: Rank 1 left region "solve" it never entered; the exit was ignored.
               Events: 4,401 events, 0 lost

            168,407 events, 0 lost
        "#]],
    );
}

#[test]
fn summary_names_lost_events_and_partial_ranks() {
    let mut run = common::two_programs();
    run.programs.truncate(1);
    let p = &mut run.programs[0];
    p.rank_info[3].partial = true;
    p.rank_info[3].accounting.events_received -= 100;
    p.rank_info[3].accounting.events_analysed -= 100;
    run.accounting.events_dropped = 25;
    run.accounting.events_received -= 125;
    run.accounting.events_analysed -= 130;
    run.accounting.partial_ranks = 1;
    let text = hark_outputs::summary::render(&run);
    let tail: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("   Events:"))
        .collect();
    expect![[r#"
           Events: 164,006 events, at least 100 lost (100 never reached the server), loss unknown for 1 rank
           Clocks: 4 of 4 ranks aligned with world rank 0 by ping-pong (round trips up to 6.00 µs); residual alignment error at most 3.00 µs; 0 clock-condition violations

        168,407 events, at least 130 lost (25 dropped by the probes, 100 never reached the server, 5 received but not analysed), loss unknown for 1 rank
        Partial ranks (stream ended without its end record): ocean rank 3 (world rank 3, host node01, pid 4103)"#]].assert_eq(&tail.join("\n"));
}

#[test]
fn summary_of_an_empty_run_says_so_without_failing() {
    check(
        &Run::default(),
        expect![[r#"
        Hark: 0 programs, 0 ranks
        No program was measured: no process loaded the probe, or none lived long enough to connect.

        0 events, 0 lost
    "#]],
    );
}

/// The lines of the summary from the heading of `program` up to its
/// first table of MPI functions or pairs.
fn head_of(text: &str, program: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with(&format!("== {program}")))
        .take_while(|l| !l.starts_with("   MPI function") && !l.starts_with("   Heaviest"))
        .collect();
    lines.join("\n")
}

#[test]
fn a_program_without_efficiencies_gets_no_verdict_and_an_empty_digest_says_so() {
    let mut run = common::two_programs();
    let atmos = &mut run.programs[1];
    atmos.efficiency = None;
    atmos.digest.clear();
    atmos.mpi.clear();
    let ocean = &mut run.programs[0];
    ocean.digest.clear();
    ocean.efficiency_by_region.clear();
    let text = hark_outputs::summary::render(&run);
    expect![[r#"
        == atmos — 2 processes, wall time 2.380 s, no MPI
           command: ./atmos --grid C48

           Call site      function  calls     bytes       time   waiting
           atmos.f90:120  MPI_Recv  1,000  62.5 KiB  170.00 ms  90.00 ms
           atmos.f90:98   MPI_Send  1,000  62.5 KiB  134.00 ms      0 ns
           io.f90:57         write     40  2.50 KiB   12.00 ms      0 ns
    "#]]
    .assert_eq(&head_of(&text, "atmos"));
    expect![[r#"
        == ocean — 4 ranks, wall time 2.450 s, MPI 22.6 % of rank time
           command: ./ocean -n 1000
           MPI share per rank: min 21.0 % (rank 1), mean 22.6 %, max 24.2 % (rank 0)

           Efficiency     parallel  load balance  communication  serialisation  transfer
           whole program    77.3 %        97.9 %         78.9 %         91.7 %    86.1 %
           Findings: none
    "#]]
    .assert_eq(&head_of(&text, "ocean"));
}

#[test]
fn findings_are_listed_costliest_first_whatever_their_order_in_the_model() {
    let mut run = common::two_programs();
    run.programs[0].digest.reverse();
    let text = hark_outputs::summary::render(&run);
    let titles: Vec<&str> = text
        .lines()
        .filter(|l| {
            ["   high ", "   medium ", "   low "]
                .iter()
                .any(|s| l.starts_with(s))
        })
        .collect();
    expect![[r#"
        medium  Late Sender in MPI_Waitall — 350.00 ms, 3.6 % of rank time
        low     Wait at N×N in MPI_Allreduce — 195.00 ms, 2.0 % of rank time
        low     Load imbalance — 160.00 ms, 1.6 % of rank time
        low     Late Sender in MPI_Recv — 90.00 ms, 1.9 % of rank time"#]]
    .assert_eq(
        &titles
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join("\n"),
    );
}
