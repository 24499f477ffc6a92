//! Two jobs in one `hark serve --http` write to the same file system: one
//! writes 1 MiB and calls `fsync`, over and over, for 12 s
//! (`tests/programs/fsync_writes.c`), and a few seconds in, another floods
//! a file of its own with 64 MiB writes, each synced, for 4 s. `GET
//! /api/machine` flags the first job's I/O rate (bytes per second in I/O
//! calls) as dropped in seconds inside the flood's span (as the flooding
//! program read it on the wall clock), naming the flooding job; the
//! program's own clock confirms that its writes were slower then. The
//! flooding job, never alone, is not flagged.
//!
//! Ignored by default: on the shared virtual machine the tests run on,
//! one job's synced writes swing between 70 and 1,800 MB/s alone (the
//! host's cache, other builds' writes), so the drop is below 30 % in
//! about half the runs (4 passes in 8 on 2 December 2026, under a load of
//! 12 to 24). Run it with `--ignored` on a machine with a disk of its own.

mod common;
mod machine;
mod served;

use common::*;
use machine::*;
use std::time::Duration;

#[test]
#[ignore = "a shared VM's disk swings too much alone for a 30 % drop to show reliably (see the file's header)"]
fn a_job_writing_beside_a_flood_is_flagged_naming_the_flood() {
    let dir = scratch("machine-io");
    let exe = compile("cc", "fsync_writes.c".as_ref(), &dir, &[]);
    let served = served::Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let url = served.url();
    let job = |mib: &str, ms: &str, file: &str| {
        let command = [
            exe.display().to_string(),
            mib.to_string(),
            ms.to_string(),
            dir.join(file).display().to_string(),
        ];
        served.run(None, &command)
    };
    let writer = job("1", "16000", "writer.dat");
    served_job_started(&served);
    std::thread::sleep(Duration::from_secs(5));
    let flood = wait_within(job("16", "6000", "flood.dat"), limit(), "the flood");
    assert_exit(&flood, 0);
    let writer = wait_within(writer, limit(), "the writer");
    assert_exit(&writer, 0);
    let jobs = served.wait_jobs("both written", |j| {
        j.len() == 2 && j.iter().all(|j| j["state"] == "finished")
    });
    // Numbered in order of their first connection.
    let ids: Vec<u64> = jobs
        .iter()
        .map(|j| j["id"].as_str().unwrap().parse().unwrap())
        .collect();
    let (writer_id, flood_id) = (*ids.iter().min().unwrap(), *ids.iter().max().unwrap());
    let (flood_span, _) = spun(&flood.stdout, "io");
    let ((from, to), own) = spun(&writer.stdout, "io");

    let view = machine(
        None,
        &url,
        &format!("from={}&to={}&figure=io_bytes", from - 5, to + 5),
    );
    let io: Vec<&serde_json::Value> = view["interference"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "io")
        .collect();
    assert_eq!(io.len(), 1, "{view:#}");
    let flag = io[0];
    assert_eq!(flag["job"].as_u64(), Some(writer_id), "{flag}");
    assert_eq!(flag["by"][0]["id"].as_u64(), Some(flood_id), "{flag}");
    assert!(flag["overlapped_s"].as_u64() >= Some(2), "{flag}");
    let flagged = flagged_within(flag, flood_span);
    // The program's own clock: slower writes in the flagged seconds.
    let (inside, alone) = own_means(&own, &flagged, flood_span);
    assert!(
        inside < 0.7 * alone,
        "the program itself wrote {:.0} MB/s in its calls in the flagged seconds and {:.0} alone: {own:?}",
        inside * 1e3,
        alone * 1e3
    );
    let d = digest(
        &jobs
            .iter()
            .find(|j| j["id"] == writer_id.to_string().as_str())
            .unwrap()["dir"],
    );
    assert!(
        d.contains(&format!("Interfered with by job {flood_id}")),
        "{d}"
    );
    served.stop();
}
