//! Kafka's field encodings outside a protocol message: big-endian integers, strings with an
//! int16 length, unsigned varints, compact (varint length + 1) strings and arrays, and
//! tagged-field sections, as the records of `__consumer_offsets` and `__transaction_state`
//! hold them (`sluice-group` and `sluice-txn` read and write both topics' records with these).
//!
//! A reader is generic over the error its crate reports: any error made from a
//! [`FieldError`], so that the crate's own decoders use `?` on every field.

use std::marker::PhantomData;

use bytes::{BufMut, BytesMut};

/// Why a field could not be read: the input ends early or holds what the encoding forbids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError(pub &'static str);

/// Reads fields from the front of `buf`, each read moving past what it took.
pub struct FieldReader<'a, E> {
    buf: &'a [u8],
    pos: usize,
    error: PhantomData<E>,
}

impl<E> std::fmt::Debug for FieldReader<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FieldReader {{ at {} of {} }}", self.pos, self.buf.len())
    }
}

// Not derived: that would ask `E: Clone`, and a copy of a reader is only a position.
impl<E> Clone for FieldReader<'_, E> {
    fn clone(&self) -> Self {
        FieldReader {
            buf: self.buf,
            pos: self.pos,
            error: PhantomData,
        }
    }
}

impl<'a, E: From<FieldError>> FieldReader<'a, E> {
    pub fn new(buf: &'a [u8]) -> Self {
        FieldReader {
            buf,
            pos: 0,
            error: PhantomData,
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn at_end(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], E> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or(FieldError("truncated"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], E> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn i8(&mut self) -> Result<i8, E> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    pub fn i16(&mut self) -> Result<i16, E> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, E> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, E> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned varint of at most 64 bits.
    pub fn uvarint(&mut self) -> Result<u64, E> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(FieldError("varint too long").into())
    }

    /// A count of elements that must fit in what is left, each at least `min` bytes (a
    /// corrupt count is refused before anything is allocated for it).
    pub fn count(&mut self, n: usize, min: usize) -> Result<usize, E> {
        if n.saturating_mul(min) > self.remaining() {
            return Err(FieldError("length past the end").into());
        }
        Ok(n)
    }

    /// `n` bytes of UTF-8.
    pub fn utf8(&mut self, n: usize) -> Result<String, E> {
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| FieldError("string is not UTF-8").into())
    }

    /// A string with an int16 length; a negative length is null.
    pub fn nullable_str(&mut self) -> Result<Option<String>, E> {
        match usize::try_from(self.i16()?) {
            Ok(n) => self.utf8(n).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// A string with an int16 length, not null.
    pub fn str(&mut self) -> Result<String, E> {
        self.nullable_str()?
            .ok_or_else(|| FieldError("null string").into())
    }

    /// A compact length (the varint holds length + 1; 0 is null), at most what is left.
    pub fn compact_len(&mut self) -> Result<Option<usize>, E> {
        let n = self.uvarint()?;
        if n == 0 {
            return Ok(None);
        }
        let n = usize::try_from(n - 1).map_err(|_| FieldError("length"))?;
        if n > self.remaining() {
            return Err(FieldError("length past the end").into());
        }
        Ok(Some(n))
    }

    pub fn compact_nullable_str(&mut self) -> Result<Option<String>, E> {
        match self.compact_len()? {
            Some(n) => self.utf8(n).map(Some),
            None => Ok(None),
        }
    }

    pub fn compact_str(&mut self) -> Result<String, E> {
        self.compact_nullable_str()?
            .ok_or_else(|| FieldError("null string").into())
    }

    /// A compact array, each element read by `f` (null reads as empty).
    pub fn compact_array<T>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Result<T, E>,
    ) -> Result<Vec<T>, E> {
        let n = self.compact_len()?.unwrap_or(0);
        (0..n).map(|_| f(self)).collect()
    }

    /// A tagged-field section: (tag, data) of each field, for a reader that interprets some.
    pub fn tagged(&mut self) -> Result<Vec<(u64, &'a [u8])>, E> {
        let n = self.uvarint()?;
        let mut out = Vec::new();
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| FieldError("tag size"))?;
            out.push((tag, self.take(size)?));
        }
        Ok(out)
    }

    /// Skips a tagged-field section.
    pub fn skip_tags(&mut self) -> Result<(), E> {
        self.tagged().map(|_| ())
    }
}

/// A string with an int16 length; longer than `i16::MAX` bytes is cut there (Kafka refuses
/// such strings earlier: request decoders bound them by the same rule).
pub fn put_str(b: &mut BytesMut, s: &str) {
    let bytes = s.as_bytes();
    let len = bytes.len().min(i16::MAX as usize);
    b.put_i16(len as i16);
    b.put_slice(&bytes[..len]);
}

/// A string with an int16 length, or -1 for null.
pub fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

pub fn put_uvarint(b: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// A compact string (length + 1 as a varint; 0 for null).
pub fn put_compact_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        None => b.put_u8(0),
        Some(s) => {
            put_uvarint(b, s.len() as u64 + 1);
            b.put_slice(s.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct E(&'static str);
    impl From<FieldError> for E {
        fn from(e: FieldError) -> E {
            E(e.0)
        }
    }

    #[test]
    fn what_is_written_reads_back() {
        let mut b = BytesMut::new();
        put_str(&mut b, "héllo");
        put_nullable_str(&mut b, None);
        put_uvarint(&mut b, 300);
        put_compact_str(&mut b, Some("x"));
        put_compact_str(&mut b, None);
        b.put_i64(-2);
        put_uvarint(&mut b, 2); // two tagged fields
        put_uvarint(&mut b, 0);
        put_uvarint(&mut b, 1);
        b.put_u8(9);
        put_uvarint(&mut b, 5);
        put_uvarint(&mut b, 0);
        let mut r = FieldReader::<E>::new(&b);
        assert_eq!(r.str().unwrap(), "héllo");
        assert_eq!(r.nullable_str().unwrap(), None);
        assert_eq!(r.uvarint().unwrap(), 300);
        assert_eq!(r.compact_str().unwrap(), "x");
        assert_eq!(r.compact_nullable_str().unwrap(), None);
        assert_eq!(r.i64().unwrap(), -2);
        assert_eq!(
            r.tagged().unwrap(),
            vec![(0u64, &[9u8][..]), (5u64, &[][..])]
        );
        assert!(r.at_end());
    }

    #[test]
    fn corrupt_input_is_an_error_never_a_panic_or_a_large_allocation() {
        let r = |b: &[u8]| FieldReader::<E>::new(b).str().unwrap_err();
        assert_eq!(r(&[0]), E("truncated"));
        assert_eq!(r(&[0xff, 0xff]), E("null string"));
        assert_eq!(r(&[0, 1, 0xff]), E("string is not UTF-8"));
        let mut long = FieldReader::<E>::new(&[0xff; 11]);
        assert_eq!(long.uvarint().unwrap_err(), E("varint too long"));
        // A compact length past the end, and a count that cannot fit.
        let mut c = FieldReader::<E>::new(&[0x7f, 1, 2]);
        assert_eq!(c.compact_len().unwrap_err(), E("length past the end"));
        let mut c = FieldReader::<E>::new(&[1, 2, 3, 4]);
        assert_eq!(c.count(3, 2).unwrap_err(), E("length past the end"));
        assert_eq!(c.count(2, 2).unwrap(), 2);
    }
}
