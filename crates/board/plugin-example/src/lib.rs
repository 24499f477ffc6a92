//! An example knowledge-source plugin loaded by hark-board's tests.
