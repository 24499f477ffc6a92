mod common;
use common::*;

#[test]
fn a_dup_of_world_stays_apart_from_world_and_local_ids_do_not_matter() {
    // Both ranks define world and its dup, with different local ids, and a
    // split communicator holding only themselves.
    let rank = |r: i32, ids: [u32; 3]| {
        Proc::mpi("app", r, 2)
            .defs(vec![
                comm(ids[0], &[0, 1]),
                comm(ids[1], &[0, 1]),
                comm(ids[2], &[r]),
            ])
            .pack(vec![
                mpi("MPI_Barrier", 0, 10).obj(ids[0]),
                mpi("MPI_Allreduce", 10, 30).obj(ids[1]).bytes(8).extra(8),
                mpi("MPI_Allreduce", 30, 40).obj(ids[1]).bytes(8).extra(8),
                mpi("MPI_Bcast", 40, 41).obj(ids[2]).bytes(4).peer(r),
            ])
            .end()
    };
    let p = run(&[rank(0, [1, 2, 3]), rank(1, [4, 9, 12])]).remove(0);
    assert_eq!(
        p.collectives.len(),
        4,
        "world, dup, and one self-like comm per rank"
    );
    let world = &p.collectives[0];
    assert_eq!(world.members, vec![0, 1]);
    assert_eq!(world.functions["MPI_Barrier"].calls, 2);
    assert!(!world.functions.contains_key("MPI_Allreduce"));
    let dup = &p.collectives[1];
    assert_eq!(dup.members, vec![0, 1]);
    let ar = dup.functions["MPI_Allreduce"];
    assert_eq!((ar.calls, ar.bytes, ar.time_ns), (4, 32, 60));
    assert_eq!(p.collectives[2].members, vec![0]);
    assert_eq!(p.collectives[3].members, vec![1]);
}

#[test]
fn a_collective_on_an_undefined_communicator_is_kept_and_reported() {
    let p = run(&[Proc::mpi("app", 0, 1)
        .pack(vec![mpi("MPI_Barrier", 0, 1).obj(99)])
        .end()])
    .remove(0);
    assert_eq!(p.collectives.len(), 1);
    assert!(p.collectives[0].members.is_empty());
    assert_eq!(p.collectives[0].functions["MPI_Barrier"].calls, 1);
    assert!(p.diagnostics.iter().any(|d| d.contains("never defined")));
}
