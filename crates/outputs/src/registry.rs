//! Every output Hark writes into a run directory, in the order they are
//! written. Adding an output is a new module implementing [`Output`] plus
//! one line here.

use crate::Output;

/// The outputs, by name: `summary` (summary.txt), `json` (profile.json),
/// `dot` (topology/*.dot), `html` (report.html).
pub static OUTPUTS: &[&dyn Output] = &[
    &crate::summary::Summary,
    &crate::json::Json,
    &crate::dot::Dot,
    &crate::html::Html,
];
