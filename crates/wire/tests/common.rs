//! A stream holding one frame of every kind, shared by the wire tests.

use hark_wire::*;

pub fn sample_stream() -> Vec<u8> {
    let mut s = Vec::new();
    sample_hello().encode(&mut s);
    Def::encode_all(
        &[
            Def::Comm {
                id: 1,
                members: vec![0, 1, 2, 3],
                remote: vec![],
            },
            Def::Comm {
                id: 2,
                members: vec![0, 2],
                remote: vec![1, 3],
            },
            Def::File {
                id: 3,
                path: "/tmp/out \u{e9}.dat".into(),
            },
            Def::Name {
                id: 4,
                kind: NameKind::Region,
                name: "solve".into(),
            },
            Def::Function {
                id: 1,
                addr: 0x5555_0000_1234,
            },
        ],
        &mut s,
    );
    RankInfo {
        world_rank: 2,
        world_size: 4,
        appnum: 1,
        thread_level: 3,
        flavour: Flavour::Mpich,
        library: "MPICH Version: 4.0.2".into(),
    }
    .encode(&mut s);
    sample_clock().encode(&mut s);
    let mut a = Event::new(op::mpi_op("MPI_Send").unwrap(), 10, 20);
    a.bytes.set(800);
    a.peer.set(3);
    a.tag.set(7);
    a.obj.set(1);
    let b = Event::new(op::REGION_BEGIN, 30, 30);
    encode_pack(0, &[a, b], &mut s);
    End {
        events_written: 2,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Finalize,
    }
    .encode(&mut s);
    s
}

pub fn sample_hello() -> Hello {
    Hello {
        program: "app".into(),
        argv: vec!["./app".into(), "-n".into(), "10".into()],
        host: "node1".into(),
        pid: 4242,
        rank: 2,
        size: 4,
        job: "job-1".into(),
        // 1.5 ns per tick from tick 4 (= 1000 ns): the sample's events are
        // in ticks, and a reader sees them in nanoseconds.
        clock: ClockSource::Tsc(TickScale {
            tsc0: 4,
            ns0: 1000,
            mult: 3 << 31,
        }),
        clock_ns: 123,
        realtime_ns: 1_700_000_000_000_000_000,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
}

/// A clock alignment: 50 ms behind rank 0, in nanoseconds (never ticks).
pub fn sample_clock() -> ClockSync {
    ClockSync {
        phase: ClockPhase::Init,
        local_ns: 2_000_000_000,
        reference_ns: 2_050_000_000,
        round_trip_ns: 30_000,
        reference: ClockReference::WorldRank0,
        relay_bound_ns: 7_000,
    }
}
