//! What is arriving while the program runs, shown on stderr.
//!
//! Two ways: a status line redrawn in place twice a second (only when
//! stderr is a terminal: a log file would fill with carriage returns), or,
//! in verbose mode, one line each time processes connect or end. The line is
//! erased before the summary is printed.

use crate::output::print_stderr;
use hark_outputs::units::count;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// What the server has seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Processes connected now.
    pub connected: u64,
    /// Processes whose stream has ended.
    pub ended: u64,
    /// Programs seen.
    pub programs: u64,
    /// Events received so far.
    pub events: u64,
}

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Not at all.
    Off,
    /// One line redrawn in place.
    Line,
    /// A new line whenever processes connect or end.
    Log,
}

/// The status for `now`, given the previous reading `dt` earlier.
pub fn line(now: Progress, before: Progress, dt: Duration) -> String {
    let rate = if dt.is_zero() {
        0
    } else {
        (now.events.saturating_sub(before.events) as f64 / dt.as_secs_f64()) as u64
    };
    let mut s = format!(
        "hark: {} {} connected",
        now.connected,
        if now.connected == 1 {
            "process"
        } else {
            "processes"
        }
    );
    if now.programs > 1 {
        s.push_str(&format!(" ({} programs)", now.programs));
    }
    if now.ended > 0 {
        s.push_str(&format!(", {} ended", now.ended));
    }
    s.push_str(&format!(
        ", {} events, {} events/s",
        count(now.events),
        count(rate)
    ));
    s
}

/// A running status display; [`StatusLine::stop`] ends (and erases) it.
pub struct StatusLine<'scope> {
    stop: Arc<AtomicBool>,
    thread: Option<ScopedJoinHandle<'scope, ()>>,
    mode: Mode,
}

impl<'scope> StatusLine<'scope> {
    /// Starts showing progress read from `poll`, on a thread of `scope`.
    pub fn start<'env, F>(
        scope: &'scope Scope<'scope, 'env>,
        mode: Mode,
        poll: F,
    ) -> StatusLine<'scope>
    where
        F: Fn() -> Progress + Send + 'scope,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = (mode != Mode::Off).then(|| {
            let stop = stop.clone();
            scope.spawn(move || show(mode, &stop, poll))
        });
        StatusLine { stop, thread, mode }
    }

    /// Stops, erasing the line in [`Mode::Line`].
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            if self.mode == Mode::Line {
                print_stderr("\r\x1b[K");
            }
        }
    }
}

fn show(mode: Mode, stop: &AtomicBool, poll: impl Fn() -> Progress) {
    let mut before = poll();
    let mut t0 = Instant::now();
    let mut logged = (u64::MAX, u64::MAX);
    loop {
        // Sleep in small steps so stopping is prompt.
        for _ in 0..10 {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let now = poll();
        let t = Instant::now();
        let text = line(now, before, t - t0);
        match mode {
            Mode::Line => print_stderr(&format!("\r\x1b[K{text}")),
            Mode::Log if (now.connected, now.ended) != logged => {
                logged = (now.connected, now.ended);
                print_stderr(&format!("{text}\n"));
            }
            _ => {}
        }
        before = now;
        t0 = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_counts_processes_events_and_their_rate() {
        let before = Progress {
            connected: 4,
            ended: 0,
            programs: 1,
            events: 1_000,
        };
        let now = Progress {
            connected: 3,
            ended: 1,
            programs: 2,
            events: 501_000,
        };
        assert_eq!(
            line(now, before, Duration::from_millis(500)),
            "hark: 3 processes connected (2 programs), 1 ended, 501,000 events, 1,000,000 events/s"
        );
        assert_eq!(
            line(
                Progress {
                    connected: 1,
                    ..Progress::default()
                },
                Progress::default(),
                Duration::ZERO
            ),
            "hark: 1 process connected, 0 events, 0 events/s"
        );
    }
}
