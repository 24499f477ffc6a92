//! The live view of `hark run`: the embedded server's snapshots served over
//! HTTP while the command runs (`hark-live`, `docs/api.md`).

use crate::output::print_stderr;
use anyhow::{anyhow, Result};
use hark_live::{Access, Live, Runs};
use hark_model::Run;
use hark_server::Server;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// The id of `hark run`'s one run in the API (`/api/runs/run/profile`).
pub const RUN_ID: &str = "run";

/// The live view of one `hark run`.
pub struct RunView {
    runs: Arc<Runs>,
    _live: Live,
}

/// Serves `server`'s snapshots on `addr` and says where on stderr (unless
/// `quiet`). The view holds the server weakly: [`release`] gets it back.
pub fn start(addr: &str, server: &Arc<Server>, quiet: bool) -> Result<RunView> {
    let runs = Arc::new(Runs::default());
    let weak: Weak<Server> = Arc::downgrade(server);
    runs.add_live(RUN_ID, move || weak.upgrade().map(|s| s.snapshot()));
    let live = serve(addr, runs.clone())?;
    if !quiet {
        print_stderr(&format!("hark: live view at {}\n", live.url()));
    }
    Ok(RunView { runs, _live: live })
}

/// Serves `runs` on `addr` for this user only: under a random path token
/// (the printed URL is the way in), and to a client on this machine only
/// if the kernel names it as this user (or root), so that another local
/// user who saw the URL (a `hark top URL` in `ps`) still gets nothing.
fn serve(addr: &str, runs: Arc<Runs>) -> Result<Live> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        anyhow!("cannot serve the live view on {addr}: {e} (give another address, HOST:PORT, or turn it off: --http, --no-http)")
    })?;
    let me = hark_os::uid();
    let access = Access::private()
        .map_err(|e| anyhow!("cannot make the live view's token: {e} (--no-http)"))?
        .with_identify(Arc::new(move |peer, local| {
            if !peer.ip().is_loopback() {
                return Ok(None);
            }
            match hark_transport::local_tcp_owner(peer, local) {
                Some(uid) if uid == me || uid == 0 => Ok(Some(uid)),
                Some(uid) => Err(format!("this live view is uid {me}'s; uid {uid} connected")),
                None => Err("cannot tell which user connected".to_string()),
            }
        }));
    Live::serve(listener, hark_live::router(runs), access)
        .map_err(|e| anyhow!("{e} (--http, --no-http)"))
}

/// Serves the snapshots `source` returns (`None`: none yet, or none new)
/// on `addr`, as [`start`] does for a server of `hark run`'s own: the
/// analysers' merged snapshots under `--analysers`.
pub fn start_with(
    addr: &str,
    source: impl Fn() -> Option<Run> + Send + Sync + 'static,
    quiet: bool,
) -> Result<RunView> {
    let runs = Arc::new(Runs::default());
    runs.add_live(RUN_ID, source);
    let live = serve(addr, runs.clone())?;
    if !quiet {
        print_stderr(&format!("hark: live view at {}\n", live.url()));
    }
    Ok(RunView { runs, _live: live })
}

impl RunView {
    /// Shows `run` as the finished run from now on.
    pub fn finished(&self, run: &Run) {
        self.runs.add_finished(RUN_ID, run.clone());
    }
}

/// The server back from the live view, once no snapshot holds it (a
/// snapshot takes milliseconds; the view serves its last one meanwhile).
pub fn release(mut server: Arc<Server>) -> Server {
    loop {
        match Arc::try_unwrap(server) {
            Ok(s) => return s,
            Err(shared) => {
                server = shared;
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}
