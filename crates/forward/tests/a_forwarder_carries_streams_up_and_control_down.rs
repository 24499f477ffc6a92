//! A forwarder between a probe and a server: the probe's frames reach the
//! server as the probe's own stream, the server's control frames reach the
//! probe, and when the server's connection ends the forwarder cuts the
//! probe off and ends.

use hark_transport::{Back, Closed, ConnId, Listener, Peer, Sink};
use hark_wire::{
    encode_pack, op, Action, ClockSource, Control, End, EndReason, Event, Frame, FrameReader,
    Hello, CONTROL_SIZE,
};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A server that pauses every stream at its `Hello`, and notes what came.
#[derive(Default)]
struct Pausing {
    backs: Mutex<HashMap<ConnId, Back>>,
    events: Mutex<HashMap<u32, usize>>,
    closed: Mutex<Vec<(u32, Closed)>>,
    pids: Mutex<HashMap<ConnId, u32>>,
}

impl Sink for Pausing {
    fn on_accept(&self, conn: ConnId, peer: &Peer) -> Result<(), String> {
        self.backs
            .lock()
            .unwrap()
            .insert(conn, peer.back().unwrap());
        Ok(())
    }

    fn on_hello(&self, conn: ConnId, hello: &Hello, _: i64) {
        self.pids.lock().unwrap().insert(conn, hello.pid);
        let mut bytes = Vec::new();
        Control::new(Action::Pause).encode(&mut bytes);
        self.backs.lock().unwrap()[&conn].send(&bytes).unwrap();
    }

    fn on_frame(&self, conn: ConnId, frame: Frame<'_>) {
        if let Frame::Pack { events, .. } = frame {
            let pid = self.pids.lock().unwrap()[&conn];
            *self.events.lock().unwrap().entry(pid).or_default() += events.len();
        }
    }

    fn on_close(&self, conn: ConnId, outcome: Closed) {
        if let Some(pid) = self.pids.lock().unwrap().get(&conn) {
            self.closed.lock().unwrap().push((*pid, outcome));
        }
    }
}

fn hello(pid: u32) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: "p".into(),
        argv: vec!["p".into()],
        host: "n1".into(),
        pid,
        rank: 0,
        size: 1,
        job: "j".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 0,
        realtime_ns: 0,
        pack_size: 1 << 16,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    b
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hark-forward-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts a forwarder to `up` listening on `dir/fwd.sock`, and connects
/// a probe to it once it listens.
fn forwarder(
    dir: &Path,
    up: &str,
) -> (
    std::thread::JoinHandle<Result<hark_forward::Report, hark_forward::Error>>,
    UnixStream,
) {
    let config = hark_forward::Config {
        listen: format!("unix:{}", dir.join("fwd.sock").display()),
        upstream: vec![up.to_string()],
        tls_ca: None,
        linger: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(3),
        lock_file: Some(dir.join("fwd.lock")),
    };
    std::fs::write(dir.join("fwd.lock"), "").unwrap();
    let run = std::thread::spawn(move || hark_forward::run(&config));
    let deadline = Instant::now() + Duration::from_secs(10);
    let probe = loop {
        if let Ok(s) = UnixStream::connect(dir.join("fwd.sock")) {
            break s;
        }
        assert!(Instant::now() < deadline, "the forwarder never listened");
        std::thread::sleep(Duration::from_millis(5));
    };
    (run, probe)
}

#[test]
fn frames_go_up_as_the_probes_stream_and_a_pause_comes_down() {
    let dir = scratch("updown");
    let sink = Arc::new(Pausing::default());
    let up = Listener::bind(&format!("unix:{}", dir.join("hark.sock").display())).unwrap();
    let addr = up.addr().to_string();
    let server = up.serve(sink.clone());
    let (run, mut probe) = forwarder(&dir, &addr);

    probe.write_all(&hello(41)).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut control = [0u8; CONTROL_SIZE];
    probe.read_exact(&mut control).unwrap();
    match FrameReader::new(&control[..]).next_frame().unwrap() {
        Some(Frame::Control(c)) => assert_eq!(c.action, Action::Pause),
        other => panic!("{other:?}"),
    }
    let mut bytes = Vec::new();
    let events: Vec<Event> = (0..300)
        .map(|i| Event::new(op::REGION_BEGIN, i, i + 1))
        .collect();
    encode_pack(0, &events, &mut bytes);
    End {
        events_written: 300,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Exit,
    }
    .encode(&mut bytes);
    probe.write_all(&bytes).unwrap();
    drop(probe);

    let report = run.join().unwrap().unwrap();
    assert_eq!((report.streams, report.events), (1, 300));
    assert!(!report.upstream_lost);
    // Gone with it: its socket and its election's lock file.
    assert!(!dir.join("fwd.sock").exists() && !dir.join("fwd.lock").exists());
    server.shutdown();
    assert_eq!(sink.events.lock().unwrap()[&41], 300);
    assert_eq!(*sink.closed.lock().unwrap(), [(41, Closed::Clean)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn when_hark_goes_the_probes_are_cut_off_and_the_forwarder_ends() {
    let dir = scratch("lost");
    let sink = Arc::new(Pausing::default());
    let up = Listener::bind(&format!("unix:{}", dir.join("hark.sock").display())).unwrap();
    let addr = up.addr().to_string();
    let server = up.serve(sink.clone());
    let (run, mut probe) = forwarder(&dir, &addr);
    probe.write_all(&hello(42)).unwrap();
    let mut control = [0u8; CONTROL_SIZE];
    probe
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    probe.read_exact(&mut control).unwrap();

    server.abort_connections();
    // The probe's socket ends: nothing more comes, and its reads see EOF.
    let mut rest = Vec::new();
    probe.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    let report = run.join().unwrap().unwrap();
    assert!(report.upstream_lost);
    std::fs::remove_dir_all(&dir).unwrap();
}
