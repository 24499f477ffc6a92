//! The probe settings `hark run` hands on, checked before the program starts.
//!
//! The measured processes read `HARK_*` from their environment: the values
//! `hark run` sets from its options, and any the user exported, which pass
//! through. A probe that meets a bad value can only warn and fall back to a
//! default, once per process, after the run has begun; `hark run` can say
//! so before anything starts. Each setting's valid values are the probe's,
//! from the one table of settings (`hark_settings`, listed in
//! `docs/probe.md`), and a bad value is refused with its name, the value and
//! those valid values.

use anyhow::{bail, Result};
use hark_settings::Setting;

/// Checks `value` for `setting`, for a value parser of an option that sets
/// it: the error names the value, the setting and its valid values.
pub fn check(setting: &Setting, value: &str) -> Result<(), String> {
    setting.check(value)
}

/// Checks every `HARK_*` setting the measured processes will see: `set`,
/// what `hark run` sets from its options, over the inherited environment.
pub fn check_all(set: &[(String, String)]) -> Result<()> {
    check_all_in(set, |name| std::env::var(name).ok())
}

/// [`check_all`] over the environment `env` gives.
fn check_all_in(set: &[(String, String)], env: impl Fn(&str) -> Option<String>) -> Result<()> {
    let mut bad = Vec::new();
    for setting in hark_settings::ALL {
        let (value, from) = match set.iter().find(|(k, _)| k == setting.name) {
            Some((_, v)) => (v.clone(), "set by hark run"),
            None => match env(setting.name) {
                Some(v) => (v, "in the environment"),
                None => continue,
            },
        };
        if let Err(e) = setting.check(&value) {
            bad.push(format!("{e} ({from})"));
        }
    }
    if !bad.is_empty() {
        bail!(
            "{}; the command was not started",
            bad.join("\nhark: error: ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error `check_all` gives for one variable in the environment, or
    /// "ok".
    fn refused(name: &str, value: &str) -> String {
        let env = |k: &str| (k == name).then(|| value.to_string());
        match check_all_in(&[], env) {
            Ok(()) => "ok".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bad_values_in_the_environment_are_refused_with_their_valid_values() {
        for (name, value, expect) in [
            ("HARK_BUFFERS", "0", "`0` is not a valid HARK_BUFFERS: it must be a whole number from 2 to 4096 (in the environment); the command was not started"),
            ("HARK_PACK_SIZE", "10G", "`10G` is not a valid HARK_PACK_SIZE: it must be a size from 4K to 64M (e.g. 256K, 4M) (in the environment); the command was not started"),
            ("HARK_SEND_TIMEOUT_MS", "0", "`0` is not a valid HARK_SEND_TIMEOUT_MS: it must be a whole number of ms from 1 to 3600000 (in the environment); the command was not started"),
            ("HARK_CLOCK_SYNC", "2", "`2` is not a valid HARK_CLOCK_SYNC: it must be 1, yes, true or on; 0, no, false or off (in the environment); the command was not started"),
            ("HARK_SHM", "7", "`7` is not a valid HARK_SHM: it must be 1, yes, true or on; 0, no, false or off; or auto (in the environment); the command was not started"),
            ("HARK_EXCHANGE", "x", "`x` is not a valid HARK_EXCHANGE: it must be 1, yes, true or on; 0, no, false or off (in the environment); the command was not started"),
            ("HARK_MPI_MAP", "bogus", "`bogus` is not a valid HARK_MPI_MAP: it must be one of: same-node, round-robin, blocks (in the environment); the command was not started"),
            ("HARK_CLOCK", "sundial", "`sundial` is not a valid HARK_CLOCK: it must be one of: tsc, monotonic (in the environment); the command was not started"),
            ("HARK_FLUSH_MS", "0", "ok"),
            ("HARK_DRAIN_TIMEOUT_MS", "0", "ok"),
            ("HARK_IO", "off", "ok"),
            ("HARK_SHM", "auto", "ok"),
            ("HARK_CLOCK", "", "ok"),
            ("HARK_JOB", "anything", "ok"),
            ("HARK_SOMETHING_ELSE", "anything", "ok"),
        ] {
            assert_eq!(refused(name, value), expect, "{name}={value}");
        }
    }

    #[test]
    fn what_hark_run_sets_is_checked_over_the_environment() {
        let set = [("HARK_BUFFERS".to_string(), "1".to_string())];
        let e = check_all_in(&set, |_| Some("16".into())).unwrap_err();
        assert!(e.to_string().contains("(set by hark run)"), "{e}");
    }

    #[test]
    fn every_map_policy_the_table_names_is_one_the_analysers_parse() {
        let hark_settings::Kind::Word(words) = hark_settings::MPI_MAP.kind else {
            panic!("HARK_MPI_MAP is not a word setting");
        };
        for w in words {
            assert_eq!(
                hark_wire::partition::Policy::parse(w)
                    .ok()
                    .map(|p| p.name()),
                Some(*w)
            );
        }
    }
}
