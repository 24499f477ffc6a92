//! An MPI program that a wrapper of its own name starts without `exec`
//! (`wraps_itself.c`: the launched process forks and execs itself to be the
//! MPI program). Through the socket the wrapper connects first and holds
//! the rank; the program below it is its child, so when it calls
//! `MPI_Init` it is refused and named, with the advice to `exec` it (a
//! second claim to the rank, never merged). Over MPI (`--analysers`) only
//! processes that call `MPI_Init` stream: the wrapper holds nothing, and
//! the MPI program is the rank, with its exact counts.

mod common;

use common::*;

fn build(mpi: Mpi, what: &str) -> Option<(Scratch, Vec<String>)> {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return None;
    }
    let dir = scratch(&format!("wraps-itself-{what}-{}", mpi.cc));
    let exe = compile(mpi.cc, "wraps_itself.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 2);
    command.push(exe.display().to_string());
    Some((dir, command))
}

fn refused_with_advice_through_the_socket(mpi: Mpi) {
    let Some((dir, command)) = build(mpi, "socket") else {
        return;
    };
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("done"));
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    assert_eq!(p["ranks"], 2, "{}", mpi.name);
    assert!(p["mpi"].get("MPI_Sendrecv").is_none(), "{}", p["mpi"]);
    let refused: Vec<&str> = p["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .filter(|d| d.starts_with("refused"))
        .collect();
    assert_eq!(refused.len(), 2, "{}: {refused:#?}", mpi.name);
    for r in p["rank_info"].as_array().unwrap() {
        let why = format!(
            "called MPI_Init as world rank {} below pid {}, a process of the same program name",
            r["world_rank"], r["pid"]
        );
        assert!(
            refused
                .iter()
                .any(|d| d.contains(&why) && d.contains("`exec`")),
            "{}: {why}: {refused:#?}",
            mpi.name
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn through_the_socket_it_is_refused_with_advice_under_open_mpi() {
    refused_with_advice_through_the_socket(OPEN_MPI);
}

#[test]
fn through_the_socket_it_is_refused_with_advice_under_mpich() {
    refused_with_advice_through_the_socket(MPICH);
}

#[test]
fn over_mpi_analysers_it_is_the_rank() {
    let Some((dir, command)) = build(OPEN_MPI, "analysers") else {
        return;
    };
    let (out, run_dir) = hark_run(&dir, &["--analysers", "1"], &command);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    assert_eq!(p["ranks"], 2);
    assert_eq!(per_rank(&profile, 0, "MPI_Sendrecv", "calls"), [10, 10]);
    for d in p["diagnostics"].as_array().unwrap() {
        assert!(!d.as_str().unwrap().starts_with("refused"), "{d}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
