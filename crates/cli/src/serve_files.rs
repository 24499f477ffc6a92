//! The files `hark serve` writes and reads for its users, done so that no
//! user can turn them onto a file that is not theirs.
//!
//! A service running as root gives each job's run directory to the job's
//! owner; from then on the owner may change anything in it at any moment
//! (swap a file for a symlink to `/etc/shadow`, or to another user's
//! profile). So the service never acts by path inside a directory a user
//! owns:
//!
//! - **The runs directory is the service's**: owned by it (or root) and
//!   writable by nobody else ([`check_runs_dir`]), created mode 0711 so
//!   that users reach their own run directories but cannot list the
//!   others'. No user can rename, replace or add an entry in it.
//! - **Writing**: a run directory is created there, made 0700 at once, and
//!   filled while it is still the service's: no user can enter it, so
//!   writing by path is safe. Then [`give_to`] hands it over bottom-up on
//!   descriptors the service opened itself: every entry with
//!   `fchownat(dirfd, name, AT_SYMLINK_NOFOLLOW)`, every subdirectory
//!   (opened `O_NOFOLLOW`) with `fchown` once its entries are done, and the
//!   run directory itself last. Before that last call the user cannot
//!   touch anything in it; after it the service writes nothing there.
//!   Writing as the user (a helper process with their credentials) was the
//!   other way; it costs a process per run and the user's quota would cut
//!   runs short, where this costs a few system calls.
//! - **Reading** (`profile.json`, `service.json`, of jobs and dumps, at
//!   start and for the HTTP API): [`open_owned`] opens the run directory
//!   `O_NOFOLLOW`, the file relative to that descriptor with `O_NOFOLLOW`,
//!   and keeps it only if it is a regular file with one link, owned by the
//!   run directory's owner, who must be the job's owner (or the service,
//!   for a run it never gave away). A symlink is refused by the kernel, a
//!   hard link by its count, and a file of anyone else by its owner: what
//!   the service reads for a job is only ever what its owner could write,
//!   so it reads with no more rights than the asker has.

use anyhow::{bail, Context, Result};
use hark_os::Dir;
use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

/// Subdirectories deeper than this are not handed over (the outputs write
/// one level, `topology/`).
const MAX_DEPTH: usize = 8;

/// The service's effective uid.
pub fn service_uid() -> u32 {
    hark_os::euid()
}

/// Creates the runs directory if missing (mode 0711) and refuses one that
/// anyone but the service (or root) could change entries of.
pub fn check_runs_dir(runs: &Path) -> Result<()> {
    if !runs.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(runs)
            .with_context(|| format!("cannot create the runs directory {}", runs.display()))?;
    }
    let meta = std::fs::metadata(runs)
        .with_context(|| format!("cannot read the runs directory {}", runs.display()))?;
    if !meta.is_dir() {
        bail!("the runs directory {} is not a directory", runs.display());
    }
    let me = service_uid();
    if meta.uid() != me && meta.uid() != 0 {
        bail!(
            "the runs directory {} belongs to uid {}: it must be the service's (uid {me}), as its owner could swap run directories for links; chown it or pick another --runs",
            runs.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "the runs directory {} has mode {:o}: other users could swap run directories for links; make it writable by the service alone (chmod go-w, 0711 lets users reach their own runs only)",
            runs.display(),
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

/// Gives the run directory `dir`, written by the service and not yet
/// reachable by anyone else, to `uid`: its entries first, bottom-up, each
/// by descriptor and never through a symlink, the directory itself last
/// (mode 0700). A service that is not root keeps the directory (closed to
/// others) unless `uid` is its own.
pub fn give_to(dir: &Path, uid: u32) -> Result<()> {
    let top = Dir::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    top.chmod(0o700)
        .with_context(|| format!("cannot close {} to other users", dir.display()))?;
    if service_uid() != 0 {
        return Ok(());
    }
    hand_over(&top, uid, 0)
        .and_then(|()| top.chown(uid))
        .with_context(|| format!("cannot give {} to uid {uid}", dir.display()))
}

/// Gives every entry of `dir` to `uid`, subdirectories after their entries.
fn hand_over(dir: &Dir, uid: u32, depth: usize) -> io::Result<()> {
    for name in dir.names()? {
        match dir.sub(&name) {
            Ok(sub) if depth < MAX_DEPTH => {
                hand_over(&sub, uid, depth + 1)?;
                sub.chown(uid)?;
            }
            // Not a directory (or a symlink, which the service never
            // writes): the entry itself, never what it points to.
            _ => dir.chown_entry(&name, uid)?,
        }
    }
    Ok(())
}

/// The owner of run directory `dir` (opened without following a symlink).
pub fn dir_owner(dir: &Path) -> io::Result<u32> {
    Ok(Dir::open(dir)?.stat()?.uid)
}

/// Opens `name` in the run directory `dir` of a job owned by `owner`
/// (`None`: the service's own) for reading, only if it cannot be another's
/// file: see the module's doc.
pub fn open_owned(dir: &Path, name: &str, owner: Option<u32>) -> io::Result<File> {
    let refuse = |what: String| io::Error::new(io::ErrorKind::PermissionDenied, what);
    let d = Dir::open(dir)?;
    let owner_of_dir = d.stat()?.uid;
    if owner_of_dir != service_uid() && Some(owner_of_dir) != owner {
        return Err(refuse(format!(
            "{} belongs to uid {owner_of_dir}, not to the job's owner",
            dir.display()
        )));
    }
    let (f, st) = d.read(name)?;
    let path = dir.join(name);
    if !st.is_file {
        return Err(refuse(format!("{} is not a regular file", path.display())));
    }
    if st.nlink != 1 {
        return Err(refuse(format!(
            "{} has {} links: another file's",
            path.display(),
            st.nlink
        )));
    }
    if st.uid != owner_of_dir {
        return Err(refuse(format!(
            "{} belongs to uid {}, not to its run directory's owner",
            path.display(),
            st.uid
        )));
    }
    Ok(f)
}

/// The run in run directory `dir` of a job owned by `owner`, read through
/// [`open_owned`].
pub fn read_run(dir: &Path, owner: Option<u32>) -> Result<hark_model::Run> {
    let name = hark_outputs::json::FILE_NAME;
    let file = open_owned(dir, name, owner)
        .with_context(|| format!("cannot read {}", dir.join(name).display()))?;
    Ok(hark_outputs::json::read_open(file, &dir.join(name))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_a_hard_link_or_a_fifo_is_never_read() {
        let dir = std::env::temp_dir().join(format!("hark-owned-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("real"), "mine").unwrap();
        std::fs::write(dir.join("other"), "theirs").unwrap();
        std::os::unix::fs::symlink(dir.join("other"), dir.join("link")).unwrap();
        std::fs::hard_link(dir.join("other"), dir.join("hard")).unwrap();
        hark_os::make_fifo(&dir.join("fifo")).unwrap();
        assert!(open_owned(&dir, "real", None).is_ok());
        for name in ["link", "hard", "fifo", "missing"] {
            assert!(open_owned(&dir, name, None).is_err(), "{name} was opened");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
