//! Which of `HARK_ADDR`'s addresses the stream connects to.
//!
//! `HARK_ADDR` may list several addresses, separated by commas
//! (`secret@unix:/tmp/hark-1/hark.sock,tcp:10.0.0.1:4000,tcp:10.1.0.1:4000`):
//! `hark run` over a launcher that can place ranks on other nodes gives its
//! node-local Unix socket and a TCP address per interface of its host
//! (`docs/cluster.md`). The probe tries the Unix sockets first (only a
//! process on `hark`'s node finds one; elsewhere the path is missing and the
//! attempt fails at once), then the TCP addresses, those on one of this
//! host's subnets first, and keeps the first that connects. Every address
//! gets the same secret.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::RawFd;
use std::time::Duration;

use super::transport;

/// What an address of the list starts with. A `,` separates two addresses
/// only right before one of these, so a Unix path may hold a comma.
const SCHEMES: &[&str] = &["unix:", "tcp:", "tls:", "mpi:"];

/// Longest a TCP address that is not the last to try may take to connect:
/// one the host cannot route to should not hold up the next.
const TCP_TRY: Duration = Duration::from_secs(1);

/// The addresses of a list (without its secret), in the order given.
pub(crate) fn split(list: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in list.match_indices(',') {
        let next = &list[i + 1..];
        if i >= start && SCHEMES.iter().any(|s| next.starts_with(s)) {
            out.push(&list[start..i]);
            start = i + 1;
        }
    }
    out.push(&list[start..]);
    out.retain(|a| !a.is_empty());
    out
}

/// The order to try `addrs` in: Unix sockets first, then TCP addresses
/// whose host is on one of `subnets` (this host's interfaces, address and
/// mask), then the others, each group in the order given.
fn order<'a>(addrs: &[&'a str], subnets: &[(u32, u32)]) -> Vec<&'a str> {
    let near = |a: &str| {
        tcp_ipv4(a).is_some_and(|ip| {
            let ip = u32::from(ip);
            subnets.iter().any(|&(net, mask)| ip & mask == net & mask)
        })
    };
    let rank = |a: &str| match () {
        _ if !is_network(a) => 0,
        _ if near(a) => 1,
        _ => 2,
    };
    let mut out = addrs.to_vec();
    out.sort_by_key(|a| rank(a));
    out
}

/// Whether `addr` is reached over the network (`tcp:` or `tls:`).
fn is_network(addr: &str) -> bool {
    addr.starts_with("tcp:") || addr.starts_with("tls:")
}

/// The IPv4 host of `tcp:A.B.C.D:PORT`, if it is one.
fn tcp_ipv4(addr: &str) -> Option<Ipv4Addr> {
    let hostport = addr
        .strip_prefix("tcp:")
        .or_else(|| addr.strip_prefix("tls:"))?;
    let (host, _) = hostport.rsplit_once(':')?;
    host.parse().ok()
}

/// This host's IPv4 subnets (address and mask of each interface that is
/// up); empty if they cannot be read.
fn local_subnets() -> Vec<(u32, u32)> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid place for the list's head; on success the
    // list is ours until `freeifaddrs`.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is an element of the list, not yet freed.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_netmask.is_null() {
            continue;
        }
        // SAFETY: both point to sockaddrs whose family says what follows.
        let (fam, mfam) = unsafe { ((*ifa.ifa_addr).sa_family, (*ifa.ifa_netmask).sa_family) };
        if i32::from(fam) != libc::AF_INET || i32::from(mfam) != libc::AF_INET {
            continue;
        }
        // SAFETY: AF_INET addresses are sockaddr_in.
        let (a, m) = unsafe {
            (
                &*(ifa.ifa_addr as *const libc::sockaddr_in),
                &*(ifa.ifa_netmask as *const libc::sockaddr_in),
            )
        };
        out.push((
            u32::from_be(a.sin_addr.s_addr),
            u32::from_be(m.sin_addr.s_addr),
        ));
    }
    // SAFETY: `head` came from a successful `getifaddrs`, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// A connected socket, the address it reached, and its TLS state for a
/// `tls:` address.
pub(crate) type Linked = (RawFd, String, Option<std::sync::Arc<transport::ClientTls>>);

/// Connects to the first address of `list` (`HARK_ADDR` without its
/// secret) that answers, in the order above; returns the socket and that
/// address. A TCP address other than the last gets at most [`TCP_TRY`] of
/// `timeout`. Fails with every address tried and why, in one message.
pub(crate) fn connect_first(
    list: &str,
    tls_ca: Option<&str>,
    timeout: Duration,
    send_timeout: Duration,
    socket_buffer: usize,
) -> Result<Linked, io::Error> {
    let addrs = split(list);
    let ordered = match addrs.iter().any(|a| is_network(a)) && addrs.len() > 1 {
        true => order(&addrs, &local_subnets()),
        false => addrs,
    };
    let mut failed = Vec::new();
    for (i, addr) in ordered.iter().enumerate() {
        let last = i + 1 == ordered.len();
        let wait = match is_network(addr) && !last {
            true => timeout.min(TCP_TRY),
            false => timeout,
        };
        match transport::connect(addr, tls_ca, wait, send_timeout, socket_buffer) {
            Ok((fd, tls)) => return Ok((fd, addr.to_string(), tls)),
            Err(e) if ordered.len() == 1 => return Err(e),
            Err(e) => failed.push(format!("{addr}: {e}")),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotConnected,
        match failed.is_empty() {
            true => "no address to connect to".to_string(),
            false => failed.join("; "),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_splits_only_before_a_scheme() {
        for (list, want) in [
            ("unix:/tmp/s", vec!["unix:/tmp/s"]),
            (
                "unix:/tmp/a,b/s,tcp:10.0.0.1:5,tcp:h:6",
                vec!["unix:/tmp/a,b/s", "tcp:10.0.0.1:5", "tcp:h:6"],
            ),
            ("tcp:1.2.3.4:5,", vec!["tcp:1.2.3.4:5,"]),
            ("mpi:", vec!["mpi:"]),
            ("", vec![]),
        ] {
            assert_eq!(split(list), want, "{list}");
        }
    }

    #[test]
    fn unix_first_then_tcp_on_this_host_s_subnets() {
        let subnets = [
            (u32::from(Ipv4Addr::new(127, 0, 0, 1)), 0xff00_0000),
            (u32::from(Ipv4Addr::new(10, 9, 0, 2)), 0xffff_0000),
        ];
        let addrs = [
            "tcp:172.17.0.1:7",
            "tcp:10.9.0.1:7",
            "unix:/tmp/h.sock",
            "tcp:node1:7",
            "tcp:192.168.1.1:7",
        ];
        assert_eq!(
            order(&addrs, &subnets),
            [
                "unix:/tmp/h.sock",
                "tcp:10.9.0.1:7",
                "tcp:172.17.0.1:7",
                "tcp:node1:7",
                "tcp:192.168.1.1:7"
            ]
        );
    }

    #[test]
    fn a_missing_socket_falls_through_to_the_next_address() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let list = format!("unix:/nonexistent/hark.sock,tcp:127.0.0.1:{port}");
        let t = Duration::from_secs(2);
        let (fd, addr, _) = connect_first(&list, None, t, t, 1 << 20).unwrap();
        assert_eq!(addr, format!("tcp:127.0.0.1:{port}"));
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        drop(l);
        let Err(e) = connect_first(&list, None, t, t, 1 << 20) else {
            panic!("nothing listens, yet a connection was made");
        };
        let e = e.to_string();
        assert!(e.contains("unix:/nonexistent/hark.sock: "), "{e}");
        assert!(e.contains(&format!("tcp:127.0.0.1:{port}: ")), "{e}");
    }
}
