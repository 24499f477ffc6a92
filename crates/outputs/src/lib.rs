//! Terminal summary, HTML report, JSON and DOT outputs of a Hark run.
