//! Programs run under the probe; the decoded stream equals what they did.

mod common;

use common::{bytes_on, compile, count_on, Probed};
use hark_wire::op::io;

#[test]
fn posix_calls_arrive_with_exact_bytes_offsets_and_errors() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let p = Probed::new("posix");
    let run = p.run(&exe, &["data.bin"]);
    assert!(
        run.status.success(),
        "exit {:?}: {}",
        run.status,
        run.stderr
    );
    let s = run.only_stream();
    assert!(s.is_clean(), "{:?}", s.closed);
    let f = "data.bin";
    assert_eq!(count_on(s, io::OPEN, f), 2);
    assert_eq!(
        (count_on(s, io::WRITE, f), bytes_on(s, io::WRITE, f)),
        (10, 5500)
    );
    assert_eq!(
        (count_on(s, io::PWRITE, f), bytes_on(s, io::PWRITE, f)),
        (1, 333)
    );
    assert_eq!(bytes_on(s, io::WRITEV, f), 60);
    assert_eq!(count_on(s, io::FSYNC, f), 1);
    assert_eq!(count_on(s, io::FDATASYNC, f), 1);
    assert_eq!(
        (count_on(s, io::READ, f), bytes_on(s, io::READ, f)),
        (4, 10333)
    );
    assert_eq!(bytes_on(s, io::PREAD, f), 100);
    assert_eq!(bytes_on(s, io::READV, f), 100);
    assert_eq!(count_on(s, io::LSEEK, f), 1);
    assert_eq!(count_on(s, io::CLOSE, f), 2);
    let pw = s.events_of(io::PWRITE).next().unwrap();
    assert_eq!(pw.extra.get(), 10000, "pwrite offset");
    // The failed open and read carry their errno.
    let bad = s.file_id("/nonexistent/hark/x").unwrap();
    let failed_open = s.events_of(io::OPEN).find(|e| e.obj.get() == bad).unwrap();
    assert_eq!(
        (failed_open.peer.get(), failed_open.tag.get()),
        (-1, libc::ENOENT)
    );
    let failed_read = s.events_of(io::READ).find(|e| e.peer.get() == -1).unwrap();
    assert_eq!(failed_read.tag.get(), libc::EBADF);
    assert_eq!(bytes_on(s, io::WRITE, "<stdout>"), 6);
    assert_eq!(run.stdout, "hello\n");
    let end = s.end.as_ref().unwrap();
    assert_eq!(end.events_written, s.events.len() as u64);
    assert_eq!(end.events_dropped, 0);
}
