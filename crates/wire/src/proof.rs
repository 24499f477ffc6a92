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
//! sent again are refused. SHA-256 (FIPS 180-4) and HMAC (RFC 2104) are
//! written out here so that the wire, shared by the probe and the server,
//! depends on no crypto crate.

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
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&sha256(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let mut inner = pad(0x36);
    inner.extend_from_slice(message);
    let mut outer = pad(0x5c);
    outer.extend_from_slice(&sha256(&inner));
    sha256(&outer)
}

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256 (FIPS 180-4) of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut padded = data.to_vec();
    padded.push(0x80);
    while padded.len() % 64 != 56 {
        padded.push(0);
    }
    padded.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for chunk in padded.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in chunk.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (o, x) in out.chunks_mut(4).zip(h) {
        o.copy_from_slice(&x.to_be_bytes());
    }
    out
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
