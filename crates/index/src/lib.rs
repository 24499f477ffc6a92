//! The run history: every Hark run, recorded in one SQLite file.
//!
//! `hark run` records each run directory it writes ([`Index::record`]);
//! `hark runs` lists them ([`Index::list`]) filtered by program, host and
//! date. `hark serve` keeps one of its own beside its run directories
//! ([`SERVICE_FILE`]), each row with the uid that owns it, so that a user
//! lists only their own runs. A personal file lives at [`default_path`]
//! unless `HARK_INDEX` or an option names another.
//!
//! A row is a summary of a run directory, not the run itself: the run
//! directory's `profile.json` stays the source of truth, and a run whose
//! directory was deleted simply stays listed (`hark runs` marks it).
//! Recording the same directory again replaces its row.
//!
//! ```
//! use hark_index::{Entry, Filter, Index};
//!
//! let file = std::env::temp_dir().join(format!("hark-index-doc-{}.sqlite", std::process::id()));
//! let index = Index::open(&file).unwrap();
//! index.record(&Entry {
//!     run_dir: "/runs/hark-lmp-20260101-120000".into(),
//!     programs: vec!["lmp".into()],
//!     host: "node1".into(),
//!     date: 1_767_268_800,
//!     ranks: 4,
//!     wall_ns: 2_000_000_000,
//!     command: "mpirun -np 4 lmp -in in.lj".into(),
//!     hark_version: "0.1.0".into(),
//!     owner: None,
//!     served: false,
//!     status: "ok".into(),
//! }).unwrap();
//! let found = index.list(&Filter { program: Some("lmp".into()), ..Filter::default() }).unwrap();
//! assert_eq!(found.len(), 1);
//! # std::fs::remove_file(&file).unwrap();
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use rusqlite::{params, Connection};
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming the index file (overrides the default).
pub const ENV: &str = "HARK_INDEX";

/// The index file a service (`hark serve`) keeps in its runs directory.
pub const SERVICE_FILE: &str = "index.sqlite";

/// Where the index lives unless told otherwise: `$HARK_INDEX`, else
/// `$XDG_DATA_HOME/hark/runs.sqlite`, else `~/.local/share/hark/runs.sqlite`
/// (the XDG default). `None` when neither `HOME` nor `XDG_DATA_HOME` is set.
pub fn default_path() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(p) = var(ENV) {
        return Some(PathBuf::from(p));
    }
    let data = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("hark").join("runs.sqlite"))
}

/// One recorded run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The run directory, as an absolute path (the row's key).
    pub run_dir: PathBuf,
    /// The measured programs' names, in the run's order.
    pub programs: Vec<String>,
    /// Host of the first rank of the first program.
    pub host: String,
    /// When the run ended, in seconds since the Unix epoch (UTC).
    pub date: i64,
    /// Processes over all programs.
    pub ranks: u64,
    /// The longest program's wall time, in ns.
    pub wall_ns: u64,
    /// The measured command line, words joined by spaces.
    pub command: String,
    /// Version of Hark that made the run.
    pub hark_version: String,
    /// The uid that owns the run, for a service's run (`None`: a run of
    /// `hark run`, or a job that came to a service over TCP).
    pub owner: Option<u32>,
    /// Written by a service: a run without an owner is then the site's,
    /// listed to admins only.
    pub served: bool,
    /// How the job ended, in a word or two (`ok`, `exit 3`, `MPI_Abort 3`,
    /// `signal 9`); empty for a run recorded by a Hark that did not say.
    pub status: String,
}

/// Which runs [`Index::list`] returns; `None` fields match everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Runs with a program of exactly this name.
    pub program: Option<String>,
    /// Runs on exactly this host.
    pub host: Option<String>,
    /// Runs that ended at or after this time (seconds since the epoch).
    pub since: Option<i64>,
    /// Runs that ended before this time (seconds since the epoch).
    pub until: Option<i64>,
    /// Only the runs this uid may see: its own, and those of `hark run`
    /// (no owner, not served). `None`: every run (an admin).
    pub viewer: Option<u32>,
}

/// What went wrong; see [`ErrorKind`].
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: PathBuf,
}

/// The kinds of [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The index's folder could not be created.
    Io(std::io::Error),
    /// SQLite refused: not a database, locked, read-only, full.
    Sqlite(rusqlite::Error),
    /// A date the caller gave could not be read (`2026-11-24` or
    /// `2026-11-24 12:00:00` are read).
    Date(String),
    /// A private index ([`Index::open_private`]) could not be made readable
    /// by its owner alone.
    Private(std::io::Error),
}

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Whether the file is damaged or not a database at all (rather than
    /// locked, read-only or on a full disk): worth moving aside and
    /// rebuilding, where its run directories are at hand.
    pub fn is_corrupt(&self) -> bool {
        use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
        matches!(&self.kind, ErrorKind::Sqlite(rusqlite::Error::SqliteFailure(e, _))
            if matches!(e.code, DatabaseCorrupt | NotADatabase))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            ErrorKind::Io(e) => write!(f, "cannot create the folder of the run index {p}: {e}"),
            ErrorKind::Sqlite(e) => write!(
                f,
                "the run index {p} cannot be used: {e} (set {ENV} to use another file)"
            ),
            ErrorKind::Private(e) => write!(
                f,
                "cannot make the run index {p} readable by its owner alone (mode 0600): {e}"
            ),
            ErrorKind::Date(d) => write!(
                f,
                "`{d}` is not a date: write it as YYYY-MM-DD or YYYY-MM-DD HH:MM:SS (UTC)"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// An open run index.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run_dir      TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    date         INTEGER NOT NULL,
    ranks        INTEGER NOT NULL,
    wall_ns      INTEGER NOT NULL,
    command      TEXT NOT NULL,
    hark_version TEXT NOT NULL,
    owner        INTEGER,
    served       INTEGER NOT NULL DEFAULT 0,
    status       TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS programs (
    run_dir  TEXT NOT NULL REFERENCES runs(run_dir) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    name     TEXT NOT NULL,
    PRIMARY KEY (run_dir, position)
);
CREATE INDEX IF NOT EXISTS programs_by_name ON programs(name);
CREATE INDEX IF NOT EXISTS runs_by_date ON runs(date);
CREATE TABLE IF NOT EXISTS service (
    name  TEXT PRIMARY KEY,
    value INTEGER
);
";

impl Index {
    /// Opens the index at `path`, creating the file and its folder if
    /// needed. Several processes may hold it open at once: writes wait up
    /// to five seconds for one another.
    pub fn open(path: &Path) -> Result<Index, Error> {
        let err = |kind| Error {
            kind,
            path: path.to_path_buf(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(ErrorKind::Io(e)))?;
        }
        let conn = Connection::open(path).map_err(|e| err(ErrorKind::Sqlite(e)))?;
        let index = Index {
            conn,
            path: path.to_path_buf(),
        };
        index
            .conn
            .busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| index.sqlite(e))?;
        index
            .conn
            .execute_batch(&format!("PRAGMA foreign_keys = ON;{SCHEMA}"))
            .map_err(|e| index.sqlite(e))?;
        index.migrate().map_err(|e| index.sqlite(e))?;
        Ok(index)
    }

    /// Opens the index at `path` as [`Index::open`] does, first making the
    /// file readable and writable by its owner alone (mode 0600): created so
    /// when missing, narrowed when it exists, never through a symlink. A
    /// service keeps its index so, since its rows hold every user's command
    /// lines; SQLite gives its journal the same mode as the file.
    pub fn open_private(path: &Path) -> Result<Index, Error> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let err = |kind| Error {
            kind,
            path: path.to_path_buf(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(ErrorKind::Io(e)))?;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| err(ErrorKind::Private(e)))?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| err(ErrorKind::Private(e)))?;
        drop(file);
        Index::open(path)
    }

    /// Adds the columns a file written by an older Hark lacks (`owner` and
    /// `served`: its runs are then ownerless `hark run` runs; `status`:
    /// not known).
    fn migrate(&self) -> rusqlite::Result<()> {
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM pragma_table_info('runs')")?;
        let columns: Vec<String> = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for (name, ddl) in [
            ("owner", "ALTER TABLE runs ADD COLUMN owner INTEGER"),
            (
                "served",
                "ALTER TABLE runs ADD COLUMN served INTEGER NOT NULL DEFAULT 0",
            ),
            (
                "status",
                "ALTER TABLE runs ADD COLUMN status TEXT NOT NULL DEFAULT ''",
            ),
        ] {
            if !columns.iter().any(|c| c == name) {
                self.conn.execute_batch(ddl)?;
            }
        }
        Ok(())
    }

    /// The file this index is stored in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sqlite(&self, e: rusqlite::Error) -> Error {
        Error {
            kind: ErrorKind::Sqlite(e),
            path: self.path.clone(),
        }
    }

    /// Records a run, replacing any earlier row of the same directory.
    pub fn record(&self, e: &Entry) -> Result<(), Error> {
        let dir = e.run_dir.to_string_lossy();
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|x| self.sqlite(x))?;
        tx.execute("DELETE FROM runs WHERE run_dir = ?1", params![dir])
            .map_err(|x| self.sqlite(x))?;
        tx.execute(
            "INSERT INTO runs (run_dir, host, date, ranks, wall_ns, command, hark_version,
                               owner, served, status)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                dir,
                e.host,
                e.date,
                e.ranks as i64,
                e.wall_ns.min(i64::MAX as u64) as i64,
                e.command,
                e.hark_version,
                e.owner,
                e.served,
                e.status
            ],
        )
        .map_err(|x| self.sqlite(x))?;
        for (i, name) in e.programs.iter().enumerate() {
            tx.execute(
                "INSERT INTO programs (run_dir, position, name) VALUES (?1, ?2, ?3)",
                params![dir, i as i64, name],
            )
            .map_err(|x| self.sqlite(x))?;
        }
        tx.commit().map_err(|x| self.sqlite(x))
    }

    /// The runs `filter` keeps, oldest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<Entry>, Error> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT run_dir, host, date, ranks, wall_ns, command, hark_version, owner, served,
                        status
                 FROM runs r
                 WHERE (?1 IS NULL OR EXISTS
                        (SELECT 1 FROM programs p WHERE p.run_dir = r.run_dir AND p.name = ?1))
                   AND (?2 IS NULL OR host = ?2)
                   AND (?3 IS NULL OR date >= ?3)
                   AND (?4 IS NULL OR date < ?4)
                   AND (?5 IS NULL OR owner = ?5 OR (owner IS NULL AND served = 0))
                 ORDER BY date, run_dir",
            )
            .map_err(|e| self.sqlite(e))?;
        let rows = stmt
            .query_map(
                params![
                    filter.program,
                    filter.host,
                    filter.since,
                    filter.until,
                    filter.viewer
                ],
                |row| {
                    Ok(Entry {
                        run_dir: PathBuf::from(row.get::<_, String>(0)?),
                        programs: Vec::new(),
                        host: row.get(1)?,
                        date: row.get(2)?,
                        ranks: row.get::<_, i64>(3)? as u64,
                        wall_ns: row.get::<_, i64>(4)? as u64,
                        command: row.get(5)?,
                        hark_version: row.get(6)?,
                        owner: row.get(7)?,
                        served: row.get(8)?,
                        status: row.get(9)?,
                    })
                },
            )
            .map_err(|e| self.sqlite(e))?;
        let mut out = rows
            .collect::<Result<Vec<Entry>, _>>()
            .map_err(|e| self.sqlite(e))?;
        let mut names = self
            .conn
            .prepare("SELECT name FROM programs WHERE run_dir = ?1 ORDER BY position")
            .map_err(|e| self.sqlite(e))?;
        for e in &mut out {
            e.programs = names
                .query_map(params![e.run_dir.to_string_lossy()], |r| r.get(0))
                .and_then(|rows| rows.collect())
                .map_err(|x| self.sqlite(x))?;
        }
        Ok(out)
    }

    /// Records the admin group of the service that keeps this index
    /// (`hark serve --admin-group`; `None`: root alone), so that `hark runs`
    /// shows its members every run, as the service does.
    pub fn set_admin_group(&self, gid: Option<u32>) -> Result<(), Error> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO service (name, value) VALUES ('admin_gid', ?1)",
                params![gid],
            )
            .map(|_| ())
            .map_err(|e| self.sqlite(e))
    }

    /// The admin group [`Index::set_admin_group`] recorded, if any.
    pub fn admin_group(&self) -> Result<Option<u32>, Error> {
        let gid: Option<Option<u32>> = self
            .conn
            .query_row(
                "SELECT value FROM service WHERE name = 'admin_gid'",
                [],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(|e| self.sqlite(e))?;
        Ok(gid.flatten())
    }

    /// Reads a UTC date (`YYYY-MM-DD` or `YYYY-MM-DD HH:MM:SS`) as seconds
    /// since the epoch, with SQLite's own date functions.
    pub fn parse_date(&self, text: &str) -> Result<i64, Error> {
        let secs: Option<i64> = self
            .conn
            .query_row("SELECT unixepoch(?1)", params![text.trim()], |r| r.get(0))
            .map_err(|e| self.sqlite(e))?;
        secs.ok_or_else(|| Error {
            kind: ErrorKind::Date(text.to_string()),
            path: self.path.clone(),
        })
    }

    /// Formats seconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
    pub fn format_date(&self, secs: i64) -> Result<String, Error> {
        self.conn
            .query_row("SELECT datetime(?1, 'unixepoch')", params![secs], |r| {
                r.get(0)
            })
            .map_err(|e| self.sqlite(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &str, program: &str, host: &str, date: i64) -> Entry {
        Entry {
            run_dir: dir.into(),
            programs: vec![program.into()],
            host: host.into(),
            date,
            ranks: 2,
            wall_ns: 5,
            command: program.into(),
            hark_version: "0".into(),
            owner: None,
            served: false,
            status: "ok".into(),
        }
    }

    /// A path for a test's index, with no file there.
    fn fresh(tag: &str) -> PathBuf {
        let file =
            std::env::temp_dir().join(format!("hark-index-{tag}-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&file);
        file
    }

    #[test]
    fn the_admin_group_is_kept_and_replaced() {
        let file = fresh("admins");
        let index = Index::open(&file).unwrap();
        assert_eq!(index.admin_group().unwrap(), None);
        index.set_admin_group(Some(1234)).unwrap();
        assert_eq!(
            Index::open(&file).unwrap().admin_group().unwrap(),
            Some(1234)
        );
        index.set_admin_group(None).unwrap();
        assert_eq!(index.admin_group().unwrap(), None);
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn runs_are_listed_filtered_and_replaced() {
        let file = std::env::temp_dir().join(format!("hark-index-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&file);
        let index = Index::open(&file).unwrap();
        let day = index.parse_date("2026-11-24").unwrap();
        index.record(&entry("/a", "lmp", "n1", day + 10)).unwrap();
        index
            .record(&entry("/b", "ring", "n2", day + 86_400))
            .unwrap();
        index.record(&entry("/a", "lmp", "n3", day + 20)).unwrap();
        let all = index.list(&Filter::default()).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].host, "n3", "recording a directory again replaces it");
        let by = |f: Filter| -> Vec<String> {
            index
                .list(&f)
                .unwrap()
                .into_iter()
                .map(|e| e.run_dir.to_string_lossy().into_owned())
                .collect()
        };
        let program = Some("ring".to_string());
        assert_eq!(
            by(Filter {
                program,
                ..Filter::default()
            }),
            ["/b"]
        );
        let host = Some("n3".to_string());
        assert_eq!(
            by(Filter {
                host,
                ..Filter::default()
            }),
            ["/a"]
        );
        let until = Some(index.parse_date("2026-11-25").unwrap());
        assert_eq!(
            by(Filter {
                until,
                ..Filter::default()
            }),
            ["/a"]
        );
        assert!(matches!(
            index.parse_date("yesterday").unwrap_err().kind(),
            ErrorKind::Date(_)
        ));
        assert_eq!(index.format_date(day).unwrap(), "2026-11-24 00:00:00");
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn a_user_lists_their_own_served_runs_and_hark_runs_but_not_others() {
        let file = fresh("own");
        let index = Index::open(&file).unwrap();
        let served = |dir: &str, owner: Option<u32>| Entry {
            owner,
            served: true,
            ..entry(dir, "ring", "n1", 1)
        };
        index
            .record(&entry("/mine-by-hark-run", "ring", "n1", 1))
            .unwrap();
        index.record(&served("/ann", Some(1001))).unwrap();
        index.record(&served("/bob", Some(1002))).unwrap();
        index.record(&served("/site-over-tcp", None)).unwrap();
        let seen = |viewer| -> Vec<String> {
            let f = Filter {
                viewer,
                ..Filter::default()
            };
            index
                .list(&f)
                .unwrap()
                .into_iter()
                .map(|e| e.run_dir.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(seen(Some(1001)), ["/ann", "/mine-by-hark-run"]);
        assert_eq!(seen(Some(1003)), ["/mine-by-hark-run"]);
        assert_eq!(seen(None).len(), 4, "an admin sees every run");
        let ann = index.list(&Filter::default()).unwrap();
        assert!(ann.iter().any(|e| e.owner == Some(1001) && e.served));
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn a_file_of_an_older_hark_gains_the_owner_and_status_columns() {
        let file = fresh("old");
        let old = Connection::open(&file).unwrap();
        old.execute_batch(&SCHEMA.replace(
            ",\n    owner        INTEGER,\n    served       INTEGER NOT NULL DEFAULT 0,\n    status       TEXT NOT NULL DEFAULT ''",
            "",
        ))
        .unwrap();
        old.execute(
            "INSERT INTO runs VALUES ('/old', 'n1', 1, 2, 3, 'ring', '0')",
            [],
        )
        .unwrap();
        drop(old);
        let index = Index::open(&file).unwrap();
        let rows = index.list(&Filter::default()).unwrap();
        assert_eq!(
            (
                rows.len(),
                rows[0].owner,
                rows[0].served,
                rows[0].status.as_str()
            ),
            (1, None, false, "")
        );
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn a_private_index_is_readable_by_its_owner_alone() {
        use std::os::unix::fs::PermissionsExt;
        let file = fresh("private");
        let mode = |f: &Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        Index::open_private(&file)
            .unwrap()
            .record(&entry("/a", "lmp", "n1", 1))
            .unwrap();
        assert_eq!(mode(&file), 0o600, "a new private index");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let index = Index::open_private(&file).unwrap();
        assert_eq!(mode(&file), 0o600, "an existing index is narrowed");
        assert_eq!(index.list(&Filter::default()).unwrap().len(), 1);
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clear_error() {
        let file =
            std::env::temp_dir().join(format!("hark-index-bad-{}.sqlite", std::process::id()));
        std::fs::write(&file, vec![b'x'; 4096]).unwrap();
        let e = Index::open(&file)
            .err()
            .expect("garbage opened as an index");
        assert!(
            matches!(e.kind(), ErrorKind::Sqlite(_)) && e.is_corrupt(),
            "{e:?}"
        );
        assert!(e.to_string().contains("cannot be used"), "{e}");
        std::fs::remove_file(&file).unwrap();
    }
}
