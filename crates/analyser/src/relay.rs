//! `hark run`'s end of the live snapshots under `--analysers`: a Unix socket
//! in a private directory, named on the analysers' command line, on which
//! analyser rank 0 writes each merged snapshot as a length (8 bytes, little
//! endian) and the run's JSON. The latest one is what the live view serves
//! (`docs/analysers.md`, "The live view").

use crate::error::{Context, ErrorKind, Result};
use hark_model::Run;
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The largest snapshot read (a longer length is a broken stream).
const LARGEST: u64 = 1 << 32;

/// The socket and the latest snapshot that arrived on it.
pub struct Relay {
    dir: PathBuf,
    latest: Arc<Mutex<Option<Run>>>,
}

impl Relay {
    /// Listens in a new private directory; a thread reads what arrives.
    pub fn start() -> Result<Relay> {
        use std::os::unix::fs::DirBuilderExt;
        // Socket paths are limited to about 100 bytes.
        let mut base = std::env::temp_dir();
        if base.as_os_str().len() > 60 {
            base = PathBuf::from("/tmp");
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("hark-live-{}-{nanos:x}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(ErrorKind::Io, || {
                format!(
                    "cannot create a directory for the live snapshots in {}",
                    base.display()
                )
            })?;
        let listener = UnixListener::bind(dir.join("live.sock")).context(
            ErrorKind::Io,
            "cannot listen for the analysers' live snapshots",
        )?;
        let latest = Arc::new(Mutex::new(None));
        let into = latest.clone();
        std::thread::spawn(move || {
            // Analyser rank 0 connects once; a connection that breaks ends
            // its snapshots, and the next one (none, normally) takes over.
            for conn in listener.incoming() {
                match conn {
                    Ok(c) => read_snapshots(c, &into),
                    Err(_) => return,
                }
            }
        });
        Ok(Relay { dir, latest })
    }

    /// Where analyser rank 0 connects.
    pub fn path(&self) -> PathBuf {
        self.dir.join("live.sock")
    }

    /// The latest snapshot, `None` before the first.
    pub fn source(&self) -> impl Fn() -> Option<Run> + Send + Sync + 'static {
        let latest = self.latest.clone();
        move || hark_sync::lock(&latest).clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads snapshots from `c` into `latest` until it closes or breaks.
fn read_snapshots(mut c: UnixStream, latest: &Mutex<Option<Run>>) {
    loop {
        let mut len = [0u8; 8];
        if c.read_exact(&mut len).is_err() {
            return;
        }
        let len = u64::from_le_bytes(len);
        if len > LARGEST {
            return;
        }
        let mut body = vec![0u8; len as usize];
        if c.read_exact(&mut body).is_err() {
            return;
        }
        // A snapshot that does not parse is skipped: the last one stays.
        if let Ok(run) = serde_json::from_slice::<Run>(&body) {
            *hark_sync::lock(latest) = Some(run);
        }
    }
}

/// Whether `path` is a live-snapshot socket of this module (for tests).
#[cfg(test)]
fn is_socket(path: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_latest_snapshot_written_is_the_one_served() {
        let relay = Relay::start().unwrap();
        assert!(is_socket(&relay.path()));
        let source = relay.source();
        assert!(source().is_none());
        let mut c = UnixStream::connect(relay.path()).unwrap();
        for version in ["first", "second"] {
            let run = Run {
                hark_version: version.into(),
                ..Run::default()
            };
            let json = serde_json::to_vec(&run).unwrap();
            c.write_all(&(json.len() as u64).to_le_bytes()).unwrap();
            c.write_all(&json).unwrap();
        }
        // A snapshot that does not parse is skipped, and the next one read.
        c.write_all(&3u64.to_le_bytes()).unwrap();
        c.write_all(b"{{{").unwrap();
        let run = Run {
            hark_version: "third".into(),
            ..Run::default()
        };
        let json = serde_json::to_vec(&run).unwrap();
        c.write_all(&(json.len() as u64).to_le_bytes()).unwrap();
        c.write_all(&json).unwrap();
        drop(c);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while source().map(|r| r.hark_version) != Some("third".into()) {
            assert!(std::time::Instant::now() < deadline, "no third snapshot");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let dir = relay.path().parent().unwrap().to_path_buf();
        drop(relay);
        assert!(!dir.exists());
    }
}
