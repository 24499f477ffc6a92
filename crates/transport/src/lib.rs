//! Listeners and per-connection readers that turn probe streams into decoded frames.
