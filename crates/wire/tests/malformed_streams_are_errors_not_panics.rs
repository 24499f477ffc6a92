//! Bad input from one connection must close that connection with a reason:
//! every malformed, truncated or random stream gives an `Err`, never a panic.

mod common;

use hark_wire::*;

fn read_all(bytes: &[u8]) -> Result<usize, Error> {
    let mut r = FrameReader::new(bytes);
    let mut n = 0;
    while r.next_frame()?.is_some() {
        n += 1;
    }
    Ok(n)
}

#[test]
fn a_stream_cut_at_any_byte_is_an_error_or_a_clean_prefix() {
    let stream = common::sample_stream();
    let boundaries = frame_boundaries(&stream);
    for cut in 0..stream.len() {
        match read_all(&stream[..cut]) {
            Ok(_) => assert!(
                boundaries.contains(&cut),
                "cut at {cut} inside a frame read cleanly"
            ),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn flipping_any_byte_never_panics() {
    let stream = common::sample_stream();
    for i in 0..stream.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut s = stream.clone();
            s[i] ^= flip;
            let _ = read_all(&s);
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..2000 {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Bias toward small kinds and lengths so that headers often parse.
                if x.is_multiple_of(3) {
                    (x >> 8) as u8 % 6
                } else {
                    (x >> 8) as u8
                }
            })
            .collect();
        let _ = read_all(&bytes);
    }
}

#[test]
fn errors_say_what_is_wrong() {
    let mut bad_magic = Vec::new();
    common::sample_hello().encode(&mut bad_magic);
    bad_magic[HEADER_SIZE] = b'X';
    let e = read_all(&bad_magic).unwrap_err().to_string();
    assert!(e.contains("magic"), "{e}");

    let mut new_version = Vec::new();
    common::sample_hello().encode(&mut new_version);
    new_version[HEADER_SIZE + 4] = 99;
    let e = read_all(&new_version).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Version { found: 99 }), "{e}");

    let mut huge = Vec::new();
    huge.extend_from_slice(&4u32.to_le_bytes());
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    let e = read_all(&huge).unwrap_err().to_string();
    assert!(e.contains("limit"), "{e}");

    let mut ragged = Vec::new();
    encode_pack(0, &[Event::new(op::MARK, 0, 0)], &mut ragged);
    ragged.push(0);
    let len = u32::from_le_bytes(ragged[4..8].try_into().unwrap()) + 1;
    ragged[4..8].copy_from_slice(&len.to_le_bytes());
    let e = read_all(&ragged).unwrap_err().to_string();
    assert!(e.contains("whole number"), "{e}");
}

#[test]
fn clock_frames_out_of_bounds_are_errors() {
    let bad = |edit: fn(&mut ClockSync)| {
        let mut c = common::sample_clock();
        edit(&mut c);
        let mut bytes = Vec::new();
        c.encode(&mut bytes);
        read_all(&bytes).unwrap_err().to_string()
    };
    let e = bad(|c| c.reference_ns = c.local_ns + MAX_CLOCK_OFFSET_NS + 1);
    assert!(e.contains("offset") && e.contains("limit"), "{e}");
    let e = bad(|c| c.local_ns = u64::MAX);
    assert!(e.contains("2^63"), "{e}");
    let e = bad(|c| c.round_trip_ns = MAX_ROUND_TRIP_NS + 1);
    assert!(e.contains("round trip"), "{e}");
    let mut phase = Vec::new();
    common::sample_clock().encode(&mut phase);
    phase[HEADER_SIZE] = 9;
    let e = read_all(&phase).unwrap_err().to_string();
    assert!(e.contains("unknown phase 9"), "{e}");
}

fn frame_boundaries(stream: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut out = vec![0];
    while at < stream.len() {
        let len = u32::from_le_bytes(stream[at + 4..at + 8].try_into().unwrap()) as usize;
        at += HEADER_SIZE + len;
        out.push(at);
    }
    out
}
