//! Little-endian encoding of the variable-size frames.
//!
//! Writers never fail; readers check every length against what is left and
//! turn any shortfall into an [`Error`] naming the field.

use crate::Error;

/// Appends little-endian values to a byte vector.
pub struct Writer<'a>(pub &'a mut Vec<u8>);

impl Writer<'_> {
    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends an `i32`.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a string as a `u32` length and its UTF-8 bytes.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    /// Appends a list of `i32` as a `u32` count and the values.
    pub fn i32s(&mut self, v: &[i32]) -> &mut Self {
        self.u32(v.len() as u32);
        for &x in v {
            self.i32(x);
        }
        self
    }
}

/// Reads little-endian values from a byte slice.
pub struct Reader<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`, which hold a `what` (named in errors).
    pub fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Reader { bytes, what }
    }
    /// Bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }
    /// True when everything has been read.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], Error> {
        if self.bytes.len() < n {
            return Err(Error::malformed(format!(
                "{} ends inside its field `{field}` ({} bytes left, {n} needed)",
                self.what,
                self.bytes.len()
            )));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }
    /// Reads a `u8`.
    pub fn u8(&mut self, field: &str) -> Result<u8, Error> {
        Ok(self.take(1, field)?[0])
    }
    /// Reads a `u16`.
    pub fn u16(&mut self, field: &str) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.take(2, field)?.try_into().unwrap()))
    }
    /// Reads a `u32`.
    pub fn u32(&mut self, field: &str) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.take(4, field)?.try_into().unwrap()))
    }
    /// Reads an `i32`.
    pub fn i32(&mut self, field: &str) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.take(4, field)?.try_into().unwrap()))
    }
    /// Reads a `u64`.
    pub fn u64(&mut self, field: &str) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.take(8, field)?.try_into().unwrap()))
    }
    /// Reads a string written by [`Writer::str`].
    pub fn str(&mut self, field: &str) -> Result<String, Error> {
        let n = self.u32(field)? as usize;
        let bytes = self.take(n, field)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| Error::malformed(format!("{}: field `{field}` is not UTF-8", self.what)))
    }
    /// Reads a list written by [`Writer::i32s`].
    pub fn i32s(&mut self, field: &str) -> Result<Vec<i32>, Error> {
        let n = self.u32(field)? as usize;
        if n > self.bytes.len() / 4 {
            return Err(Error::malformed(format!(
                "{}: field `{field}` claims {n} values, more than the frame holds",
                self.what
            )));
        }
        (0..n).map(|_| self.i32(field)).collect()
    }
}
