mod common;

use hark_wire::*;

#[test]
fn every_frame_round_trips() {
    let stream = common::sample_stream();
    let mut r = FrameReader::new(&stream[..]);

    match r.next_frame().unwrap() {
        Some(Frame::Hello(h)) => assert_eq!(h, common::sample_hello()),
        f => panic!("expected hello, got {f:?}"),
    }
    match r.next_frame().unwrap() {
        Some(Frame::Defs(d)) => {
            assert_eq!(d.len(), 5);
            assert_eq!(
                d[4],
                Def::Function {
                    id: 1,
                    addr: 0x5555_0000_1234
                }
            );
            assert_eq!(
                d[1],
                Def::Comm {
                    id: 2,
                    members: vec![0, 2],
                    remote: vec![1, 3]
                }
            );
            assert_eq!(
                d[2],
                Def::File {
                    id: 3,
                    path: "/tmp/out \u{e9}.dat".into()
                }
            );
        }
        f => panic!("expected defs, got {f:?}"),
    }
    match r.next_frame().unwrap() {
        Some(Frame::Rank(i)) => assert_eq!((i.world_rank, i.flavour), (2, Flavour::Mpich)),
        f => panic!("expected rank info, got {f:?}"),
    }
    match r.next_frame().unwrap() {
        // Not converted under the TSC: the probe sends nanoseconds.
        Some(Frame::Clock(c)) => {
            assert_eq!(c, common::sample_clock());
            assert_eq!(c.offset_ns(), 50_000_000);
        }
        f => panic!("expected clock, got {f:?}"),
    }
    match r.next_frame().unwrap() {
        Some(Frame::Pack { seq, events }) => {
            assert_eq!(seq, 0);
            assert_eq!(events.len(), 2);
            let send = &events[0];
            assert_eq!(op::name(send.op()), "MPI_Send");
            assert_eq!(
                (send.bytes.get(), send.peer.get(), send.tag.get()),
                (800, 3, 7)
            );
            // Ticks 10..20 at 1.5 ns per tick from tick 4 = 1000 ns.
            assert_eq!((send.start.get(), send.end.get()), (1009, 1024));
            assert_eq!(send.duration(), 15);
            assert_eq!(events[1].start.get(), 1039);
            assert_eq!(events[1].extra(), EXTRA_NONE);
            assert_eq!(op::kind(events[1].op()), op::OpKind::User);
        }
        f => panic!("expected pack, got {f:?}"),
    }
    match r.next_frame().unwrap() {
        Some(Frame::End(e)) => assert_eq!(e.reason, EndReason::Finalize),
        f => panic!("expected end, got {f:?}"),
    }
    assert!(r.next_frame().unwrap().is_none());
    assert_eq!(r.offset(), stream.len() as u64);
}

#[test]
fn ticks_become_nanoseconds_only_under_a_tsc_hello() {
    let scale = TickScale {
        tsc0: 100,
        ns0: 7,
        mult: 1 << 32,
    };
    // Before the anchor counts as the anchor; far ticks do not overflow.
    assert_eq!(scale.ns(50), 7);
    assert_eq!(scale.ns(150), 57);
    let ghz3 = TickScale {
        tsc0: 0,
        ns0: 0,
        mult: (1u64 << 32) / 3,
    };
    // A year of ticks at 3 GHz is a year, to within a microsecond per second.
    let year_ns = 86_400 * 365 * 1_000_000_000u64;
    let got = ghz3.ns(3 * year_ns);
    assert!(
        got <= year_ns && year_ns - got < year_ns / 1_000_000,
        "{got}"
    );

    let mut hello = common::sample_hello();
    hello.clock = ClockSource::Monotonic;
    let mut s = Vec::new();
    hello.encode(&mut s);
    encode_pack(0, &[Event::new(op::REGION_BEGIN, 10, 20)], &mut s);
    let mut r = FrameReader::new(&s[..]);
    assert!(matches!(r.next_frame().unwrap(), Some(Frame::Hello(_))));
    match r.next_frame().unwrap() {
        Some(Frame::Pack { events, .. }) => {
            assert_eq!((events[0].start.get(), events[0].end.get()), (10, 20))
        }
        f => panic!("expected pack, got {f:?}"),
    }
}

#[test]
fn a_pack_built_in_place_reads_like_an_encoded_one() {
    let ev = Event::new(op::io::WRITE, 1, 2);
    let mut encoded = Vec::new();
    encode_pack(9, &[ev, ev], &mut encoded);

    let mut in_place = vec![0u8; HEADER_SIZE + PACK_HEADER_SIZE];
    in_place.extend_from_slice(zerocopy::IntoBytes::as_bytes(&[ev, ev][..]));
    write_pack_header(&mut in_place, 9, 2);
    assert_eq!(in_place, encoded);
}

#[test]
fn events_are_read_in_place_at_any_alignment() {
    let mut bytes = vec![0u8; 1];
    bytes.extend_from_slice(zerocopy::IntoBytes::as_bytes(
        &[Event::new(op::MARK, 5, 6)][..],
    ));
    let events = Event::slice_from(&bytes[1..]).unwrap();
    assert_eq!(events[0].start.get(), 5);
    assert!(Event::slice_from(&bytes[1..EVENT_SIZE]).is_err());
}

#[test]
fn every_op_code_has_a_name_and_a_kind() {
    for i in 0..mpi::FUNCTIONS.len() {
        let code = op::MPI_BASE + i as u16;
        assert_eq!(op::kind(code), op::OpKind::Mpi(i));
        assert_eq!(op::mpi_op(op::name(code)), Some(code));
    }
    for (i, name) in op::IO_NAMES.iter().enumerate() {
        assert_eq!(op::name(op::IO_BASE + i as u16), *name);
    }
    assert_eq!(op::kind(0), op::OpKind::Unknown);
    assert_eq!(op::kind(u16::MAX), op::OpKind::Unknown);
}

#[test]
fn mpi_function_names_are_unique_and_standard() {
    let mut seen = std::collections::HashSet::new();
    for f in mpi::FUNCTIONS {
        assert!(f.name.starts_with("MPI_"), "{}", f.name);
        assert!(seen.insert(f.name), "{} listed twice", f.name);
    }
}

#[test]
fn a_cpus_frame_round_trips_and_a_bad_one_is_refused() {
    let mut bytes = Vec::new();
    encode_cpus(&[0, 3, 4, 8191], &mut bytes);
    encode_cpus(&[], &mut bytes);
    let mut r = FrameReader::new(&bytes[..]);
    match r.next_frame().unwrap() {
        Some(Frame::Cpus(c)) => assert_eq!(c, vec![0, 3, 4, 8191]),
        f => panic!("expected cpus, got {f:?}"),
    }
    match r.next_frame().unwrap() {
        Some(Frame::Cpus(c)) => assert!(c.is_empty()),
        f => panic!("expected cpus, got {f:?}"),
    }
    // Not ascending, a number past the largest kernel's, a count past the frame.
    for bad in [&[3u32, 1][..], &[9000], &[]] {
        let mut b = Vec::new();
        encode_cpus(&[], &mut b);
        let mut payload = ((bad.len() as u32) + u32::from(bad.is_empty()) * 5)
            .to_le_bytes()
            .to_vec();
        for c in bad {
            payload.extend_from_slice(&c.to_le_bytes());
        }
        b[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        b.truncate(HEADER_SIZE);
        b.extend_from_slice(&payload);
        let err = FrameReader::new(&b[..]).next_frame().unwrap_err();
        assert!(err.to_string().contains("cpus"), "{err}");
    }
}
