//! Hark's wire format: the binary stream from a probe to a server.
//!
//! A stream is a sequence of frames ([`Kind`]): a [`Hello`] saying who is speaking,
//! then definitions ([`Def`]), packs of fixed-size [`Event`] records, an
//! optional [`RankInfo`] once MPI is up, and an [`End`] with the probe's
//! totals. Events are 48-byte little-endian records read in place, without
//! copying; everything else is a small length-prefixed encoding. The format is
//! versioned ([`VERSION`]) and written down in `docs/wire.md`.
//!
//! ```
//! use hark_wire::{op, Event, FrameReader, Frame, encode_pack};
//!
//! let mut stream = Vec::new();
//! let mut ev = Event::new(op::io::WRITE, 100, 250);
//! ev.bytes.set(4096);
//! encode_pack(0, &[ev], &mut stream);
//!
//! let mut reader = FrameReader::new(&stream[..]);
//! match reader.next_frame().unwrap() {
//!     Some(Frame::Pack { seq: 0, events }) => assert_eq!(events[0].bytes.get(), 4096),
//!     other => panic!("unexpected {other:?}"),
//! }
//! assert!(reader.next_frame().unwrap().is_none());
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod codec;
mod control;
pub mod counters;
mod counts;
mod error;
mod event;
mod forward;
mod frame;
pub mod mpi;
pub mod op;
pub mod partition;
mod proof;

pub use control::{Action, Control, CONTROL_SIZE, REFUSED_TOKEN};
pub use counts::{Count, Counts, COUNTS_FIXED_SIZE, COUNT_SIZE};
pub use error::{Error, ErrorKind};
pub use event::{
    accounted, Event, EVENT_SIZE, EXTRA_BITS, EXTRA_MASK, EXTRA_NONE, PEER_ANY, PEER_NONE,
    PEER_NULL, PEER_ROOT, TAG_ANY,
};
pub use forward::{encode_mux, write_mux_header, Gone, GoneHow, Node, MUX_OVERHEAD};
pub use frame::{
    encode_clock_ping, encode_clock_pong, encode_cpus, encode_pack, encode_ring, write_pack_header,
    ClockPhase, ClockReference, ClockSource, ClockSync, Def, End, EndReason, Flavour, Frame,
    FrameReader, Hello, Kind, NameKind, PackBytes, Pong, RankInfo, TickScale, HEADER_SIZE, MAGIC,
    MAX_CALLSITE_DEPTH, MAX_CLOCK_OFFSET_NS, MAX_CPUS, MAX_PAYLOAD, MAX_ROUND_TRIP_NS,
    PACK_HEADER_SIZE, VERSION,
};
pub use proof::{hmac_sha256, same_secret, sha256, Credential, NONCE_SIZE, PROOF_PREFIX};
