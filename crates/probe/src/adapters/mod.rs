//! The wrappers: every function the probe exports in place of the
//! program's own, grouped by what they wrap. Each one follows the contract
//! in [`crate::core`] and never lets a panic escape into the program.
