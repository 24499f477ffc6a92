//! A C program with known MPI calls and bytes (blocking, non-blocking and
//! persistent point-to-point, `MPI_ANY_SOURCE` with `Waitany`/`Testsome`,
//! probes, derived types, `MPI_PROC_NULL`, zero counts, `MPI_IN_PLACE`,
//! collectives on world and on split/dup communicators), run on 4 ranks
//! under real `mpirun`: the decoded stream of every rank equals, line for
//! line, `tests/programs/mpi/p2p_and_collectives.expected` — the same file
//! for Open MPI and for MPICH.

mod mpi_support;
use mpi_support::*;

/// The expected lines of each rank, from the `.expected` file.
fn expected(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("tests/programs/mpi").join(name)).unwrap();
    let mut ranks: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.starts_with("== rank") {
            ranks.push(String::new());
        } else if let Some(r) = ranks.last_mut() {
            r.push_str(line);
            r.push('\n');
        }
    }
    ranks
}

fn check(mpi: Mpi) {
    let exe = build(mpi, "p2p_and_collectives.c", &[]);
    let job = run(mpi, 4, &exe, &[]);
    assert!(job.success, "the job failed: {}", job.stderr);
    let want = expected("p2p_and_collectives.expected");
    assert_eq!(want.len(), 4);
    for (r, want) in want.iter().enumerate() {
        let s = job.rank(r as i32);
        assert!(s.is_clean(), "rank {r}: {:?}", s.closed);
        assert_lines(&format!("{mpi:?} rank {r}"), &render(s), want);
    }
}

#[test]
fn open_mpi_streams_equal_what_the_program_did() {
    check(Mpi::OpenMpi);
}

#[test]
fn mpich_streams_equal_what_the_program_did() {
    check(Mpi::Mpich);
}
