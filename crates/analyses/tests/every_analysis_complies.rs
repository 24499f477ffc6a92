//! The shared compliance test every knowledge source passes (see the
//! contract in `hark_analyses::Analysis`): no panic on any input, results
//! independent of batching, the same result through the board as by hand.

mod common;
use common::*;
use hark_analyses::registry;
use hark_wire::Event;

#[test]
fn garbage_events_never_panic_and_are_reported() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let events: Vec<Event> = (0..20_000)
        .map(|_| {
            let mut e = Event::new(rng.next() as u16, rng.next(), rng.next());
            e.bytes.set(rng.next());
            e.extra.set(rng.next());
            e.obj.set(rng.next() as u32);
            e.peer.set(rng.next() as i32);
            e.tag.set(rng.next() as i32);
            e.thread.set(rng.next() as u16);
            e
        })
        .collect();
    let procs = [
        Proc::mpi("junk", 0, 2).pack(events.clone()).end(),
        Proc::mpi("junk", 1, 2).pack(events), // no end: partial
    ];
    let p = run(&procs).remove(0);
    assert_eq!(p.ranks, 2);
    assert!(p.rank_info[1].partial && !p.rank_info[0].partial);
    assert!(!p.diagnostics.is_empty());
    serde_json::to_string(&p).expect("the model serialises whatever came in");
}

#[test]
fn results_do_not_depend_on_how_packs_are_cut() {
    let procs: Vec<Proc> = (0..3).map(|r| busy(r, 3, 7 + r as u64)).collect();
    let whole = json(&run(&procs));
    for n in [1, 7, 1000] {
        let cut: Vec<Proc> = procs.iter().map(|p| p.rebatched(n)).collect();
        assert_eq!(json(&run(&cut)), whole, "packs of {n} events");
    }
}

#[test]
fn the_board_gives_the_same_model_as_feeding_by_hand() {
    let procs: Vec<Proc> = (0..4).map(|r| busy(r, 4, 100 + r as u64)).collect();
    let by_hand = json(&run(&procs));
    for workers in [1, 3] {
        assert_eq!(
            json(&run_on_board(&procs, workers)),
            by_hand,
            "{workers} workers"
        );
    }
}

#[test]
fn every_analysis_has_a_unique_kebab_case_name_and_a_description() {
    let all = registry::all();
    let mut names: Vec<&str> = all.iter().map(|a| a.spec().name).collect();
    for a in &all {
        let s = a.spec();
        assert!(
            s.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{}",
            s.name
        );
        assert!(s.description.ends_with('.'), "{}", s.name);
        assert!(
            !s.sensitivities.is_empty() && !s.fills.is_empty(),
            "{}",
            s.name
        );
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all.len());
    let order: Vec<&str> = all.iter().map(|a| a.spec().name).collect();
    assert_eq!(
        order[order.len() - 2..],
        ["density", "digest"],
        "density and the digest read the others"
    );
    assert!(registry::select(&["mpi-profile", "nope"]).is_err());
    let some = registry::select(&["density", "mpi-profile"]).unwrap();
    let order: Vec<&str> = some.iter().map(|a| a.spec().name).collect();
    assert_eq!(order, vec!["mpi-profile", "density"], "registry order");
}

#[test]
fn density_maps_lay_out_every_per_rank_metric() {
    let procs: Vec<Proc> = (0..4).map(|r| busy(r, 4, 5 + r as u64)).collect();
    let p = run(&procs).remove(0);
    let d = &p.density;
    assert!(d.contains_key("mpi_time_ns"));
    assert!(d.contains_key("MPI_Send.calls"));
    assert!(d.contains_key("io:write.bytes"));
    let m = &d["MPI_Send.calls"];
    assert_eq!(m.columns, 2);
    assert_eq!(m.values, p.mpi["MPI_Send"].calls);
    assert!(m.imbalance >= 1.0);
}

#[test]
fn a_snapshot_once_everything_is_analysed_is_the_final_model() {
    let procs: Vec<Proc> = (0..3).map(|r| busy(r, 3, 40 + r as u64)).collect();
    let (snapshot, last) = run_on_board_with_snapshot(&procs, 2);
    assert_eq!(json(&snapshot), json(&last));
}
