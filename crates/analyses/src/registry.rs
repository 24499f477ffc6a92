//! The one list of knowledge sources. Adding one is a new file in `ks/` and
//! one line here (see `ks/template.rs`).
//!
//! Order matters only at the end of a program: knowledge sources fold their
//! results into the model in this order. The wait states read the time
//! slices' width, CPU availability the wait states' slices, the efficiencies the slices too, the density maps every
//! per-rank result, and the digest everything: they come last.

use crate::dynamic::DynAnalysis;
use crate::ks;
use crate::{Error, ErrorKind};
use std::sync::Arc;

/// Every knowledge source, in fold order.
pub fn all() -> Vec<Arc<dyn DynAnalysis>> {
    vec![
        Arc::new(ks::summary::Summary),
        Arc::new(ks::mpi_profile::MpiProfile),
        Arc::new(ks::p2p::P2pTopology),
        Arc::new(ks::collectives::Collectives),
        Arc::new(ks::io::IoProfile),
        Arc::new(ks::regions::Regions),
        Arc::new(ks::template::Marks),
        Arc::new(ks::timeslices::TimeSlices),
        Arc::new(ks::waits::WaitStates),
        Arc::new(ks::callsites::Callsites),
        Arc::new(ks::cpu::CpuAvailability),
        Arc::new(ks::sensors::NodeSensors),
        Arc::new(ks::counters::Counters),
        Arc::new(ks::efficiency::Efficiencies),
        Arc::new(ks::openmp::OpenMpTimes),
        Arc::new(ks::density::Density),
        Arc::new(ks::digest::Digest),
    ]
}

/// The knowledge sources named in `names` (spec names, as `all()` lists
/// them), in fold order whatever the order of `names`.
pub fn select(names: &[&str]) -> Result<Vec<Arc<dyn DynAnalysis>>, Error> {
    let all = all();
    if let Some(unknown) = names
        .iter()
        .find(|n| !all.iter().any(|a| a.spec().name == **n))
    {
        let known: Vec<&str> = all.iter().map(|a| a.spec().name).collect();
        return Err(Error::new(ErrorKind::UnknownAnalysis(format!(
            "no analysis is called `{unknown}`; the analyses are: {}",
            known.join(", ")
        ))));
    }
    Ok(all
        .into_iter()
        .filter(|a| names.contains(&a.spec().name))
        .collect())
}
