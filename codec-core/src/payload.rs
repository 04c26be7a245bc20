//! A reader bounded by the payload length the header declares.
//!
//! Decoders read through [`PayloadReader`], never from the raw source: a read past the
//! declared length is [`Error::Truncated`], and [`PayloadReader::ensure_available`] lets a
//! decoder check a declared count against the bytes left *before* it allocates.

use std::borrow::Cow;
use std::io::{self, Read};

use rayon::prelude::*;

use crate::error::{Error, Result};

#[cfg(unix)]
mod file_source;
#[cfg(unix)]
pub(crate) use file_source::FileSource;

/// Consumed bytes of a memory-mapped payload are handed back to the kernel in steps of this
/// size, so that a mapped load never keeps more than this much of the file resident beside
/// the decoded key.
pub const RELEASE_STEP: usize = 64 << 20;

/// Tells the owner of a memory mapping that `len` bytes at `offset` (relative to the slice
/// given to [`PayloadReader::from_mapped`]) will not be read again.
pub type Release<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Elements pre-allocated at once when the payload length is only declared, not verified
/// against a real file length (32 MiB of field elements).
const UNVERIFIED_PREALLOC_ELEMENTS: usize = 1 << 20;

/// Bytes pre-allocated at once for a borrowed read from a stream.
const UNVERIFIED_PREALLOC_BYTES: usize = 32 << 20;

/// Bytes a bulk read ([`PayloadReader::read_checked`]) reads and checks as one piece: few
/// system calls, and small enough that the check finds the bytes still in cache.
pub(crate) const BULK_STEP: usize = 4 << 20;

/// Reads a payload of known declared length.
pub struct PayloadReader<'a> {
    source: Source<'a>,
    remaining: u64,
    length_verified: bool,
}

/// Where the payload comes from: a stream, or memory (a slice or a memory-mapped file) that
/// can be borrowed without copying.
enum Source<'a> {
    Stream(&'a mut dyn Read),
    Memory(Memory<'a>),
    #[cfg(unix)]
    File(FileSource<'a>),
}

/// A payload in memory, and how much of it has been read and released.
struct Memory<'a> {
    rest: &'a [u8],
    consumed: usize,
    released: usize,
    release: Option<Release<'a>>,
}

impl<'a> Memory<'a> {
    /// Takes `len` bytes off the front, first releasing what earlier reads consumed once it
    /// adds up to [`RELEASE_STEP`]. (Slices returned by earlier reads stay valid: releasing
    /// a read-only file mapping only means the next access reads the file again.)
    fn take(&mut self, len: usize, context: &'static str) -> Result<&'a [u8]> {
        if let Some(release) = self.release {
            if self.consumed - self.released >= RELEASE_STEP {
                release(self.released, self.consumed - self.released);
                self.released = self.consumed;
            }
        }
        let rest: &'a [u8] = self.rest;
        let (head, tail) = rest
            .split_at_checked(len)
            .ok_or(Error::Truncated { context })?;
        self.rest = tail;
        self.consumed += len;
        Ok(head)
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
        let n = match &mut self.source {
            Source::Stream(inner) => inner.read(dst)?,
            #[cfg(unix)]
            Source::File(file) => file.read(dst)?,
            Source::Memory(memory) => {
                let n = dst.len().min(memory.rest.len());
                let head = memory
                    .take(n, "payload")
                    .map_err(|err| io::Error::new(io::ErrorKind::UnexpectedEof, err))?;
                dst.get_mut(..n).unwrap_or_default().copy_from_slice(head);
                n
            }
        };
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
    /// whether `len` was checked against the real size of the source (a file's or a slice's
    /// length); if not, allocations are grown as data arrives instead of made up front.
    pub fn new(inner: &'a mut dyn Read, len: u64, length_verified: bool) -> Self {
        PayloadReader {
            source: Source::Stream(inner),
            remaining: len,
            length_verified,
        }
    }

    /// A reader over a payload held in memory (its length is the slice's, so verified).
    /// [`PayloadReader::read_borrowed`] then returns sub-slices without copying.
    pub fn from_slice(bytes: &'a [u8]) -> Self {
        PayloadReader::in_memory(bytes, None)
    }

    /// A reader over a memory-mapped payload: as reading advances, consumed bytes are passed
    /// to `release` (offsets relative to `bytes`) in steps of [`RELEASE_STEP`].
    pub fn from_mapped(bytes: &'a [u8], release: Release<'a>) -> Self {
        PayloadReader::in_memory(bytes, Some(release))
    }

    /// A reader over the `len` payload bytes of a file read at explicit offsets (see
    /// [`FileSource`]); `len` was checked against the file's length.
    #[cfg(unix)]
    pub(crate) fn from_file(source: FileSource<'a>, len: u64) -> Self {
        PayloadReader {
            source: Source::File(source),
            remaining: len,
            length_verified: true,
        }
    }

    /// For a payload read from a file with hashing on: reads what is left of the payload
    /// and returns the XXH3-64 of all of it; `None` otherwise, or if the rest cannot be read.
    pub(crate) fn drain_and_digest(&mut self) -> Option<u64> {
        #[cfg(unix)]
        if let Source::File(_) = self.source {
            io::copy(self, &mut io::sink()).ok()?;
            if let Source::File(file) = &self.source {
                return (self.remaining == 0).then(|| file.digest()).flatten();
            }
        }
        None
    }

    fn in_memory(bytes: &'a [u8], release: Option<Release<'a>>) -> Self {
        PayloadReader {
            source: Source::Memory(Memory {
                rest: bytes,
                consumed: 0,
                released: 0,
                release,
            }),
            remaining: bytes.len() as u64,
            length_verified: true,
        }
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
        match &mut self.source {
            Source::Stream(inner) => inner
                .read_exact(buf)
                .map_err(|err| Error::from_read(err, context))?,
            #[cfg(unix)]
            Source::File(file) => file
                .read_exact(buf)
                .map_err(|err| Error::from_read(err, context))?,
            Source::Memory(memory) => buf.copy_from_slice(memory.take(buf.len(), context)?),
        }
        self.remaining -= len;
        Ok(())
    }

    /// Fills `buf` from the payload and runs `check` on every piece of it, pieces of
    /// 4 MiB (`BULK_STEP`; the last may be shorter) starting at multiples of it, each checked
    /// right after it was read, while it is in cache. Pieces are read and checked in parallel
    /// where the source allows: a file is read at explicit offsets by several threads at once
    /// (which also spreads the cost of faulting in fresh destination memory over the cores);
    /// a stream is read in order and each piece checked in parallel parts.
    ///
    /// `check` must accept any piece length that is a multiple of its element size when
    /// `buf`'s length is.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`], or the first error `check` returned.
    pub fn read_checked(
        &mut self,
        buf: &mut [u8],
        check: impl Fn(&[u8]) -> Result<()> + Sync,
        context: &'static str,
    ) -> Result<()> {
        let len = buf.len() as u64;
        if len > self.remaining {
            return Err(Error::Truncated { context });
        }
        match &mut self.source {
            #[cfg(unix)]
            Source::File(file) => {
                file.read_parallel(buf, &check, context)?;
                self.remaining -= len;
            }
            _ => {
                for piece in buf.chunks_mut(BULK_STEP) {
                    self.read_exact(piece, context)?;
                    piece.par_chunks(BULK_STEP / 64).try_for_each(&check)?;
                }
            }
        }
        Ok(())
    }

    /// Takes the next `len` bytes: borrowed without copying when the payload is in memory,
    /// read into a new vector otherwise. The caller must check `len` against
    /// [`PayloadReader::ensure_available`] semantics; this method refuses reads past the end.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`].
    pub fn read_borrowed(&mut self, len: usize, context: &'static str) -> Result<Cow<'a, [u8]>> {
        self.ensure_available(len as u128, context)
            .map_err(|_| Error::Truncated { context })?;
        match &mut self.source {
            Source::Memory(memory) => {
                let head = memory.take(len, context)?;
                self.remaining -= len as u64;
                Ok(Cow::Borrowed(head))
            }
            _ => {
                // Grow with the data actually read: a forged length on a stream must not
                // allocate more than the stream delivers.
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
        }
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

    /// Reads `count` bit vectors of `len` bits each, stored 8 per byte, least significant bit
    /// first (how halo2 packs selector activations), after checking the payload holds them.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] or [`Error::Truncated`].
    pub fn read_packed_bits(
        &mut self,
        count: usize,
        len: usize,
        context: &'static str,
    ) -> Result<Vec<Vec<bool>>> {
        let per_vector = len.div_ceil(8);
        self.ensure_available(count as u128 * per_vector as u128, context)?;
        let mut packed = vec![0u8; if count == 0 { 0 } else { per_vector }];
        let mut vectors = Vec::with_capacity(count);
        for _ in 0..count {
            self.read_exact(&mut packed, context)?;
            vectors.push(crate::circuit::unpack_bits(&packed, len));
        }
        Ok(vectors)
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
mod tests {
    use super::*;

    #[test]
    fn the_rest_is_borrowed_from_memory_and_read_from_a_stream() -> Result<()> {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut memory = PayloadReader::from_slice(&bytes);
        memory.read_u8("first byte")?;
        let rest = memory.read_rest("rest")?;
        assert!(matches!(rest, Cow::Borrowed(_)));
        assert_eq!(&*rest, bytes.get(1..).unwrap_or_default());
        assert_eq!(memory.remaining(), 0);

        let mut source = bytes.as_slice();
        let mut stream = PayloadReader::new(&mut source, bytes.len() as u64, false);
        stream.read_u8("first byte")?;
        let rest = stream.read_rest("rest")?;
        assert!(matches!(rest, Cow::Owned(_)));
        assert_eq!(&*rest, bytes.get(1..).unwrap_or_default());

        // A stream shorter than its declared length is truncated, not a short slice.
        let mut short = bytes.get(..100).unwrap_or_default();
        let mut stream = PayloadReader::new(&mut short, 200, false);
        assert!(matches!(
            stream.read_rest("rest"),
            Err(Error::Truncated { .. })
        ));
        Ok(())
    }
}
