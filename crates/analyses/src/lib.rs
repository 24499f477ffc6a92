//! Hark's knowledge sources: reduce event streams into profiles, matrices and time series.
