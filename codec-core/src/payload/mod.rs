//! The one reader every decoder reads through, over every source of bytes.
//!
//! A [`PayloadReader`] hands out a payload of declared length from memory, a stream, or a
//! source read at explicit offsets (a file, an object read by ranges). A read past the
//! declared length is [`Error::Truncated`], and [`PayloadReader::ensure_available`] lets a
//! decoder check a declared count against the bytes left *before* it allocates.
//!
//! When the container asks it to, the reader hashes every byte it hands out, in the order it
//! hands them out: the checksum the container verifies is the checksum of exactly the bytes
//! the decoder saw, whatever happens to the source meanwhile (a file rewritten or truncated
//! while it loads yields a checksum mismatch or a truncation, never a key from other bytes).

use std::borrow::Cow;
use std::io::{self, Read};

use rayon::prelude::*;

use crate::bulk::{self, Hooks, Span, SpanData, Workers};
use crate::error::{Error, Result};
use halo2curves::bn256::Fr;

use crate::field::{check_raw_elements, FieldEncoding, CHUNK_ELEMENTS, FR_BYTES};
use crate::options::Validation;
use crate::poly_hash::PolyHasher;
use crate::source::{hash_range, AtSource, Memory, ReadAt, BULK_STEP};
use crate::xxh3::{xxh3_64, Xxh3};

mod elements;
mod integrity;
mod polys;

pub use elements::{read_fr_vec, read_polynomial};
pub(crate) use elements::{read_vector, read_vectors, Digest};

/// Elements pre-allocated at once when the payload length is only declared, not verified
/// against a real source length (16 MiB of field elements).
const UNVERIFIED_PREALLOC_ELEMENTS: usize = 1 << 19;

/// Bytes pre-allocated at once for a borrowed read from a stream.
const UNVERIFIED_PREALLOC_BYTES: usize = 16 << 20;

/// Reads of at least this many bytes handed out whole ([`PayloadReader::read_borrowed`]) from
/// a source read at offsets go straight to the source, in one read.
const DIRECT_READ: usize = 1 << 20;

/// Reads a payload of known declared length.
pub struct PayloadReader<'a> {
    source: Source<'a>,
    remaining: u64,
    length_verified: bool,
    hash: Hash,
    /// The hashes of the polynomials read so far, when the key's digest is wanted.
    polynomials: Option<Vec<[u8; 32]>>,
}

/// Where the payload comes from.
enum Source<'a> {
    /// Bytes in memory: `rest` not yet handed out, `whole` the payload from its start.
    Memory { rest: &'a [u8], whole: &'a [u8] },
    /// A stream, read in order.
    Stream(&'a mut dyn Read),
    /// A source read at explicit offsets; the payload is `len` bytes from `origin`.
    At {
        reader: AtSource<'a>,
        origin: u64,
        len: u64,
    },
}

/// The running hash of the bytes handed out.
enum Hash {
    /// Not asked for.
    Off,
    /// Every byte handed out so far, in order. Boxed: the state is most of this size.
    On(Box<Xxh3>),
    /// A read failed part-way: which bytes were handed out is unknown.
    Lost,
}

impl Hash {
    fn update(&mut self, bytes: &[u8]) {
        if let Hash::On(hasher) = self {
            hasher.update(bytes);
        }
    }

    /// The running hasher, when hashing.
    fn hasher(&mut self) -> Option<&mut Xxh3> {
        match self {
            Hash::On(hasher) => Some(hasher),
            Hash::Off | Hash::Lost => None,
        }
    }

    /// Passes a read's outcome through; a failed read loses the hash.
    fn after<T, E>(&mut self, result: std::result::Result<T, E>) -> std::result::Result<T, E> {
        if result.is_err() && matches!(self, Hash::On(_)) {
            *self = Hash::Lost;
        }
        result
    }
}

/// Reads within the declared payload: end of payload is end of file, which is what serde
/// decoders such as bincode expect.
impl Read for PayloadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let dst = buf.get_mut(..len).unwrap_or_default();
        let read = match &mut self.source {
            Source::Stream(inner) => inner.read(dst),
            Source::At { reader, .. } => reader.read(dst),
            Source::Memory { rest, .. } => {
                let n = dst.len().min(rest.len());
                let (head, tail) = rest.split_at(n);
                dst.get_mut(..n).unwrap_or_default().copy_from_slice(head);
                *rest = tail;
                Ok(n)
            }
        };
        let n = self.hash.after(read)?;
        self.hash.update(dst.get(..n).unwrap_or_default());
        self.remaining -= n as u64;
        Ok(n)
    }
}

impl std::fmt::Debug for PayloadReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadReader")
            .field("remaining", &self.remaining)
            .field("length_verified", &self.length_verified)
            .finish_non_exhaustive()
    }
}

impl<'a> PayloadReader<'a> {
    /// A reader over `inner` that will yield at most `len` bytes. `length_verified` says
    /// whether `len` was checked against the real size of the source (a file's length); if
    /// not, allocations are grown as data arrives instead of made up front.
    pub fn new(inner: &'a mut dyn Read, len: u64, length_verified: bool) -> Self {
        PayloadReader {
            source: Source::Stream(inner),
            remaining: len,
            length_verified,
            hash: Hash::Off,
            polynomials: None,
        }
    }

    /// A reader over a payload held in memory (its length is the slice's, so verified).
    /// [`PayloadReader::read_borrowed`] then returns sub-slices without copying.
    pub fn from_slice(bytes: &'a [u8]) -> Self {
        PayloadReader {
            source: Source::Memory {
                rest: bytes,
                whole: bytes,
            },
            remaining: bytes.len() as u64,
            length_verified: true,
            hash: Hash::Off,
            polynomials: None,
        }
    }

    /// A reader over the first `len` bytes of `file` (checked against its length by the
    /// caller), read as keycodec reads its own files: small reads through a buffer of
    /// `capacity` bytes, bulk reads ([`PayloadReader::read_checked`]) at explicit offsets from
    /// several threads, straight into the destination, or in order where the source says so
    /// (a [`FileSource`](crate::transport::FileSource) of a file out of the page cache). For
    /// backends' imports of headerless files: pass a `&File`, or a `&FileSource` of it.
    pub fn from_file(file: &'a dyn ReadAt, len: u64, capacity: usize) -> Self {
        PayloadReader::at(file, 0, len, capacity)
    }

    /// A reader over `len` bytes of `source` from `offset`, with a buffer of `capacity` bytes
    /// for small reads; `len` was checked against the source's length.
    pub(crate) fn at(source: &'a dyn ReadAt, offset: u64, len: u64, capacity: usize) -> Self {
        PayloadReader {
            source: Source::At {
                reader: AtSource::new(source, offset, capacity),
                origin: offset,
                len,
            },
            remaining: len,
            length_verified: true,
            hash: Hash::Off,
            polynomials: None,
        }
    }

    /// Narrows the reader to the next `len` bytes (the payload after a header just read),
    /// whose length was checked against the source's when `verified`, and starts hashing
    /// what it hands out from here when `hash` is set.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if fewer than `len` bytes remain.
    pub(crate) fn narrow(mut self, len: u64, verified: bool, hash: bool) -> Result<Self> {
        if len > self.remaining {
            return Err(Error::Truncated { context: "payload" });
        }
        self.remaining = len;
        self.length_verified = verified;
        match &mut self.source {
            Source::Memory { rest, whole } => {
                // The whole payload, for hashing it afresh; nothing else follows it.
                let all: &'a [u8] = rest;
                let usable = usize::try_from(len).unwrap_or(usize::MAX);
                *rest = all.get(..usable).unwrap_or(all);
                *whole = rest;
            }
            Source::At {
                reader,
                origin,
                len: payload_len,
            } => {
                *origin = reader.position();
                *payload_len = len;
            }
            Source::Stream(_) => {}
        }
        self.hash = if hash {
            Hash::On(Box::new(Xxh3::new()))
        } else {
            Hash::Off
        };
        Ok(self)
    }

    /// Whether the payload's declared length was checked against the source's real length
    /// (a file, a slice): then every declared count the payload holds is backed by bytes
    /// present. From a stream it is not: bytes are only known to exist once read.
    pub fn length_verified(&self) -> bool {
        self.length_verified
    }

    /// Bytes of the payload not yet read.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Fails unless at least `bytes` bytes remain: call it with a declared count's byte size
    /// before allocating for it.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] naming `what`.
    pub fn ensure_available(&self, bytes: u128, what: &'static str) -> Result<()> {
        if bytes > u128::from(self.remaining) {
            return Err(Error::LimitExceeded {
                what,
                requested: u64::try_from(bytes).unwrap_or(u64::MAX),
                limit: self.remaining,
            });
        }
        Ok(())
    }

    /// How many of `count` elements to reserve up front: all of them when the payload length
    /// is verified (the caller has already checked `count` with
    /// [`PayloadReader::ensure_available`]), a bounded number otherwise.
    pub fn prealloc(&self, count: usize) -> usize {
        if self.length_verified {
            count
        } else {
            count.min(UNVERIFIED_PREALLOC_ELEMENTS)
        }
    }

    /// Fills `buf` from the payload.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if the payload (or the source) ends first, [`Error::Io`] on
    /// other I/O failures.
    pub fn read_exact(&mut self, buf: &mut [u8], context: &'static str) -> Result<()> {
        let len = buf.len() as u64;
        if len > self.remaining {
            return Err(Error::Truncated { context });
        }
        let read = match &mut self.source {
            Source::Stream(inner) => inner.read_exact(buf),
            Source::At { reader, .. } => reader.read_exact(buf),
            Source::Memory { rest, .. } => match rest.split_at_checked(buf.len()) {
                Some((head, tail)) => {
                    buf.copy_from_slice(head);
                    *rest = tail;
                    Ok(())
                }
                None => Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            },
        };
        self.handed_out(read, buf, context)
    }

    /// Accounts for `bytes`, just read into by `read` (the running hash, the bytes left), or
    /// reports the read's failure.
    fn handed_out(
        &mut self,
        read: io::Result<()>,
        bytes: &[u8],
        context: &'static str,
    ) -> Result<()> {
        self.hash
            .after(read)
            .map_err(|err| Error::from_read(err, context))?;
        self.hash.update(bytes);
        self.remaining -= bytes.len() as u64;
        Ok(())
    }

    /// Takes the next `len` bytes: borrowed without copying when the payload is in memory;
    /// from a source of checked length, read into a new vector, at once when it is
    /// 1 MiB or more; otherwise read into a vector that grows with the bytes
    /// actually read (a forged length on a stream allocates no more than the stream
    /// delivers).
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if fewer than `len` bytes remain, and those of
    /// [`PayloadReader::read_exact`].
    pub fn read_borrowed(&mut self, len: usize, context: &'static str) -> Result<Cow<'a, [u8]>> {
        if len as u64 > self.remaining {
            return Err(Error::Truncated { context });
        }
        if let Source::Memory { rest, .. } = &mut self.source {
            let all: &'a [u8] = rest;
            let (head, tail) = all
                .split_at_checked(len)
                .ok_or(Error::Truncated { context })?;
            *rest = tail;
            self.hash.update(head);
            self.remaining -= len as u64;
            return Ok(Cow::Borrowed(head));
        }
        if let (Source::At { reader, .. }, true) =
            (&mut self.source, self.length_verified && len >= DIRECT_READ)
        {
            // The source's length was checked: the bytes are there. One read for them all,
            // which an object source fetches in ranges at once, rather than in order through
            // the reader's buffer.
            // The length may be a server's claim for an object: an error, not an abort, when
            // it cannot be had.
            let mut owned = crate::memory::zeroed_bytes(len, context)?;
            let read = reader.read_exact_direct(&mut owned);
            self.handed_out(read, &owned, context)?;
            return Ok(Cow::Owned(owned));
        }
        let mut owned = Vec::with_capacity(len.min(UNVERIFIED_PREALLOC_BYTES));
        (&mut *self)
            .take(len as u64)
            .read_to_end(&mut owned)
            .map_err(|err| Error::from_read(err, context))?;
        if owned.len() < len {
            return Err(Error::Truncated { context });
        }
        Ok(Cow::Owned(owned))
    }

    /// Reads a fixed-size array.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`].
    pub fn read_array<const N: usize>(&mut self, context: &'static str) -> Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.read_exact(&mut buf, context)?;
        Ok(buf)
    }

    /// Reads one byte.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`].
    pub fn read_u8(&mut self, context: &'static str) -> Result<u8> {
        let [byte] = self.read_array::<1>(context)?;
        Ok(byte)
    }

    /// Reads a boolean stored as one byte, 0 or 1.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`], plus [`Error::Malformed`] for any other byte.
    pub fn read_flag(&mut self, context: &'static str) -> Result<bool> {
        match self.read_u8(context)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(Error::Malformed(format!(
                "{context} is {other}, expected 0 or 1"
            ))),
        }
    }

    /// Reads a little-endian `u32`.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`].
    pub fn read_u32_le(&mut self, context: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.read_array(context)?))
    }

    /// Reads a big-endian `u32`.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`].
    pub fn read_u32_be(&mut self, context: &'static str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.read_array(context)?))
    }

    /// Takes the rest of the payload, as [`PayloadReader::read_borrowed`] does: borrowed
    /// when the payload is in memory, read into a vector that grows with the bytes actually
    /// read otherwise (for formats that parse a whole section from memory).
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] if the rest does not fit this platform's address space, and
    /// those of [`PayloadReader::read_borrowed`].
    pub fn read_rest(&mut self, context: &'static str) -> Result<Cow<'a, [u8]>> {
        let len = usize::try_from(self.remaining).map_err(|_| Error::LimitExceeded {
            what: "payload length for this platform",
            requested: self.remaining,
            limit: usize::MAX as u64,
        })?;
        self.read_borrowed(len, context)
    }
}

#[cfg(test)]
mod tests;
