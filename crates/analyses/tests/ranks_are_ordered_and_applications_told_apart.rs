mod common;
use common::*;

#[test]
fn mpmd_applications_of_one_executable_are_told_apart_by_appnum() {
    // mpirun -np 2 ./solver : -np 1 ./solver (e.g. with other arguments).
    let app = |rank: i32, appnum: i32| {
        let mut p = Proc::mpi("solver", rank, 3);
        p.steps[0] = Step::Rank(rank_info(rank, 3, appnum));
        p.pack(vec![mpi("MPI_Barrier", 0, 10)]).end()
    };
    let programs = run(&[app(2, 1), app(0, 0), app(1, 0)]);
    let names: Vec<(&str, usize)> = programs
        .iter()
        .map(|p| (p.name.as_str(), p.ranks))
        .collect();
    assert_eq!(names, vec![("solver (app 0)", 2), ("solver (app 1)", 1)]);
    assert_eq!(programs[1].rank_info[0].world_rank, 2);
}

#[test]
fn processes_without_mpi_are_ranked_in_order_of_connection() {
    let serial = |pid: u32| {
        let mut p = Proc {
            hello: hello("tool", -1, -1),
            offset_ns: 0,
            steps: vec![],
        };
        p.hello.pid = pid;
        p.end()
    };
    let p = run(&[serial(30), serial(10), serial(20)]).remove(0);
    let pids: Vec<u32> = p.rank_info.iter().map(|r| r.pid).collect();
    assert_eq!(pids, vec![30, 10, 20]);
    assert!(p.rank_info.iter().all(|r| r.world_rank == -1 && !r.partial));
}

#[test]
fn the_launchers_rank_is_used_until_the_rank_frame_arrives() {
    let early = |rank: i32| Proc {
        hello: hello("app", rank, 2),
        offset_ns: 0,
        steps: vec![Step::Pack(vec![mpi("MPI_Init", 0, 5)])],
    };
    let p = run(&[early(1), early(0)]).remove(0);
    let worlds: Vec<i32> = p.rank_info.iter().map(|r| r.world_rank).collect();
    assert_eq!(worlds, vec![0, 1]);
    assert!(
        p.rank_info.iter().all(|r| r.partial),
        "no end-of-stream came"
    );
}
