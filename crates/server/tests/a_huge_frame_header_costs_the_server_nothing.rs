//! A frame header claiming 256 MiB costs the server nothing before its
//! payload arrives: each frame kind has a cap (a pack's is the `pack_size`
//! its `Hello` declared) and a payload is read as it arrives, so four such
//! connections, idling, leave the server's memory where it was.

mod common;

use common::{hello, memory, server, socket};
use hark_wire::Kind;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn header(kind: Kind, len: u32) -> Vec<u8> {
    let mut b = (kind as u32).to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b
}

#[test]
fn idle_connections_claiming_256_mib_frames_do_not_grow_the_server() {
    let (dir, path) = socket("greedy");
    let server = server(&path, None);
    let before = memory().0;
    let claim = 256u32 << 20;
    let mut idle = Vec::new();
    for i in 0..4 {
        // A Hello that allows 256 MiB packs, then a pack header that
        // claims just that, a few bytes, and silence.
        let mut s = UnixStream::connect(&path).unwrap();
        let mut bytes = hello("greedy", 100 + i, claim);
        bytes.extend(header(Kind::Pack, claim));
        bytes.extend([0u8; 64]);
        s.write_all(&bytes).unwrap();
        idle.push(s);
    }
    // Over the caps: a first frame claiming 256 MiB, and a pack larger
    // than the 1 MiB its Hello declared. Both are cut at once.
    let mut big_hello = UnixStream::connect(&path).unwrap();
    big_hello.write_all(&header(Kind::Hello, claim)).unwrap();
    let mut big_pack = UnixStream::connect(&path).unwrap();
    let mut bytes = hello("greedy", 200, 1 << 20);
    bytes.extend(header(Kind::Pack, (1 << 20) + 1));
    big_pack.write_all(&bytes).unwrap();

    let settle = Instant::now() + Duration::from_secs(2);
    while server.status().broken < 2 && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = memory().0;
    eprintln!("server RSS {before} KiB before, {after} KiB with 4 idle greedy connections");
    assert!(
        after < before + 16 * 1024,
        "4 idle connections claiming 256 MiB frames grew the server from {before} to {after} KiB"
    );
    assert_eq!(
        server.status().broken,
        2,
        "the two oversized frames are refused at once"
    );

    let run = server.finish(Duration::from_millis(500));
    let diagnostics = run.programs.iter().flat_map(|p| &p.diagnostics);
    let text: Vec<&String> = diagnostics.collect();
    assert!(
        text.iter()
            .any(|d| d.contains("rejected before their handshake")
                && d.contains("Hello frame claims 268435456 bytes")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|d| d.contains("above its limit of 1048576 bytes (the pack size")),
        "{text:#?}"
    );
    drop(idle);
    std::fs::remove_dir_all(&dir).unwrap();
}
