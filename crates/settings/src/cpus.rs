//! The kernel's CPU lists (`/sys/devices/system/cpu/online`, a cpuset's
//! `cpus`): text both the probe and the server read, so parsed here once.

/// A kernel CPU list (`0-3,8,10-11`) → the listed numbers, in the order
/// listed; malformed parts (`garbage`, a range written backwards) are
/// skipped.
pub fn cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => out.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b => out.extend(a..=b),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_malformed_parts_are_skipped() {
        for (text, cpus) in [
            ("0-3,8,10-11\n", vec![0, 1, 2, 3, 8, 10, 11]),
            ("0", vec![0]),
            ("", vec![]),
            ("garbage", vec![]),
            ("garbage,5-2", vec![]),
            ("1,x,3", vec![1, 3]),
        ] {
            assert_eq!(cpu_list(text), cpus, "{text:?}");
        }
    }
}
