//! Hark's user API for Rust programs: regions, marks and counters.
