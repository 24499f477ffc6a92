//! The end of an analyser rank's run (`docs/analysers.md`, "The model comes
//! back to `hark run`" and "Finalizing together"): analyser 0 sends the
//! merged run to `hark run` ([`deliver`]), then every analyser releases its
//! writers ([`release`]), which wait for it in their `MPI_Finalize`, so that
//! every rank of the job calls the real `MPI_Finalize` together.

use super::relay::Link;
use super::{say, Options, Peers};
use crate::error::{Context, ErrorKind, Result};
use hark_mpi::call as mpi_call;
use hark_mpi::Abi;
use hark_wire::partition::{RELEASE_TAG, STREAM_TAG};
use std::time::Duration;

/// The tag of analyser 0's word to the other analysers that the run was
/// delivered (1 byte, stream communicator).
const DELIVERED_TAG: i32 = STREAM_TAG + 25;

/// How long analyser 0 waits for `hark run` to say it holds the run.
const CONFIRM: Duration = Duration::from_secs(60);

/// Analyser 0's link to `hark run`, if it was given its addresses and
/// reaches one of them; says why not on stderr otherwise (the launcher
/// forwards it to `hark run`'s terminal).
pub(crate) fn link(args: &Options) -> Option<Link> {
    let addresses = args.hark.as_deref()?;
    let secret = super::run_secret().unwrap_or_default();
    match Link::connect(addresses, &secret) {
        Ok(link) => {
            if args.verbose {
                say(&format!(
                    "hark: analyser rank 0 on {} reaches hark run at {}\n",
                    host(),
                    link.at()
                ));
            }
            Some(link)
        }
        Err(e) => {
            say(&format!(
                "hark: analyser rank 0 on {} {e}; the live view shows nothing until the end, and this rank will write the run directory itself, into {} on its own node\n",
                host(),
                args.output.display()
            ));
            None
        }
    }
}

/// This host's name (the node a message speaks of).
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "this node".into())
}

/// Analyser 0: sends `run` to `hark run` over `link` and waits until it
/// holds it; without a link, or when that fails, writes the run directory
/// into `args.output` itself and says so.
pub(crate) fn deliver(
    args: &Options,
    link: Option<&mut Link>,
    run: &hark_model::Run,
) -> Result<()> {
    if test_lose_run() {
        say("hark: analyser rank 0 drops the run (HARK_TEST_LOSE_RUN)\n");
        return Ok(());
    }
    if let Some(link) = link {
        match link.model(run, CONFIRM) {
            Ok(()) => return Ok(()),
            Err(e) => say(&format!(
                "hark: analyser rank 0 on {}: {}; it writes the run directory itself, into {} on its own node\n",
                host(),
                chain(&e),
                args.output.display()
            )),
        }
    }
    std::fs::create_dir_all(&args.output).with_context(ErrorKind::Io, || {
        format!("cannot create the run directory {}", args.output.display())
    })?;
    hark_outputs::write_all(run, &args.output, |_| true).with_context(ErrorKind::Io, || {
        format!("cannot write the run directory {}", args.output.display())
    })?;
    super::keeper::clean(&args.output);
    Ok(())
}

/// An error and its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

/// How long a writer waits for its release, and an analyser for analyser
/// 0's word (`HARK_RELEASE_TIMEOUT_MS`).
fn release_timeout() -> Duration {
    let env = std::env::var(hark_settings::RELEASE_TIMEOUT_MS.name).ok();
    Duration::from_millis(
        hark_settings::RELEASE_TIMEOUT_MS
            .number(env.as_deref())
            .value,
    )
}

/// Once analyser 0 delivered the run (it says so to the others, who wait
/// for its word), each analyser releases its `writers` that did not give
/// up their streams (`given_up`: those do not wait). Bounded: an analyser
/// that hears nothing from analyser 0 within `HARK_RELEASE_TIMEOUT_MS`
/// releases its writers anyway. Small standard-mode sends, which complete
/// without waiting for the receiver.
pub(crate) fn release(abi: &Abi, comm: usize, peers: &Peers, writers: &[u32], given_up: &[u32]) {
    let first = peers.analysers[0];
    if peers.me == first {
        for &a in &peers.analysers[1..] {
            mpi_call::send_bytes(abi, &[1], a, DELIVERED_TAG, comm);
        }
    } else {
        wait_for(abi, comm, first, DELIVERED_TAG, release_timeout());
    }
    for &w in writers.iter().filter(|w| !given_up.contains(w)) {
        mpi_call::send_bytes(abi, &[1], w as i32, RELEASE_TAG, comm);
    }
}

/// Waits for analyser 0's word that the run is delivered, at most
/// `timeout` (`hark_mpi::call::wait_for_byte`: slept, not spun, since
/// analyser 0 needs the cores for the fold).
fn wait_for(abi: &Abi, comm: usize, from: i32, tag: i32, timeout: Duration) {
    if !mpi_call::wait_for_byte(abi, comm, from, tag, timeout) {
        say("hark: an analyser rank heard nothing from analyser rank 0 within HARK_RELEASE_TIMEOUT_MS; it releases its writers without waiting further\n");
    }
}

/// `HARK_TEST_LOSE_RUN=1`, **for tests only** (a build with the
/// `test-hooks` feature): analyser rank 0 neither sends nor writes the run,
/// as when it can reach neither `hark run` nor the run directory.
fn test_lose_run() -> bool {
    cfg!(feature = "test-hooks") && std::env::var("HARK_TEST_LOSE_RUN").as_deref() == Ok("1")
}

/// `HARK_TEST_ANALYSER_DELAY_MS=N`, **for tests only** (a build with the
/// `test-hooks` feature): the analyser waits N ms once its streams ended,
/// as a long merge would.
pub(crate) fn test_delay() {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("HARK_TEST_ANALYSER_DELAY_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// `HARK_TEST_FINALIZE_LOG=FILE`, **for tests only** (a build with the
/// `test-hooks` feature): appends `analyser WORLD_RANK CLOCK_REALTIME_NS`
/// to FILE as this rank is about to call `MPI_Finalize` (the probe writes
/// `writer ...` lines the same way).
pub(crate) fn finalize_log(rank: i32) {
    #[cfg(feature = "test-hooks")]
    if let Ok(path) = std::env::var("HARK_TEST_FINALIZE_LOG") {
        use std::io::Write;
        let ns = super::realtime_ns();
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
        {
            let _ = f.write_all(format!("analyser {rank} {ns}\n").as_bytes());
        }
    }
    #[cfg(not(feature = "test-hooks"))]
    let _ = rank;
}
