//! A minimal HTTP/1.1 client for `hark query` and `hark top`: a GET on a
//! live server's own address, so no TLS, no redirects, no proxies.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Why a [`get`] failed, said for a person.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// GETs `url` (`http://HOST:PORT/PATH`) and returns the body of a 200
/// answer; any other status is an error carrying the server's message.
pub fn get(url: &str) -> Result<String, Error> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        Error(format!(
            "`{url}` is not an http:// address (as `hark run` and `hark open` print)"
        ))
    })?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let fail = |e: std::io::Error| Error(format!("cannot read {url}: {e}"));
    let mut stream = TcpStream::connect(host).map_err(|e| {
        Error(format!(
            "cannot connect to {host}: {e} (is the run still going on?)"
        ))
    })?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: application/json\r\n\r\n"
    )
    .map_err(fail)?;
    // Read until the answer is complete: by its length, its last chunk,
    // or the end of the connection (a server may keep it open).
    let mut bytes = Vec::new();
    let mut buf = [0u8; 64 << 10];
    let (head, body) = loop {
        let n = stream.read(&mut buf).map_err(fail)?;
        bytes.extend_from_slice(&buf[..n]);
        if let Some(split) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..split]).to_ascii_lowercase();
            let body = &bytes[split + 4..];
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let chunked = head.contains("transfer-encoding: chunked");
            let done = match length {
                Some(len) => body.len() >= len,
                None if chunked => body.ends_with(b"0\r\n\r\n"),
                None => n == 0,
            };
            if done || n == 0 {
                let body = match (length, chunked) {
                    (Some(len), _) => body[..len.min(body.len())].to_vec(),
                    (None, true) => dechunk(body)
                        .ok_or_else(|| Error(format!("{url} sent a malformed chunked body")))?,
                    (None, false) => body.to_vec(),
                };
                break (head, body);
            }
        } else if n == 0 {
            return Err(Error(format!("{url} sent no HTTP answer")));
        }
    };
    let status = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let body = String::from_utf8_lossy(&body).into_owned();
    if status != "200" {
        return Err(Error(format!("{url}: {status}: {}", body.trim())));
    }
    Ok(body)
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line = body.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&body[..line]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        let rest = &body[line + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix(b"\r\n")?;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            super::dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").as_deref(),
            Some(&b"abcde"[..])
        );
        assert_eq!(super::dechunk(b"9\r\nabc"), None);
    }
}
