//! The proof of a secret a [`Hello`] carries in place of the secret itself.
//!
//! A stream that crosses a network must not hand its secret to whoever
//! reads it, and must not be worth replaying: the probe sends, in the
//! `secret` field, `hmac-sha256:NONCE:MAC` — a fresh random 16-byte nonce
//! and HMAC-SHA-256, keyed by the secret, over the nonce and the `Hello`'s
//! identity (pid, host, job, program, ranks, parent, and its `realtime_ns`,
//! which dates it). A reader that knows the secret recomputes the MAC
//! ([`Hello::check_secret`]); a service refuses a nonce it has seen, or a
//! `realtime_ns` outside its acceptance window, so that captured bytes
//! sent again are refused. HMAC and SHA-256 are RustCrypto's (`hmac`,
//! `sha2`): small, dependency-light crates, so the probe pays little for
//! them, and checked here against the published test vectors.

use crate::Hello;

/// What starts a proof in `Hello.secret`.
pub const PROOF_PREFIX: &str = "hmac-sha256:";
/// Bytes of a proof's nonce.
pub const NONCE_SIZE: usize = 16;

/// What a `Hello`'s `secret` field says of the secret a reader expects
/// ([`Hello::check_secret`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential {
    /// The field holds the secret itself (a stream that never leaves the
    /// host: the reader cannot tell a replay).
    Plain,
    /// The field proves the secret, under this nonce.
    Proof([u8; NONCE_SIZE]),
    /// Empty, wrong, or a proof that does not verify.
    Wrong,
}

impl Hello {
    /// Replaces `secret` by a proof of `secret` under `nonce` (a fresh
    /// random value per stream), bound to this `Hello`'s identity and
    /// date: set every other field first.
    pub fn prove(&mut self, secret: &str, nonce: [u8; NONCE_SIZE]) {
        let mac = hmac_sha256(secret.as_bytes(), &self.signed(&nonce));
        self.secret = format!("{PROOF_PREFIX}{}:{}", hex(&nonce), hex(&mac));
    }

    /// Checks the `secret` field against the `secret` the reader expects,
    /// in time independent of where a wrong one differs.
    pub fn check_secret(&self, secret: &str) -> Credential {
        let Some(rest) = self.secret.strip_prefix(PROOF_PREFIX) else {
            return if same(secret.as_bytes(), self.secret.as_bytes()) {
                Credential::Plain
            } else {
                Credential::Wrong
            };
        };
        let Some((nonce, mac)) = rest.split_once(':') else {
            return Credential::Wrong;
        };
        let (Some(nonce), Some(mac)) = (unhex::<NONCE_SIZE>(nonce), unhex::<32>(mac)) else {
            return Credential::Wrong;
        };
        if same(&hmac_sha256(secret.as_bytes(), &self.signed(&nonce)), &mac) {
            Credential::Proof(nonce)
        } else {
            Credential::Wrong
        }
    }

    /// The bytes the MAC covers: a domain tag, the nonce, then the
    /// identity, each string length-prefixed so that no two differ only
    /// in where one field ends.
    fn signed(&self, nonce: &[u8; NONCE_SIZE]) -> Vec<u8> {
        let mut m = b"hark-hello-proof-1".to_vec();
        m.extend_from_slice(nonce);
        m.extend_from_slice(&self.realtime_ns.to_le_bytes());
        m.extend_from_slice(&self.pid.to_le_bytes());
        m.extend_from_slice(&self.rank.to_le_bytes());
        m.extend_from_slice(&self.size.to_le_bytes());
        m.extend_from_slice(&self.parent.to_le_bytes());
        for s in [&self.host, &self.job, &self.program] {
            m.extend_from_slice(&(s.len() as u64).to_le_bytes());
            m.extend_from_slice(s.as_bytes());
        }
        m
    }
}

/// Whether two secrets are equal, in time independent of where they
/// differ (their lengths are not secret).
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    same(a, b)
}

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.as_bytes();
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.chunks(2)) {
        let digit = |c: u8| (c as char).to_digit(16);
        *o = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::{KeyInit, Mac};
    // HMAC takes a key of any length: `new_from_slice` cannot fail.
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key)
        .expect("HMAC accepts keys of every length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// SHA-256 (FIPS 180-4) of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_and_hmac_match_the_published_vectors() {
        for (input, expect) in [
            (
                &b""[..],
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
        ] {
            assert_eq!(hex(&sha256(input)), expect);
        }
        // RFC 4231, test cases 2 and 6 (a key longer than a block).
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }
}
