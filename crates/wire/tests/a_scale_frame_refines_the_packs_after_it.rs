//! A `Scale` frame (a TSC rate measured over a longer time, same anchor)
//! changes how the packs after it are turned into nanoseconds, and only
//! those; one that is not a refinement of the stream's calibration, or
//! comes in a stream not on the TSC, is a malformed stream.

#[allow(dead_code)] // Not every test file uses every sample.
mod common;

use hark_wire::*;

/// The sample `Hello` (ticks from 4 = 1000 ns, 1.5 ns per tick), then one
/// pack, `scale`, and the same pack again: the two packs' first start, in
/// ns. The event starts 10,000 ticks after the anchor.
fn starts(hello: &Hello, scale: TickScale) -> Result<Vec<u64>, Error> {
    let mut bytes = Vec::new();
    hello.encode(&mut bytes);
    let ev = Event::new(op::mpi_op("MPI_Barrier").unwrap(), 10_004, 10_010);
    encode_pack(0, &[ev], &mut bytes);
    scale.encode(&mut bytes);
    encode_pack(1, &[ev], &mut bytes);
    let mut r = FrameReader::new(&bytes[..]);
    let mut starts = Vec::new();
    while let Some(f) = r.next_frame()? {
        if let Frame::Pack { events, .. } = f {
            starts.push(events[0].start.get());
        }
    }
    Ok(starts)
}

fn sample_scale() -> TickScale {
    match common::sample_hello().clock {
        ClockSource::Tsc(t) => t,
        ClockSource::Monotonic => unreachable!("the sample Hello is on the TSC"),
    }
}

#[test]
fn the_packs_after_a_scale_frame_take_its_rate() {
    let old = sample_scale();
    // 1/128 ns more per tick: 10,000 ticks are 15,078.125 ns, not 15,000.
    let new = TickScale {
        mult: old.mult + (1 << 25),
        ..old
    };
    assert_eq!(
        starts(&common::sample_hello(), new).unwrap(),
        [16_000, 16_078]
    );
}

#[test]
fn a_scale_frame_that_is_no_refinement_is_refused() {
    let old = sample_scale();
    for (what, bad) in [
        ("another anchor", TickScale { tsc0: 5, ..old }),
        ("another anchor", TickScale { ns0: 1, ..old }),
        (
            "2 % faster",
            TickScale {
                mult: old.mult + old.mult / 50,
                ..old
            },
        ),
    ] {
        let e = starts(&common::sample_hello(), bad).expect_err(what);
        assert!(e.to_string().contains("Scale frame"), "{what}: {e}");
    }
    let monotonic = Hello {
        clock: ClockSource::Monotonic,
        ..common::sample_hello()
    };
    let e = starts(&monotonic, old).expect_err("a Scale frame under CLOCK_MONOTONIC");
    assert!(e.to_string().contains("did not declare the TSC"), "{e}");
}
