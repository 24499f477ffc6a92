//! Following point-to-point messages through requests.
//!
//! The wire's rule (`hark_wire::Event`): a message is counted once, where it
//! is complete. A blocking call says everything in its own record (`MPI_Send`,
//! `MPI_Recv` with the actual source and size, `MPI_Sendrecv` for its send).
//! A request-based one is complete in the `COMPLETE_SEND`/`COMPLETE_RECV`
//! detail that follows the call completing it (`MPI_Wait`, ...), which names
//! the request; the posting call (`MPI_Isend`, `MPI_Irecv`, `MPI_Send_init`,
//! `MPI_Start`) only says which function the message belongs to and how long
//! posting took. A [`Tracker`] keeps the little state this needs — the
//! outstanding requests of one stream — and turns each event into at most one
//! [`Msg`].

use crate::fx::FxHashMap;
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::{op, Event};

/// Outstanding requests above this many are forgotten (with a diagnostic):
/// a program that never completes its requests must not grow the server.
const MAX_PENDING: usize = 1 << 20;

/// A point-to-point message seen from one side, complete: published by the
/// per-stream tracker with every batch (`Input::msgs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    /// True for the sending side.
    pub send: bool,
    /// Index in `FUNCTIONS` of the function that names the message's kind:
    /// the send or receive call, or the one that posted the request.
    pub func: usize,
    /// World rank of the peer.
    pub peer: i32,
    /// Bytes sent or received.
    pub bytes: u64,
    /// Time of the call that moved it, or of the call that posted its
    /// request (the wait is timed as a call of its own).
    pub time_ns: u64,
    /// Start of the event that completed it (probe clock, ns): the call's
    /// own record, or the completion record that follows a `MPI_Wait*`.
    pub start: u64,
}

#[derive(Clone, Copy)]
struct Posted {
    func: u16,
    persistent: bool,
    /// Duration of the call that posted (or, persistent, last started) it.
    time_ns: u64,
}

/// The outstanding requests of one stream.
#[derive(Default)]
pub(crate) struct Tracker {
    pending: FxHashMap<u64, Posted>,
    /// Per thread: the last MPI call, which detail records belong to.
    last_call: Vec<u16>,
    /// Requests forgotten because too many were outstanding.
    pub forgotten: u64,
}

impl Tracker {
    fn post(&mut self, req: u64, p: Posted) {
        if self.pending.len() >= MAX_PENDING {
            self.forgotten += self.pending.len() as u64;
            self.pending.clear();
        }
        self.pending.insert(req, p);
    }

    /// The message `ev` completes, if any. Feed every event of the stream,
    /// in order. (Always inlined: it runs for every event, and the
    /// per-stream tracker that calls it is large enough that the compiler
    /// would otherwise make it a call.)
    #[inline(always)]
    pub(crate) fn step(&mut self, ev: &Event) -> Option<Msg> {
        let code = ev.op();
        if code >= op::COMPLETE_RECV {
            return self.detail(code, ev);
        }
        let op::OpKind::Mpi(func) = op::kind(code) else {
            return None;
        };
        let thread = ev.thread.get() as usize;
        if self.last_call.len() <= thread {
            self.last_call.resize(thread + 1, 0);
        }
        self.last_call[thread] = func as u16;
        let peer = ev.peer.get();
        let msg = |send| {
            (peer >= 0).then_some(Msg {
                send,
                func,
                peer,
                bytes: ev.bytes.get(),
                time_ns: ev.duration(),
                start: ev.start.get(),
            })
        };
        match FUNCTIONS[func].class {
            Class::Send | Class::Sendrecv => msg(true),
            Class::Recv => msg(false),
            class @ (Class::Isend | Class::Irecv | Class::SendInit | Class::RecvInit) => {
                let posted = Posted {
                    func: func as u16,
                    persistent: matches!(class, Class::SendInit | Class::RecvInit),
                    time_ns: ev.duration(),
                };
                self.post(ev.extra.get(), posted);
                None
            }
            Class::Start => {
                if let Some(p) = self.pending.get_mut(&ev.extra.get()) {
                    p.time_ns = ev.duration();
                }
                None
            }
            Class::RequestMisc if FUNCTIONS[func].name == "MPI_Request_free" => {
                self.pending.remove(&ev.extra.get());
                None
            }
            _ => None,
        }
    }

    fn detail(&mut self, code: u16, ev: &Event) -> Option<Msg> {
        let req = ev.extra.get();
        let posted = self.pending.get(&req).copied();
        if let Some(p) = posted {
            if !p.persistent || code == op::CANCELLED {
                self.pending.remove(&req);
            }
        }
        let send = match code {
            op::COMPLETE_SEND => true,
            op::COMPLETE_RECV => false,
            _ => return None,
        };
        let peer = ev.peer.get();
        if peer < 0 {
            return None;
        }
        // The function that posted the request names the message's kind;
        // the receive side of a blocking call (MPI_Sendrecv) has no request
        // and belongs to the call it follows, as does a request we never saw
        // posted.
        let (func, time_ns) = match posted {
            Some(p) => (p.func as usize, p.time_ns),
            None => (*self.last_call.get(ev.thread.get() as usize)? as usize, 0),
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
