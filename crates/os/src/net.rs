//! This host's network interfaces, for the addresses `hark run` gives
//! ranks on other nodes (`docs/cluster.md`).

use std::net::Ipv4Addr;

/// One IPv4 address of an interface that is up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// The interface's name (`eth0`, `ib0`, ...).
    pub name: String,
    /// Its address.
    pub addr: Ipv4Addr,
    /// Whether it is a loopback interface.
    pub loopback: bool,
}

/// The IPv4 addresses of this host's interfaces that are up, in the order
/// the kernel lists them; empty if `getifaddrs` fails.
pub fn ipv4_interfaces() -> Vec<Interface> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid place for the list's head; on success the
    // list is ours until `freeifaddrs`.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is an element of the list `getifaddrs` gave, not yet
        // freed.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        let up = ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0;
        if !up || ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: `ifa_addr` is non-null and points to a sockaddr whose
        // family says what follows.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        // SAFETY: `ifa_name` is a NUL-terminated string of the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        out.push(Interface {
            name: name.to_string_lossy().into_owned(),
            addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
            loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0,
        });
    }
    // SAFETY: `head` came from a successful `getifaddrs` and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_interface_is_listed_as_such() {
        let all = ipv4_interfaces();
        let lo = all.iter().find(|i| i.addr == Ipv4Addr::LOCALHOST);
        if let Some(lo) = lo {
            assert!(lo.loopback, "{all:?}");
        }
        assert!(
            all.iter().all(|i| i.loopback == i.addr.is_loopback()),
            "{all:?}"
        );
    }
}
