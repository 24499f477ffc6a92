//! Writing hark's own text: to stdout (where a closed pipe means "stop
//! quietly") or to stderr.

use std::io::Write;

/// Prints `text` on stdout. A reader that went away (`hark report | head`)
/// is not an error: it is reported as [`Quiet`] so `main` exits at once.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Quiet.into()),
        other => Ok(other?),
    }
}

/// Prints `text` on stderr, ignoring failures (there is nowhere left to
/// report them).
pub fn print_stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The error that ends `hark` quietly, with status 0: stdout was closed.
#[derive(Debug)]
pub struct Quiet;

impl std::fmt::Display for Quiet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout closed")
    }
}

impl std::error::Error for Quiet {}
