//! Directories handled by descriptor, never by path: what a service running
//! as root needs to act inside a directory a user may change at any moment.
//!
//! [`Dir::open`] opens a directory without following a symlink as its last
//! component; every operation after that is relative to its descriptor and
//! never follows a symlink either (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`), so
//! a user who swaps an entry for a link to `/etc/shadow` gets an error, not
//! the file.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An open directory.
#[derive(Debug)]
pub struct Dir(OwnedFd);

/// What `fstat` says of an open file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The owner's uid.
    pub uid: u32,
    /// The number of hard links.
    pub nlink: u64,
    /// The permission bits (`0o7777` at most).
    pub mode: u32,
    /// A regular file.
    pub is_file: bool,
    /// A directory.
    pub is_dir: bool,
}

/// Takes a descriptor a system call returned (or its error).
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel has just returned to us, owned by
    // nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))
}

fn fstat(fd: &OwnedFd) -> io::Result<Stat> {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is valid for writing.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(Stat {
        uid: st.st_uid,
        nlink: st.st_nlink as u64,
        mode: st.st_mode & 0o7777,
        is_file: st.st_mode & libc::S_IFMT == libc::S_IFREG,
        is_dir: st.st_mode & libc::S_IFMT == libc::S_IFDIR,
    })
}

impl Dir {
    /// Opens directory `path`, never through a symlink as its last
    /// component.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = c_string(path.as_os_str().as_bytes())?;
        // SAFETY: `c` is a valid C string; open returns a new descriptor or -1.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        owned(fd).map(Dir)
    }

    fn open_at(&self, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
        // SAFETY: `self.0` is open and `name` a valid C string; openat
        // returns a new descriptor or -1.
        owned(unsafe {
            libc::openat(
                self.0.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })
    }

    /// Opens subdirectory `name`; an error if it is anything else,
    /// a symlink included.
    pub fn sub(&self, name: &CStr) -> io::Result<Dir> {
        self.open_at(name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK)
            .map(Dir)
    }

    /// Opens `name` for reading, never through a symlink and without
    /// blocking on a FIFO, with what `fstat` says of what was opened.
    pub fn read(&self, name: &str) -> io::Result<(File, Stat)> {
        let c = c_string(name.as_bytes())?;
        let fd = self.open_at(&c, libc::O_RDONLY | libc::O_NONBLOCK)?;
        let st = fstat(&fd)?;
        Ok((File::from(fd), st))
    }

    /// What `fstat` says of the directory itself.
    pub fn stat(&self) -> io::Result<Stat> {
        fstat(&self.0)
    }

    /// The names in the directory, without `.` and `..`.
    pub fn names(&self) -> io::Result<Vec<CString>> {
        // fdopendir takes the descriptor it is given: a fresh one of its own.
        let own = self.open_at(c".", libc::O_RDONLY | libc::O_DIRECTORY)?;
        let raw = own.as_raw_fd();
        // SAFETY: `raw` is an open directory descriptor; on success the
        // stream owns it (closedir closes it), so it is released from `own`.
        let stream = unsafe { libc::fdopendir(raw) };
        if stream.is_null() {
            return Err(io::Error::last_os_error());
        }
        std::mem::forget(own);
        let mut out = Vec::new();
        loop {
            // SAFETY: `stream` is an open directory stream, read by this
            // thread alone.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: readdir returned an entry whose `d_name` is a C
            // string, valid until the next readdir on this stream.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
            if name != c"." && name != c".." {
                out.push(name.to_owned());
            }
        }
        // SAFETY: `stream` is open and not used after this.
        unsafe { libc::closedir(stream) };
        Ok(out)
    }

    /// Sets the directory's permission bits.
    pub fn chmod(&self, mode: u32) -> io::Result<()> {
        // SAFETY: `self.0` is open; fchmod changes only its mode.
        check(unsafe { libc::fchmod(self.0.as_raw_fd(), mode) })
    }

    /// Gives the directory itself to `uid`; its group stays.
    pub fn chown(&self, uid: u32) -> io::Result<()> {
        // SAFETY: `self.0` is open; -1 leaves the group as it is.
        check(unsafe { libc::fchown(self.0.as_raw_fd(), uid, u32::MAX) })
    }

    /// Gives entry `name` itself to `uid`, never what a symlink points to;
    /// its group stays.
    pub fn chown_entry(&self, name: &CStr, uid: u32) -> io::Result<()> {
        // SAFETY: `self.0` is open and `name` a valid C string; -1 leaves
        // the group as it is.
        check(unsafe {
            libc::fchownat(
                self.0.as_raw_fd(),
                name.as_ptr(),
                uid,
                u32::MAX,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
    }
}

/// The effective user id of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Makes a FIFO at `path` (mode 0600).
pub fn make_fifo(path: &Path) -> io::Result<()> {
    let c = c_string(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a valid C string.
    check(unsafe { libc::mkfifo(c.as_ptr(), 0o600) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlinked_entry_is_refused_and_never_followed() {
        let dir = std::env::temp_dir().join(format!("hark-os-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(dir.join("file"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink(dir.join("sub"), dir.join("sublink")).unwrap();
        let d = Dir::open(&dir).unwrap();
        assert!(d.read("file").unwrap().1.is_file);
        assert!(d.read("link").is_err());
        assert!(d.sub(c"sub").is_ok());
        assert!(d.sub(c"sublink").is_err());
        assert!(Dir::open(&dir.join("sublink")).is_err());
        let mut names = d.names().unwrap();
        names.sort();
        assert_eq!(
            names,
            [c"file", c"link", c"sub", c"sublink"].map(CStr::to_owned)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
