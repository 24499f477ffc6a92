//! Following point-to-point messages through requests.
//!
//! The wire's rule (`hark_wire::Event`): a message is counted once, where it
//! is complete. A blocking call says everything in its own record (`MPI_Send`,
//! `MPI_Recv` with the actual source and size, `MPI_Sendrecv` for its send).
//! A request-based one is complete in the `COMPLETE_SEND`/`COMPLETE_RECV`
//! detail that follows the call completing it (`MPI_Wait`, ...), which names
//! the request; the posting call (`MPI_Isend`, `MPI_Irecv`, `MPI_Send_init`,
//! `MPI_Start`) only says which function the message belongs to and how long
//! posting took. A [`RequestTable`] keeps the little state this needs — the
//! outstanding requests of one stream — and turns each event into at most one
//! [`Msg`].

use hark_analyses::internal::FxHashMap;
pub use hark_analyses::Msg;
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::{op, Event};
use std::collections::hash_map::Entry;

/// Outstanding requests above this many are forgotten (with a diagnostic):
/// a program that never completes its requests must not grow the server.
const MAX_PENDING: usize = 1 << 20;

/// An outstanding request: what the request tracker needs for the
/// message, and what the per-stream tracker (`unpack.rs`) needs to match it.
#[derive(Clone, Copy)]
pub(crate) struct Posted {
    /// Index in `FUNCTIONS` of the function that posted it.
    pub func: u16,
    pub persistent: bool,
    /// A send request.
    pub send: bool,
    /// Duration of the call that posted (or, persistent, last started) it.
    pub time_ns: u64,
    /// Entry into that call (common ns; 0 where nothing is matched).
    pub post_ns: u64,
    /// Global communicator id, peer and tag (for persistent sends, which
    /// each `MPI_Start` sends again; `UNDEFINED`/-1 where nothing is
    /// matched).
    pub comm: u32,
    /// Which communicator with its members (`P2pOp::occ`).
    pub occ: u32,
    pub peer: i32,
    pub tag: i32,
}

/// The outstanding requests of one stream.
#[derive(Default)]
pub(crate) struct RequestTable {
    pub pending: FxHashMap<u64, Posted>,
    /// Per thread: the last MPI call, which detail records belong to.
    last_call: Vec<u16>,
    /// Requests forgotten because too many were outstanding.
    pub forgotten: u64,
}

/// How the trackers make a [`Msg`] from the events that complete it.
pub(crate) trait MsgOf: Sized {
    /// The message a blocking call moved, said in its own record.
    fn of_call(send: bool, func: usize, ev: &Event) -> Option<Self>;
    /// The message a completion record says is complete.
    fn of_completion(
        code: u16,
        posted: Option<Posted>,
        last: Option<u16>,
        ev: &Event,
    ) -> Option<Self>;
}

impl MsgOf for Msg {
    /// The message a blocking call moved, said in its own record.
    #[inline(always)]
    fn of_call(send: bool, func: usize, ev: &Event) -> Option<Msg> {
        let peer = ev.peer.get();
        (peer >= 0).then(|| Msg {
            send,
            func,
            peer,
            bytes: ev.bytes.get(),
            time_ns: ev.duration(),
            start: ev.start.get(),
        })
    }

    /// The message a completion record says is complete: its kind is the
    /// function that posted the request, or, for a request never seen
    /// posted (or the receive side of `MPI_Sendrecv`, which has none), the
    /// call the record follows (`last`).
    #[inline(always)]
    fn of_completion(
        code: u16,
        posted: Option<Posted>,
        last: Option<u16>,
        ev: &Event,
    ) -> Option<Msg> {
        let send = match code {
            op::COMPLETE_SEND => true,
            op::COMPLETE_RECV => false,
            _ => return None,
        };
        let peer = ev.peer.get();
        if peer < 0 {
            return None;
        }
        let (func, time_ns) = match posted {
            Some(p) => (p.func as usize, p.time_ns),
            None => (last? as usize, 0),
        };
        Some(Msg {
            send,
            func,
            peer,
            bytes: ev.bytes.get(),
            time_ns,
            start: ev.start.get(),
        })
    }
}

impl Posted {
    /// The request a posting call (`Isend`, `Irecv`, `Send_init`,
    /// `Recv_init`: `class`) made, with nothing to match it by: the
    /// per-stream tracker sets `post_ns`, `comm`, `peer` and `tag`.
    #[inline(always)]
    pub(crate) fn of_call(class: Class, func: usize, ev: &Event) -> Posted {
        Posted {
            func: func as u16,
            persistent: matches!(class, Class::SendInit | Class::RecvInit),
            send: matches!(class, Class::Isend | Class::SendInit),
            time_ns: ev.duration(),
            post_ns: 0,
            comm: hark_analyses::UNDEFINED,
            occ: 0,
            peer: -1,
            tag: -1,
        }
    }
}

impl RequestTable {
    /// Remembers request `req`.
    pub(crate) fn post(&mut self, req: u64, p: Posted) {
        if self.pending.len() >= MAX_PENDING {
            self.forgotten += self.pending.len() as u64;
            self.pending.clear();
        }
        self.pending.insert(req, p);
    }

    /// `MPI_Start` (`ev`) of a persistent request: the request, if it was
    /// seen posted, its time now the start's.
    #[inline(always)]
    pub(crate) fn start(&mut self, ev: &Event) -> Option<&mut Posted> {
        let p = self.pending.get_mut(&ev.extra())?;
        p.time_ns = ev.duration();
        Some(p)
    }

    /// A completion record (`code`) for request `req`: the request as
    /// posted, if it was seen. It is done unless persistent (persistent
    /// requests stay until freed, even when cancelled: the next
    /// `MPI_Start` uses them again).
    #[inline(always)]
    pub(crate) fn complete(&mut self, req: u64) -> Option<Posted> {
        // One lookup: most requests are done when completed.
        match self.pending.entry(req) {
            Entry::Occupied(e) if e.get().persistent => Some(*e.get()),
            Entry::Occupied(e) => Some(e.remove()),
            Entry::Vacant(_) => None,
        }
    }

    /// The message `ev` completes, if any. Feed every event of the stream,
    /// in order. (Always inlined: it runs for every event, and the
    /// per-stream tracker that calls it is large enough that the compiler
    /// would otherwise make it a call.)
    #[inline(always)]
    pub(crate) fn step(&mut self, ev: &Event) -> Option<Msg> {
        let code = ev.op();
        let func = match op::kind(code) {
            op::OpKind::Mpi(func) => func,
            op::OpKind::Detail => {
                let posted = self.complete(ev.extra());
                let last = self.last_call.get(ev.thread.get() as usize).copied();
                return Msg::of_completion(code, posted, last, ev);
            }
            _ => return None,
        };
        let thread = ev.thread.get() as usize;
        if self.last_call.len() <= thread {
            self.last_call.resize(thread + 1, 0);
        }
        self.last_call[thread] = func as u16;
        match FUNCTIONS[func].class {
            Class::Send | Class::Sendrecv => Msg::of_call(true, func, ev),
            Class::Recv => Msg::of_call(false, func, ev),
            class @ (Class::Isend | Class::Irecv | Class::SendInit | Class::RecvInit) => {
                self.post(ev.extra(), Posted::of_call(class, func, ev));
                None
            }
            Class::Start => {
                self.start(ev);
                None
            }
            Class::RequestMisc if FUNCTIONS[func].name == "MPI_Request_free" => {
                self.pending.remove(&ev.extra());
                None
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: u16, start: u64, req: u64) -> Event {
        let mut e = Event::new(code, start, start + 10);
        e.extra.set(req);
        e.peer.set(1);
        e.bytes.set(8);
        e
    }

    #[test]
    fn a_cancelled_persistent_request_started_again_keeps_its_kind() {
        let f = |name| op::mpi_op(name).unwrap();
        let mut t = RequestTable::default();
        let msgs: Vec<Msg> = [
            ev(f("MPI_Recv_init"), 0, 7),
            ev(f("MPI_Start"), 100, 7),
            ev(f("MPI_Cancel"), 200, 7),
            ev(op::CANCELLED, 300, 7),
            ev(f("MPI_Start"), 400, 7),
            ev(f("MPI_Wait"), 500, 7),
            ev(op::COMPLETE_RECV, 500, 7),
        ]
        .iter()
        .filter_map(|e| t.step(e))
        .collect();
        let recv_init = FUNCTIONS.iter().position(|f| f.name == "MPI_Recv_init");
        assert_eq!(msgs.len(), 1);
        // The kind of the posting call, timed as the second Start.
        assert_eq!((Some(msgs[0].func), msgs[0].time_ns), (recv_init, 10));
    }
}
