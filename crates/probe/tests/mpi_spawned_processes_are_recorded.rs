//! `MPI_Comm_spawn` (Open MPI; Debian's MPICH fails to spawn even without
//! the probe): one parent spawns two children of the same program, and
//! over the intercommunicator each child gets 8 bytes and sends back 16.
//! The parent's stream records the spawn and defines the intercommunicator
//! (the children have no rank in the parent's world); the children, started
//! by the launcher with the same environment, stream too.

mod mpi_support;
use hark_wire::{Def, PEER_NONE};
use mpi_support::*;

#[test]
fn a_spawned_job_streams_and_its_intercommunicator_is_defined() {
    let exe = build(Mpi::OpenMpi, "spawn.c", &[]);
    let job = run_spawning(Mpi::OpenMpi, 1, 3, &exe);
    assert!(job.success, "{}", job.stderr);
    assert!(job.stdout.contains("parent done"), "{}", job.stdout);
    assert_eq!(job.streams.len(), 3, "{}", job.stderr);
    for s in &job.streams {
        assert!(s.is_clean(), "pid {}: {:?}", s.hello.pid, s.closed);
    }
    // The parent is the one stream of a one-rank world.
    let parent = job
        .streams
        .iter()
        .find(|s| s.ranks.first().map(|r| r.world_size) == Some(1))
        .expect("the parent's stream");
    let lines = render(parent);
    let spawn = lines
        .iter()
        .find(|l| l.starts_with("MPI_Comm_spawn "))
        .unwrap_or_else(|| panic!("no spawn in {lines:#?}"));
    // Made on MPI_COMM_WORLD; `extra` is the new communicator's id.
    assert!(spawn.starts_with("MPI_Comm_spawn [0] "), "{spawn}");
    let id: u32 = spawn.rsplit("extra=").next().unwrap().parse().unwrap();
    let def = parent.defs.iter().find_map(|d| match d {
        Def::Comm {
            id: i,
            members,
            remote,
        } if *i == id => Some((members.clone(), remote.clone())),
        _ => None,
    });
    assert_eq!(def, Some((vec![0], vec![PEER_NONE, PEER_NONE])));
    let sends: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("MPI_Send "))
        .collect();
    assert_eq!(sends.len(), 2, "{lines:#?}");
    for l in &sends {
        assert!(l.contains("tag=5 bytes=8"), "{l}");
    }
    let recvs = lines
        .iter()
        .filter(|l| l.starts_with("MPI_Recv ") && l.contains("tag=6 bytes=16"))
        .count();
    assert_eq!(recvs, 2, "{lines:#?}");
    // The children: a world of two, each with its parent's intercommunicator.
    for s in job.streams.iter().filter(|s| !std::ptr::eq(*s, parent)) {
        assert_eq!(s.ranks.first().map(|r| r.world_size), Some(2));
        let lines = render(s);
        assert!(
            lines.iter().any(|l| l.starts_with("MPI_Comm_get_parent")),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("MPI_Recv ") && l.contains("tag=5 bytes=8")),
            "{lines:#?}"
        );
    }
}
