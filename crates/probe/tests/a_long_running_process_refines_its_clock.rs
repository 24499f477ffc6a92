//! Under the TSC, a process measures the TSC's rate again as it ages (at
//! 1 s, 2 s, 4 s, ...), from the anchor its `Hello` carries, and ships each
//! refinement as a `Scale` frame for the packs after it
//! (`docs/wire.md`): a `sleep` of 3.5 s sends one or two (the second is
//! due when its age has doubled since the first, which a loaded machine
//! may tick late), never a third (due at 4 s), each a refinement of its
//! calibration.

mod common;

use common::*;
use hark_wire::ClockSource;

/// Runs the sleep with `HARK_SHM=shm`: the frame through the shared-memory
/// ring or the socket.
fn check(shm: &str) {
    let probed = Probed::new(&format!("refines-{shm}")).env("HARK_SHM", shm);
    let run = probed.run("/bin/sleep".as_ref(), &["3.5"]);
    assert!(run.status.success(), "{}", run.stderr);
    let s = run.only_stream();
    assert_eq!(s.shm, shm == "1");
    let ClockSource::Tsc(first) = s.hello.clock else {
        eprintln!("skipped: no usable TSC here");
        return;
    };
    assert!(matches!(s.scales.len(), 1 | 2), "{:?}", s.scales);
    for t in &s.scales {
        assert_eq!((t.tsc0, t.ns0), (first.tsc0, first.ns0));
        assert!(
            t.mult.abs_diff(first.mult) <= first.mult / 1000,
            "{t:?} vs {first:?}"
        );
    }
}

#[test]
fn a_sleep_of_three_seconds_ships_its_refinements_through_the_ring() {
    check("1");
}

#[test]
fn a_sleep_of_three_seconds_ships_its_refinements_through_the_socket() {
    check("0");
}
