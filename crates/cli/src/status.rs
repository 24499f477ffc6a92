//! What is arriving while the program runs, shown on stderr.
//!
//! The program shares the terminal, so hark never redraws a line in place
//! (that would overwrite or garble the program's own output): it prints
//! whole lines, which interleave with the program's lines like any two
//! processes' would. A line is printed when processes connect or end, and
//! otherwise after 1, 2, 4, ... seconds, then once a minute, so a long run
//! stays quiet. Shown only when stderr is a terminal (or in verbose mode).

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
    /// A line when processes connect or end, else ever more rarely.
    Lines,
    /// A line when processes connect or end, else every 5 seconds.
    Verbose,
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
        StatusLine { stop, thread }
    }

    /// Stops showing progress.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// When the next periodic line is due, `shown` lines after the start.
pub fn next_period(mode: Mode, shown: u32) -> Duration {
    match mode {
        Mode::Verbose => Duration::from_secs(5),
        // 1, 2, 4, ... 32 seconds, then every minute.
        _ => Duration::from_secs((1u64 << shown.min(6)).min(60)),
    }
}

fn show(mode: Mode, stop: &AtomicBool, poll: impl Fn() -> Progress) {
    let mut before = poll();
    let mut t_before = Instant::now();
    let mut shown = 0;
    let mut due = t_before + next_period(mode, shown);
    let mut last_processes = (before.connected, before.ended);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let now = poll();
        let t = Instant::now();
        let processes = (now.connected, now.ended);
        // Say when processes connect or end, once they have settled for a
        // moment (a launch connects many at once); otherwise when due.
        let changed = processes != last_processes && t - t_before >= Duration::from_millis(500);
        if changed || t >= due {
            print_stderr(&format!("{}\n", line(now, before, t - t_before)));
            shown += 1;
            due = t + next_period(mode, shown);
            last_processes = processes;
            before = now;
            t_before = t;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_lines_grow_rare() {
        let secs: Vec<u64> = (0..9)
            .map(|k| next_period(Mode::Lines, k).as_secs())
            .collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(next_period(Mode::Verbose, 7).as_secs(), 5);
    }

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
