//! `MPI_Pcontrol(0|1)` and the user API's `hark_pause`/`hark_resume` pause
//! and resume one and the same recording: either undoes the other. While
//! paused only point-to-point calls and their completions are recorded
//! (the server matches messages across the pause with them and keeps them
//! out of every profile), but communicators made meanwhile are still
//! described when recording resumes, and collectives still count in the
//! sequence numbers that match their instances across ranks, even when only
//! some ranks pause; `pause`/`resume` markers say where the gaps are
//! deliberate. Both libraries, 2 ranks (`tests/programs/mpi/pause.c`).

mod mpi_support;
use hark_wire::op;
use mpi_support::*;

#[test]
fn pcontrol_and_the_user_api_pause_and_resume_everything() {
    let include = format!("-I{}", repo().join("include").display());
    for mpi in [Mpi::OpenMpi, Mpi::Mpich] {
        let exe = build(mpi, "pause.c", &[&include]);
        let job = run_with(mpi, 2, &exe, &[], true, &[]);
        assert!(job.success, "{mpi:?}: {}", job.stderr);
        for r in 0..2 {
            let s = job.rank(r);
            // MPI events as `render` shows them, with the markers in place.
            let mut lines = Vec::new();
            let mut mpi_lines = render_with(s, |_| true).into_iter();
            for e in &s.events {
                match e.op() {
                    op::PAUSE | op::RESUME => lines.push(op::name(e.op()).to_string()),
                    code if matches!(op::kind(code), op::OpKind::Mpi(_) | op::OpKind::Detail) => {
                        lines.push(mpi_lines.next().unwrap())
                    }
                    _ => {}
                }
            }
            let (me, peer) = (r, 1 - r);
            // World collectives: #0 recorded, #1 and #2 paused on both ranks,
            // #3 recorded, #4 paused on rank 0 only, #5 recorded: the
            // sequence numbers (`tag`) count the paused ones too.
            let last = if r == 0 {
                "MPI_Pcontrol - peer=- tag=0 bytes=0 extra=-
                 pause
                 resume
                 MPI_Pcontrol - peer=- tag=0 bytes=0 extra=-"
            } else {
                "MPI_Barrier [0 1] peer=- tag=4 bytes=0 extra=0"
            };
            assert_lines(
                &format!("{mpi:?} rank {r}"),
                &lines,
                &format!(
                    "MPI_Init - peer=- tag=0 bytes=0 extra=-
                     MPI_Barrier [0 1] peer=- tag=0 bytes=0 extra=0
                     MPI_Pcontrol - peer=- tag=0 bytes=0 extra=-
                     pause
                     MPI_Sendrecv_replace [0 1] peer={peer} tag=1 bytes=8 extra=-
                     complete(recv) [0 1] peer={peer} tag=1 bytes=8 extra=0
                     resume
                     MPI_Pcontrol - peer=- tag=0 bytes=0 extra=-
                     MPI_Sendrecv_replace [0 1] peer={peer} tag=2 bytes=16 extra=-
                     complete(recv) [0 1] peer={peer} tag=2 bytes=16 extra=0
                     pause
                     MPI_Iprobe [0 1] peer=any tag=9 bytes=0 extra=0
                     resume
                     MPI_Barrier [{me}] peer=- tag=0 bytes=0 extra=0
                     MPI_Pcontrol - peer=- tag=0 bytes=0 extra=-
                     pause
                     resume
                     MPI_Barrier [0 1] peer=- tag=3 bytes=0 extra=0
                     {last}
                     MPI_Barrier [0 1] peer=- tag=5 bytes=0 extra=0
                     MPI_Comm_free [{me}] peer=- tag=0 bytes=0 extra=-
                     MPI_Comm_free [0 1] peer=- tag=0 bytes=0 extra=-
                     MPI_Finalize - peer=- tag=0 bytes=0 extra=-"
                ),
            );
        }
    }
}
