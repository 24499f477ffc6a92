//! A server (or a test collector) whose socket file someone has already
//! removed still shuts down: its accept thread must not be woken by
//! connecting to its own socket file, which would hang forever.

use std::sync::mpsc;
use std::time::Duration;

use hark_transport::collect::serve_collect;

fn shuts_down_within_seconds(addr: &str, remove: Option<std::path::PathBuf>) {
    let collector = serve_collect(addr).expect("collector listens");
    if let Some(path) = remove {
        std::fs::remove_file(path).expect("remove the socket file");
    }
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        drop(collector);
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(10))
        .expect("dropping the collector returned");
}

#[test]
fn a_unix_server_whose_socket_file_is_gone_still_shuts_down() {
    let dir = std::env::temp_dir().join(format!("hark-gone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s.sock");
    shuts_down_within_seconds(&format!("unix:{}", sock.display()), Some(sock.clone()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tcp_server_shuts_down() {
    shuts_down_within_seconds("tcp:127.0.0.1:0", None);
}
