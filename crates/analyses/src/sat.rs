//! Saturating sums of stream-derived values: [`hark_model::sat`], which the
//! outputs use too.

pub(crate) use hark_model::sat::{total, Sat};
