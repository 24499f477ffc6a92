//! A rank that `exec`s itself before `MPI_Init` (as wrappers and Python
//! launchers do) is one process: its image before `exec` and the one after
//! are one rank, under Open MPI and MPICH, at np 2 and 4.

mod common;

use common::*;
use std::path::Path;

#[test]
fn a_rank_that_re_execs_itself_before_mpi_init_is_one_rank() {
    for mpi in [OPEN_MPI, MPICH] {
        if !have(mpi.cc) || !have(mpi.run) {
            eprintln!("skipped {}: no {} or {}", mpi.name, mpi.cc, mpi.run);
            continue;
        }
        let dir = scratch(&format!("reexec-{}", mpi.cc));
        let exe = compile(mpi.cc, Path::new("reexec.c"), &dir, &[]);
        for np in [2, 4] {
            let mut command = launcher(mpi, np);
            command.push(exe.display().to_string());
            let (out, run_dir) = hark_run(&dir, &[], &command);
            assert_exit(&out, 0);
            let profile = profile(&run_dir);
            let what = format!("{} at np {np}", mpi.name);
            let programs = profile["programs"].as_array().unwrap();
            assert_eq!(programs.len(), 1, "{what}: {profile:#}");
            let p = &programs[0];
            assert_eq!(p["ranks"].as_u64(), Some(np as u64), "{what}");
            let info = p["rank_info"].as_array().unwrap();
            let mut ranks: Vec<u64> = info
                .iter()
                .map(|r| r["world_rank"].as_u64().unwrap())
                .collect();
            ranks.sort_unstable();
            assert_eq!(ranks, (0..np as u64).collect::<Vec<_>>(), "{what}");
            let mut pids: Vec<u64> = info.iter().map(|r| r["pid"].as_u64().unwrap()).collect();
            pids.sort_unstable();
            pids.dedup();
            assert_eq!(pids.len(), np, "{what}: one pid per rank");
            // Each rank's figures: both images, once.
            assert_eq!(
                per_rank(&profile, 0, "MPI_Init", "calls"),
                vec![1; np],
                "{what}"
            );
            assert_eq!(
                per_rank(&profile, 0, "MPI_Sendrecv", "calls"),
                vec![10; np],
                "{what}"
            );
            for r in 0..np {
                let file = p["io"]["files"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|f| {
                        f["path"]
                            .as_str()
                            .unwrap()
                            .ends_with(&format!("before-exec-{r}.txt"))
                    })
                    .unwrap_or_else(|| panic!("{what}: no before-exec-{r}.txt"));
                let mut expect = vec![0; np];
                // The program-rank order is the world-rank order here.
                expect[r] = 12;
                let written: Vec<u64> = file["write_bytes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect();
                assert_eq!(
                    written, expect,
                    "{what}: the image before exec is its rank's"
                );
            }
            for r in info {
                assert_eq!(r["partial"].as_bool(), Some(false), "{what}: {r}");
                let acc = &r["accounting"];
                assert_eq!(acc["events_written"], acc["events_received"], "{what}: {r}");
            }
            assert_eq!(lost(&profile), 0, "{what}");
            let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
            assert!(
                summary.contains(&format!("1 program, {np} ranks")),
                "{what}: {summary}"
            );
            std::fs::remove_dir_all(&run_dir).unwrap();
        }
    }
}
