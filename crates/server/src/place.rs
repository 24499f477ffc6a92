//! Keeping the server off the measured program's cores.
//!
//! A launcher binds each rank to its cores (Open MPI: one core per rank at
//! up to two ranks, by default) and the rank stays there. A server thread
//! that lands on a rank's core takes that core from the rank for as long as
//! it runs: the rank then waits, and its MPI calls look slower than Hark's
//! probe makes them. So each probe reports the cores its process is bound
//! to (`Frame::Cpus`), and the server binds its connection readers and its
//! board workers to the cores of this host that no live rank is bound to,
//! with as many board workers taking jobs as there are such cores (at least
//! one). It follows the ranks as they connect and end. With no free core
//! (ranks bound to every core), or no rank bound at all, the server's
//! threads run where the server started, unbound: the scheduler then
//! shares the cores with the ranks.
//!
//! Only this server's own threads are moved (a process may hold several
//! servers, and threads it did not start are not the server's to bind);
//! the accepting thread sleeps in `accept` and is left alone.

use std::collections::HashMap;
use std::sync::Mutex;

use hark_board::{cpus, Board};

/// The server's placement: which of its threads to move, and where.
pub(crate) struct Placement {
    board: Board,
    host: String,
    /// The CPUs online on this host.
    online: Vec<usize>,
    /// Where the server's threads run when not placed: the CPUs of the
    /// thread that started the server.
    anywhere: Vec<usize>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Per connection of this host whose process is bound to fewer than
    /// all online CPUs: its CPUs.
    bound: HashMap<u64, Vec<usize>>,
    /// Per CPU: how many of `bound` use it (so that a change costs the
    /// CPUs, not the connections).
    used: HashMap<usize, u32>,
    /// Per open connection: its reader thread's id.
    readers: HashMap<u64, i32>,
    /// Where the server's threads are bound now (`None`: unplaced).
    now: Option<Vec<usize>>,
}

impl Placement {
    pub(crate) fn new(board: Board) -> Placement {
        let online = cpus::online();
        Placement {
            board,
            host: host_name(),
            anywhere: cpus::of_thread(0).unwrap_or_else(|| online.clone()),
            online,
            inner: Mutex::default(),
        }
    }

    /// Called on a connection's reader thread at its `Hello`: the thread is
    /// moved with the others from now on, and placed as they are now.
    pub(crate) fn reader(&self, conn: u64) {
        let mut inner = hark_sync::lock(&self.inner);
        let tid = cpus::this_thread();
        inner.readers.insert(conn, tid);
        if let Some(to) = &inner.now {
            cpus::bind_thread(tid, to);
        }
    }

    /// A connection's `Cpus` frame: its process, on `host`, is bound to
    /// `cpus`. Only this host's processes bound to part of it count.
    pub(crate) fn cpus(&self, conn: u64, host: &str, cpus: &[u32]) {
        if host != self.host {
            return;
        }
        let cpus: Vec<usize> = cpus.iter().map(|&c| c as usize).collect();
        if self.online.iter().all(|c| cpus.contains(c)) {
            return;
        }
        let mut inner = hark_sync::lock(&self.inner);
        inner.forget(conn);
        for &c in &cpus {
            *inner.used.entry(c).or_default() += 1;
        }
        inner.bound.insert(conn, cpus);
        self.replace(&mut inner);
    }

    /// A connection ended (on its reader thread): its thread is forgotten
    /// before it exits (its id may then be reused by any thread or process)
    /// and its process's cores are free again.
    pub(crate) fn closed(&self, conn: u64) {
        let mut inner = hark_sync::lock(&self.inner);
        inner.readers.remove(&conn);
        if inner.forget(conn) {
            self.replace(&mut inner);
        }
    }

    /// The CPUs the server's threads are bound to now; `None` when unplaced.
    #[cfg(test)]
    pub(crate) fn now(&self) -> Option<Vec<usize>> {
        hark_sync::lock(&self.inner).now.clone()
    }

    /// Moves the threads where the ranks bound now leave room.
    fn replace(&self, inner: &mut Inner) {
        let want = free_cpus(&self.anywhere, &inner.used);
        if want == inner.now {
            return;
        }
        let to = want.as_ref().unwrap_or(&self.anywhere);
        for &tid in inner.readers.values() {
            // Fails only for a thread already gone: nothing to move.
            cpus::bind_thread(tid, to);
        }
        self.board.place_workers(want.as_deref());
        inner.now = want;
    }
}

impl Inner {
    /// Drops `conn`'s binding, if it had one (`true` then).
    fn forget(&mut self, conn: u64) -> bool {
        let Some(old) = self.bound.remove(&conn) else {
            return false;
        };
        for c in old {
            if let Some(n) = self.used.get_mut(&c) {
                *n -= 1;
                if *n == 0 {
                    self.used.remove(&c);
                }
            }
        }
        true
    }
}

/// Where the server should run: the CPUs of `anywhere` that no bound
/// process uses, or `None` (unplaced) when no process is bound or none
/// are left.
fn free_cpus(anywhere: &[usize], used: &HashMap<usize, u32>) -> Option<Vec<usize>> {
    if used.is_empty() {
        return None;
    }
    let free: Vec<usize> = anywhere
        .iter()
        .copied()
        .filter(|c| !used.contains_key(c))
        .collect();
    (!free.is_empty()).then_some(free)
}

/// This host's name, as the probe's `gethostname` gives it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim_end_matches('\n').to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_takes_the_cores_no_bound_rank_uses() {
        let all = [0, 1, 2, 3];
        let used = |bound: &[Vec<usize>]| {
            let mut inner = Inner::default();
            for (conn, cpus) in bound.iter().enumerate() {
                for &c in cpus {
                    *inner.used.entry(c).or_default() += 1;
                }
                inner.bound.insert(conn as u64, cpus.clone());
            }
            inner
        };
        assert_eq!(free_cpus(&all, &used(&[]).used), None);
        assert_eq!(free_cpus(&all, &used(&[vec![0]]).used), Some(vec![1, 2, 3]));
        assert_eq!(
            free_cpus(&all, &used(&[vec![0], vec![2]]).used),
            Some(vec![1, 3])
        );
        assert_eq!(free_cpus(&all, &used(&[vec![0, 1], vec![2, 3]]).used), None);
        assert_eq!(free_cpus(&[1], &used(&[vec![0]]).used), Some(vec![1]));
        // Two processes on core 0: it stays taken until both are gone.
        let mut two = used(&[vec![0], vec![0]]);
        assert!(two.forget(0) && !two.forget(0));
        assert_eq!(free_cpus(&all, &two.used), Some(vec![1, 2, 3]));
        assert!(two.forget(1));
        assert_eq!(free_cpus(&all, &two.used), None);
    }

    #[test]
    fn a_rank_bound_to_one_core_moves_the_readers_and_workers_off_it() {
        let online = cpus::online();
        let mine = cpus::of_thread(0).unwrap();
        if mine.len() < 2 {
            eprintln!("one CPU here: nothing to move to");
            return;
        }
        let board = Board::new(2);
        let p = Placement::new(board.clone());
        let rank = mine[0] as u32;
        std::thread::scope(|s| {
            s.spawn(|| {
                p.reader(7);
                // Another host's binding, and an unbound process: no move.
                p.cpus(7, "elsewhere", &[rank]);
                let all: Vec<u32> = online.iter().map(|&c| c as u32).collect();
                p.cpus(8, &host_name(), &all);
                assert_eq!(p.now(), None);
                assert_eq!(cpus::of_thread(0).unwrap(), mine);

                p.cpus(7, &host_name(), &[rank]);
                let rest: Vec<usize> = mine[1..].to_vec();
                assert_eq!(p.now(), Some(rest.clone()));
                assert_eq!(cpus::of_thread(0).unwrap(), rest, "the reader moved");
                assert_eq!(board.active_workers(), rest.len().min(2));

                p.closed(7);
                assert_eq!(p.now(), None);
                assert_eq!(board.active_workers(), 2);
            });
        });
        // The reader thread was forgotten before it moved back: it only
        // moves while registered.
        board.shutdown();
    }
}
