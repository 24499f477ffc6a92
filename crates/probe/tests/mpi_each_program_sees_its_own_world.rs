//! Virtualised worlds (`HARK_VIRTUALISE=1`, `docs/mpi.md`): two programs
//! launched as one MPMD job (`mpirun -np 2 a : -np 2 b`) each see only
//! themselves in `MPI_COMM_WORLD` — its size and ranks, `MPI_APPNUM` and the
//! other attributes, `MPI_Comm_compare`, `MPI_Comm_dup`, an intercommunicator
//! with the world as peer, an error handler set on it, point-to-point and
//! collectives over it — from C and from each Fortran binding, on Open MPI
//! and on MPICH, while the probe still reports universe ranks and aligns
//! clocks over the whole job. Without the setting nothing changes.

mod mpi_support;
use mpi_support::*;
use std::collections::BTreeMap;

/// One printed line of `world_view`: its first word (the language or
/// binding) and its `key=value` fields.
fn lines(stdout: &str) -> Vec<(String, BTreeMap<String, String>)> {
    stdout
        .lines()
        .filter(|l| l.contains(" appnum="))
        .map(|l| {
            let mut words = l.split_whitespace();
            let who = words.next().unwrap().to_string();
            let fields = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (who, fields)
        })
        .collect()
}

fn int(fields: &BTreeMap<String, String>, key: &str) -> i32 {
    fields[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key}={}", fields[key]))
}

/// `world_view.c` on 2 ranks beside `world_view_f.F90` through `binding` on 2
/// ranks; both virtualised.
fn c_beside_fortran(mpi: Mpi, binding: u8) {
    // One executable per test (tests run in parallel, `build` names by flags).
    let flag = format!("-DBINDING={binding}");
    let c = build(mpi, "world_view.c", &[&flag]);
    let f = build(mpi, "world_view_f.F90", &[&flag]);
    let job = run_mpmd(mpi, &[(2, &c), (2, &f)], true, &[("HARK_VIRTUALISE", "1")]);
    assert!(job.success, "the job failed: {}", job.stderr);
    let seen = lines(&job.stdout);
    assert_eq!(seen.len(), 4, "one line per process:\n{}", job.stdout);
    let mut ranks: Vec<(i32, i32)> = Vec::new();
    for (who, l) in &seen {
        let appnum = int(l, "appnum");
        let rank = int(l, "rank");
        let context = format!("{who} on {mpi:?}: {l:?}");
        // The C program is the first context, the Fortran one the second.
        assert_eq!(appnum, i32::from(who != "c"), "{context}");
        assert_eq!(int(l, "size"), 2, "{context}");
        for key in [
            "alone",
            "same",
            "dup",
            "ring",
            "errors_return",
            "collectives",
        ] {
            assert_eq!(l[key], "1", "{key}: {context}");
        }
        assert_eq!(l["name"], "MPI_COMM_WORLD", "{context}");
        // The intercommunicator's peer is the other rank of this program.
        assert_eq!(int(l, "remote"), appnum * 100 + (rank ^ 1), "{context}");
        ranks.push((appnum, rank));
    }
    ranks.sort_unstable();
    assert_eq!(ranks, [(0, 0), (0, 1), (1, 0), (1, 1)]);

    // The probe reports universe ranks: program 1's ranks are 2 and 3, its
    // world a communicator of those two, its ring neighbour a universe rank.
    assert_eq!(job.streams.len(), 4);
    for u in 0..4 {
        let s = job.rank(u);
        let info = &s.ranks[0];
        assert_eq!((info.world_size, info.appnum), (4, u / 2), "rank {u}");
        let first = u / 2 * 2;
        let world = format!("[{first} {}]", first + 1);
        let events = render(s);
        let collectives: Vec<&String> = events
            .iter()
            .filter(|l| {
                [
                    "MPI_Allreduce ",
                    "MPI_Bcast ",
                    "MPI_Allgather ",
                    "MPI_Barrier ",
                ]
                .iter()
                .any(|c| l.starts_with(c))
            })
            .collect();
        assert!(!collectives.is_empty(), "rank {u}: {events:#?}");
        for l in &collectives {
            assert!(l.contains(&world), "rank {u}: {l} is not on {world}");
        }
        let right = first + (u - first + 1) % 2;
        let ring = format!("MPI_Sendrecv {world} peer={right} tag=7 bytes=4");
        assert!(
            events.iter().any(|l| l.starts_with(&ring)),
            "rank {u}: no `{ring}` in {events:#?}"
        );
        // The clock alignment still ran over the whole job.
        assert_eq!(s.clocks.len(), 2, "rank {u}: {:?}", s.clocks);
    }
}

#[test]
fn open_mpi_c_beside_mpif_h() {
    c_beside_fortran(Mpi::OpenMpi, 1);
}

#[test]
fn open_mpi_c_beside_use_mpi() {
    c_beside_fortran(Mpi::OpenMpi, 2);
}

#[test]
fn open_mpi_c_beside_use_mpi_f08() {
    c_beside_fortran(Mpi::OpenMpi, 3);
}

#[test]
fn mpich_c_beside_mpif_h() {
    c_beside_fortran(Mpi::Mpich, 1);
}

#[test]
fn mpich_c_beside_use_mpi() {
    c_beside_fortran(Mpi::Mpich, 2);
}

#[test]
fn mpich_c_beside_use_mpi_f08() {
    c_beside_fortran(Mpi::Mpich, 3);
}

/// Two copies of `world_view.c`, with and without the setting: without it
/// they share one world of 4 (the old behaviour); with it each has its own,
/// and the world's attributes answer the same in both modes.
fn with_and_without(mpi: Mpi) {
    let c = build(mpi, "world_view.c", &["-DPAIR"]);
    let off = run_mpmd(mpi, &[(2, &c), (2, &c)], true, &[]);
    assert!(off.success, "the job failed: {}", off.stderr);
    let on = run_mpmd(mpi, &[(2, &c), (2, &c)], true, &[("HARK_VIRTUALISE", "1")]);
    assert!(on.success, "the job failed: {}", on.stderr);
    let (off_lines, on_lines) = (lines(&off.stdout), lines(&on.stdout));
    assert_eq!(off_lines.len(), 4, "{}", off.stdout);
    assert_eq!(on_lines.len(), 4, "{}", on.stdout);
    let mut off_ranks: Vec<i32> = off_lines.iter().map(|(_, l)| int(l, "rank")).collect();
    off_ranks.sort_unstable();
    assert_eq!(
        off_ranks,
        [0, 1, 2, 3],
        "one world of 4 without the setting"
    );
    let universe = |ls: &[(String, BTreeMap<String, String>)]| -> Vec<(i32, String)> {
        let mut v: Vec<_> = ls
            .iter()
            .map(|(_, l)| (int(l, "appnum"), l["universe"].clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        universe(&off_lines),
        universe(&on_lines),
        "MPI_APPNUM, MPI_UNIVERSE_SIZE"
    );
    for (_, l) in &off_lines {
        assert_eq!((int(l, "size"), l["alone"].as_str()), (4, "0"), "{l:?}");
        assert_eq!(l["collectives"], "1", "{l:?}");
    }
    for (_, l) in &on_lines {
        assert_eq!((int(l, "size"), l["alone"].as_str()), (2, "1"), "{l:?}");
        assert_eq!(l["collectives"], "1", "{l:?}");
    }
    // Without the setting, the world the probe records is the whole job.
    for u in 0..4 {
        let events = render(off.rank(u));
        assert!(
            events
                .iter()
                .any(|l| l.starts_with("MPI_Allreduce [0 1 2 3] ")),
            "rank {u}: {events:#?}"
        );
    }
}

#[test]
fn open_mpi_without_the_setting_the_job_is_one_world() {
    with_and_without(Mpi::OpenMpi);
}

#[test]
fn mpich_without_the_setting_the_job_is_one_world() {
    with_and_without(Mpi::Mpich);
}

/// A program alone in its job records the same stream with the setting on
/// (its own world has the same members as the real one), except for the ids
/// of the communicators it creates: its world is one more communicator.
fn without_comm_ids(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|l| match l.split_once(" extra=") {
            Some((head, _)) if l.starts_with("MPI_Comm_") => format!("{head} extra=id"),
            _ => l,
        })
        .collect()
}

fn alone_the_stream_is_unchanged(mpi: Mpi) {
    let exe = build(mpi, "p2p_and_collectives.c", &["-DVIRTUALISED"]);
    let want = expected("p2p_and_collectives.expected");
    let job = run_with(
        mpi,
        want.len(),
        &exe,
        &[],
        true,
        &[("HARK_VIRTUALISE", "1")],
    );
    assert!(job.success, "the job failed: {}", job.stderr);
    for (r, want) in want.iter().enumerate() {
        let s = job.rank(r as i32);
        assert!(s.is_clean(), "rank {r}: {:?}", s.closed);
        let want = without_comm_ids(want.lines().map(|l| l.trim().to_string()));
        assert_lines(
            &format!("virtualised on {mpi:?}, rank {r}"),
            &without_comm_ids(render(s)),
            &want.join("\n"),
        );
    }
}

#[test]
fn open_mpi_alone_the_stream_is_unchanged() {
    alone_the_stream_is_unchanged(Mpi::OpenMpi);
}

#[test]
fn mpich_alone_the_stream_is_unchanged() {
    alone_the_stream_is_unchanged(Mpi::Mpich);
}
