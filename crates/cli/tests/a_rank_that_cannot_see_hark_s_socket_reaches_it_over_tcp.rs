//! A rank on another node cannot see `hark`'s Unix socket (its `/tmp` is
//! its own): it went unmeasured, silently. `hark run` over a launcher now
//! listens on TCP too and gives the probes both addresses, and a probe
//! falls back to TCP when the socket is not there. Shown on one host: the
//! odd ranks run in a mount namespace where the socket's directory is an
//! empty tmpfs, as it would be on another node. Every rank is measured,
//! and calls, bytes and matrices equal both the independent count and a
//! run where every rank sees the socket.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;

use common::*;
use independent_count::*;
use std::process::Command;

/// Runs its arguments; in an odd rank, first hides the directory of the
/// Unix socket `HARK_ADDR` names behind an empty tmpfs, in a mount
/// namespace of the rank's own.
const HIDE: &str = r#"#!/bin/sh
rank=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}
if [ $((rank % 2)) = 1 ]; then
  s=${HARK_ADDR#*@unix:}; s=${s%%,*}
  exec unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "${s%/*}" "$@"
fi
exec "$@"
"#;

/// The wrapper's own processes, left unmeasured.
const SKIP: &str = "hide.sh,sh,unshare,mount";

fn namespaces_or_skip() -> bool {
    let ok = Command::new("unshare")
        .args(["-m", "true"])
        .output_within()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: needs root to make a mount namespace (`unshare -m`)");
    }
    ok
}

fn reaches_over_tcp(mpi: Mpi) {
    if !have(mpi.cc) || !have(mpi.run) || !namespaces_or_skip() {
        eprintln!("skipped: {} is not installed or no namespaces", mpi.name);
        return;
    }
    let dir = scratch(&format!("reach-{}", mpi.cc));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let hide = dir.join("hide.sh");
    std::fs::write(&hide, HIDE).unwrap();
    std::process::Command::new("chmod")
        .args(["+x"])
        .arg(&hide)
        .output_within()
        .unwrap();
    let np = 4;
    let ring = [exe.display().to_string(), "20".into(), "100".into()];
    let mut hidden = launcher(mpi, np);
    hidden.push(hide.display().to_string());
    hidden.extend(ring.iter().cloned());
    let mut plain = launcher(mpi, np);
    plain.extend(ring.iter().cloned());

    let skip = [("HARK_SKIP", SKIP)];
    let (out, run_dir) = counted_run_env(mpi, &dir, "hidden", &hidden, &skip);
    assert_exit(&out, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("cannot reach"), "{}: {stderr}", mpi.name);
    let hidden_profile = profile(&run_dir);
    assert_eq!(
        hidden_profile["programs"].as_array().map(Vec::len),
        Some(1),
        "{}: one program, no wrapper: {stderr}",
        mpi.name
    );
    let counts = read_counts(&dir.join(counts_of("hidden")), np);
    compare(&hidden_profile, &counts);

    let (out, run_dir) = counted_run_env(mpi, &dir, "plain", &plain, &[]);
    assert_exit(&out, 0);
    let plain_profile = profile(&run_dir);
    for field in ["messages", "bytes"] {
        let m = matrix(&hidden_profile["programs"][0]["p2p"][field]);
        assert_eq!(m.len(), np, "{}: {field}", mpi.name);
        assert_eq!(
            m,
            matrix(&plain_profile["programs"][0]["p2p"][field]),
            "{}: {field}",
            mpi.name
        );
    }
    for f in ["MPI_Isend", "MPI_Recv", "MPI_Allreduce"] {
        for field in ["calls", "bytes"] {
            assert_eq!(
                per_rank(&hidden_profile, 0, f, field),
                per_rank(&plain_profile, 0, f, field),
                "{}: {f} {field}",
                mpi.name
            );
        }
    }
}

/// [`counted_run_on`] with `env` set for `hark` and all it starts.
fn counted_run_env(
    mpi: Mpi,
    dir: &std::path::Path,
    name: &str,
    command: &[String],
    env: &[(&str, &str)],
) -> (std::process::Output, std::path::PathBuf) {
    let counts = dir.join(counts_of(name));
    std::fs::create_dir_all(&counts).unwrap();
    probe();
    let run_dir = dir.join(name);
    let mut cmd = Command::new(hark());
    cmd.current_dir(dir)
        .env("LD_PRELOAD", counter(dir, mpi))
        .env("COUNT_DIR", &counts)
        .envs(env.iter().copied())
        .args(["run", "--lossless", "--no-http", "-o"])
        .arg(&run_dir)
        .arg("--")
        .args(command);
    mpi_env(&mut cmd);
    (cmd.output_within().unwrap(), run_dir)
}

#[test]
fn open_mpi() {
    reaches_over_tcp(OPEN_MPI);
}

#[test]
fn mpich() {
    reaches_over_tcp(MPICH);
}
