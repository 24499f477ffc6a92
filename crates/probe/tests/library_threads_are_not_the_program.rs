//! Threads an MPI library starts inside `MPI_Init` (Open MPI's PMIx and
//! progress threads talk to the launcher over sockets) are the library's,
//! not the program's: none of their I/O may appear in the stream. Before
//! the fix, every Open MPI rank reported reads and writes on `<fd 13>` and
//! `<fd 14>` that the program never made.

mod mpi_support;
use hark_wire::{op, Def};
use mpi_support::*;

fn check(mpi: Mpi) {
    let exe = build(mpi, "writes_one_file.c", &[]);
    // The ranks write their files in a directory of their own.
    let dir = std::env::temp_dir().join(format!(
        "hark-library-threads-{mpi:?}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let job = run_in_dir(mpi, 2, &exe, &[], true, &[("HARK_IO", "1")], Some(&dir));
    assert!(job.success, "the job failed: {}{}", job.stdout, job.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    for rank in 0..2 {
        let s = job.rank(rank);
        let path_of = |id: u32| {
            s.defs.iter().find_map(|d| match d {
                Def::File { id: i, path } if *i == id => Some(path.clone()),
                _ => None,
            })
        };
        let mut io: Vec<(String, String, u64)> = s
            .events
            .iter()
            .filter(|e| matches!(op::kind(e.op()), op::OpKind::Io(_)))
            .map(|e| {
                let file = path_of(e.obj.get()).unwrap_or_else(|| format!("<fd {}>", e.peer.get()));
                (op::name(e.op()).to_string(), file, e.bytes.get())
            })
            .collect();
        io.sort();
        let mine = format!("out-{rank}.dat");
        let mut want = vec![
            ("close".to_string(), mine.clone(), 0),
            ("open".to_string(), mine.clone(), 0),
            ("write".to_string(), mine, 1000),
        ];
        if rank == 0 {
            // `printf("done\n")` compiles to `puts`, recorded as `fputs`.
            want.push(("fputs".to_string(), "<stdout>".to_string(), 5));
        }
        want.sort();
        assert_eq!(
            io, want,
            "{mpi:?} rank {rank}: I/O the program did not make was recorded"
        );
    }
}

#[test]
fn open_mpi_library_threads_are_not_recorded() {
    check(Mpi::OpenMpi);
}

#[test]
fn mpich_library_threads_are_not_recorded() {
    check(Mpi::Mpich);
}
