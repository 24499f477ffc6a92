mod common;
use common::*;
use hark_wire::op::io;

#[test]
fn posix_stdio_and_mpi_io_land_under_the_same_path_on_every_rank() {
    let rank = |r: i32, id: u32| {
        Proc::mpi("app", r, 2)
            .defs(vec![file(id, "/tmp/out.dat")])
            .pack(vec![
                ev(io::OPEN, 0, 5).obj(id).peer(3),
                ev(io::WRITE, 5, 15).obj(id).peer(3).bytes(4096),
                ev(io::FWRITE, 15, 16).obj(id).bytes(10),
                mpi("MPI_File_write_at", 20, 40)
                    .obj(id)
                    .bytes(1000 * (r as u64 + 1)),
                ev(io::READ, 40, 41).obj(id).peer(3).bytes(7),
                ev(io::WRITE, 41, 42).peer(1).bytes(12),
            ])
            .end()
    };
    let p = run(&[rank(0, 5), rank(1, 17)]).remove(0);
    let paths: Vec<&str> = p.io.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["/tmp/out.dat", "<stdout>"]);
    let f = &p.io.files[0];
    assert_eq!(f.ops["write"].calls, 2);
    assert_eq!(f.ops["write"].bytes, 8192);
    assert_eq!(f.ops["fwrite"].bytes, 20);
    assert_eq!(f.ops["MPI_File_write_at"].bytes, 3000);
    assert_eq!(f.ops["open"].time_ns, 10);
    assert_eq!(f.write_bytes, vec![4096 + 10 + 1000, 4096 + 10 + 2000]);
    assert_eq!(f.read_bytes, vec![7, 7]);
    assert_eq!(p.io.per_rank[1]["write"].bytes, 4096 + 12);
    assert_eq!(p.mpi["MPI_File_write_at"].bytes, vec![1000, 2000]);
}

#[test]
fn a_non_blocking_mpi_io_call_counts_the_bytes_it_asked_for_once() {
    // As the probe writes it: the call holds the posted bytes and the request
    // id; its completion repeats them (or reports a cancellation).
    let proc = Proc::mpi("app", 0, 1)
        .defs(vec![file(4, "/tmp/ckpt")])
        .pack(vec![
            mpi("MPI_File_iwrite_at", 0, 10)
                .obj(4)
                .peer(-1)
                .bytes(512)
                .extra(11),
            mpi("MPI_Wait", 20, 50).bytes(1),
            ev(hark_wire::op::COMPLETE_OTHER, 20, 50)
                .obj(4)
                .peer(-1)
                .bytes(512)
                .extra(11),
        ])
        .end();
    let p = run(&[proc]).remove(0);
    let f = &p.io.files[0];
    assert_eq!(f.path, "/tmp/ckpt");
    let t = f.ops["MPI_File_iwrite_at"];
    assert_eq!((t.calls, t.bytes, t.time_ns), (1, 512, 10));
    assert_eq!(f.write_bytes, vec![512]);
    assert_eq!(p.mpi["MPI_File_iwrite_at"].bytes, vec![512]);
    assert_eq!(p.timeslices.metrics["io_bytes"][0].iter().sum::<u64>(), 512);
    assert!(p.p2p.by_function.is_empty(), "not a message");
}

#[test]
fn a_rank_that_only_opened_a_file_is_counted_among_its_users() {
    // Rank 0 opens and closes /dev/null, rank 1 also writes nothing to it.
    let rank = |r: i32| {
        Proc::mpi("app", r, 2)
            .defs(vec![file(3, "/dev/null")])
            .pack(vec![
                ev(io::OPEN, 0, 5).obj(3).peer(4),
                ev(io::CLOSE, 5, 6).obj(3).peer(4),
            ])
            .end()
    };
    let p = run(&[rank(0), rank(1)]).remove(0);
    let f = &p.io.files[0];
    assert_eq!(f.path, "/dev/null");
    assert_eq!(
        (f.read_bytes.clone(), f.write_bytes.clone()),
        (vec![0, 0], vec![0, 0])
    );
    assert_eq!(f.calls, vec![2, 2], "opens and closes are the ranks' calls");
}
