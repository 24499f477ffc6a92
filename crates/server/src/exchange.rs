//! An analyser's side of the exchange between analysers (`hark run
//! --analysers`, `docs/analysers.md`, "Keys routed between analysers").
//!
//! The server owns the I/O of the analyses, so the exchange's interface is
//! here: the outbox ([`hark_engine::exchange::Exchange::take`], per
//! destination, filled by the board's levels), [`Server::inject`] for the
//! parcels other analysers sent, and what an analyser rank's MPI loop needs
//! to know when everything was exchanged ([`Server::exchange_quiet`],
//! [`Server::flush_trackers`]). Moving the bytes is the caller's: the
//! server knows nothing of MPI.

use crate::{Error, ErrorKind, Server};
use hark_engine::exchange::{program_key, Parcel};
use std::sync::atomic::Ordering;

impl Server {
    /// Makes this server one analyser of several, as
    /// [`crate::ServerConfig::exchange`] does at start: for a server started
    /// before it knew its place among the analysers (an analyser's keeper
    /// process, forked before `MPI_Init`). Only programs that appear after
    /// this call exchange their keys, so it must come before any stream
    /// connects. Returns false, changing nothing, if it was set already.
    pub fn set_exchange(&self, exchange: std::sync::Arc<hark_engine::exchange::Exchange>) -> bool {
        self.state.exchange.set(exchange).is_ok()
    }

    /// Takes in one parcel (the bytes after its length prefix) from
    /// analyser `from`: its entries are submitted to its program's level as
    /// if published here. A parcel for a program no stream here has named
    /// yet waits until one does. Parcels from one analyser must be given in
    /// the order it queued them.
    pub fn inject(&self, from: u32, bytes: &[u8]) -> Result<(), Error> {
        let parcel = Parcel::read(bytes).map_err(|e| Error::new(ErrorKind::Exchange(e)))?;
        self.unpark()?;
        let mut parked = hark_sync::lock(&self.state.parked);
        if parked.iter().any(|(_, p)| p.program() == parcel.program()) {
            // Behind the parcels of its program that wait already.
            parked.push((from, parcel));
            return Ok(());
        }
        drop(parked);
        self.deliver(from, parcel)
    }

    /// Gives a parcel to its program's level, or parks it.
    fn deliver(&self, from: u32, parcel: Parcel) -> Result<(), Error> {
        let on = self
            .state
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|p| program_key(&p.job, &p.name) == parcel.program())
            .map(|p| p.on.clone());
        match on {
            Some(on) => on
                .inject(from, parcel)
                .map_err(|e| Error::new(ErrorKind::Exchange(e))),
            None => {
                self.state
                    .parked
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((from, parcel));
                Ok(())
            }
        }
    }

    /// Delivers the parked parcels whose program has a level now, in order.
    fn unpark(&self) -> Result<(), Error> {
        let parked = std::mem::take(&mut *hark_sync::lock(&self.state.parked));
        if parked.is_empty() {
            return Ok(());
        }
        let known: Vec<String> = self
            .state
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|p| program_key(&p.job, &p.name))
            .collect();
        let mut result = Ok(());
        for (from, parcel) in parked {
            if known.iter().any(|k| k == parcel.program()) {
                if let Err(e) = self.deliver(from, parcel) {
                    result = Err(e);
                }
            } else {
                self.state
                    .parked
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((from, parcel));
            }
        }
        result
    }

    /// Whether this server is done with everything it was given: `streams`
    /// connections closed (all it will get), no parcel parked, and every
    /// program's level without entries in flight — so the outbox holds all
    /// that its analysis of what came so far will send.
    pub fn exchange_quiet(&self, streams: u64) -> bool {
        if self.unpark().is_err() {
            // Reported when the parcel is injected again; not quiet yet.
            return false;
        }
        if self.state.counters.closed.load(Ordering::Relaxed) < streams {
            return false;
        }
        if !self
            .state
            .parked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            return false;
        }
        self.state
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .all(|p| p.on.in_flight() == 0)
    }

    /// Publishes what every program's stream trackers still hold (see
    /// [`hark_engine::OnBoard::flush_unpackers`]), once the streams ended.
    pub fn flush_trackers(&self) {
        let levels: Vec<_> = self
            .state
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|p| p.on.clone())
            .collect();
        for on in levels {
            on.flush_unpackers();
        }
    }

    /// Parcels still parked at the end: their program never streamed here.
    pub(crate) fn parked_problems(&self) -> Vec<String> {
        let parked = std::mem::take(&mut *hark_sync::lock(&self.state.parked));
        if parked.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "{} parcel(s) of operations from other analysers belong to a program whose owning rank never streamed to this analyser; they were not matched",
            parked.len()
        )]
    }
}
