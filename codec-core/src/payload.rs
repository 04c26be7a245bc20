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
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::bulk::{self, Hooks, Span, SpanData, Workers};
use crate::error::{Error, Result};
use halo2curves::bn256::{Fr, G1Affine};

use crate::field::{
    check_raw_elements, decode_fr_chunk, decode_g1, encode_fr_chunk, FieldEncoding, CHUNK_ELEMENTS,
    FR_BYTES, G1_RAW_BYTES,
};
use crate::options::Validation;
use crate::poly_hash::PolyHasher;
use crate::source::{hash_range, AtSource, Memory, ReadAt, BULK_STEP};

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
    /// several threads, straight into the destination. For backends' imports of headerless
    /// files.
    pub fn from_file(file: &'a std::fs::File, len: u64, capacity: usize) -> Self {
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

    /// The `len` bytes that follow the payload (a container's record section), read outside
    /// the payload's length and hash: from a stream, its next bytes (the payload must have
    /// been read whole; memory grows with the bytes that arrive, not with `len`); from a
    /// positioned source, the bytes after the payload's `end`; from memory, those of the
    /// container's bytes given. The caller has checked that a source of known length holds
    /// them.
    pub(crate) fn read_after(
        &mut self,
        len: u64,
        memory: Option<&[u8]>,
        end: u64,
    ) -> Result<Vec<u8>> {
        let eof = || io::Error::from(io::ErrorKind::UnexpectedEof);
        let read = match (&mut self.source, memory) {
            (_, Some(bytes)) => usize::try_from(end)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(start, len)| bytes.get(start..start.checked_add(len)?))
                .map(<[u8]>::to_vec)
                .ok_or_else(eof),
            (Source::Stream(inner), None) => {
                let mut bytes = Vec::new();
                inner.take(len).read_to_end(&mut bytes).and_then(|n| {
                    if n as u64 == len {
                        Ok(bytes)
                    } else {
                        Err(eof())
                    }
                })
            }
            (Source::At { reader, .. }, None) => {
                let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
                reader
                    .source()
                    .read_exact_at(&mut bytes, end)
                    .map(|()| bytes)
            }
            (Source::Memory { .. }, None) => Err(eof()),
        };
        read.map_err(|err| Error::from_read(err, "the circuit's record"))
    }

    /// From now on, hashes every polynomial read with [`PayloadReader::read_polynomial`] (or
    /// [`read_polynomial`](crate::backend_api::field::read_polynomial)), for the key's digest.
    pub(crate) fn record_polynomials(&mut self) {
        self.polynomials = Some(Vec::new());
    }

    /// The hashes of the polynomials read since [`PayloadReader::record_polynomials`], in
    /// order.
    pub(crate) fn recorded_polynomials(&mut self) -> Option<Vec<[u8; 32]>> {
        self.polynomials.take()
    }

    /// A hasher for the next polynomial, `len` bytes of raw elements, when recording.
    pub(crate) fn polynomial_hasher(&self, len: usize) -> Option<PolyHasher> {
        self.polynomials.as_ref().map(|_| PolyHasher::new(len))
    }

    /// Records the hash of the next polynomial.
    ///
    /// # Errors
    ///
    /// Those of [`PolyHasher::finish`].
    pub(crate) fn record_polynomial(&mut self, hasher: Option<PolyHasher>) -> Result<()> {
        if let (Some(hasher), Some(polynomials)) = (hasher, &mut self.polynomials) {
            polynomials.push(hasher.finish()?);
        }
        Ok(())
    }

    /// The XXH3-64 of every byte handed out, when hashing and every byte of the payload has
    /// been handed out; `None` otherwise.
    pub(crate) fn digest(&self) -> Option<u64> {
        match &self.hash {
            Hash::On(hasher) if self.remaining == 0 => Some(hasher.digest()),
            _ => None,
        }
    }

    /// The XXH3-64 of the whole payload, for telling corruption from other errors after a
    /// decode failed: hashed afresh from the source where it can be read again (memory, a
    /// positioned source), otherwise by handing out and hashing what is left. `None` if the
    /// bytes cannot be read.
    pub(crate) fn digest_afresh(&mut self) -> Option<u64> {
        match &self.source {
            Source::Memory { whole, .. } => return Some(xxh3_64(whole)),
            Source::At {
                reader,
                origin,
                len,
            } => {
                return hash_range(reader.source(), *origin, *len);
            }
            Source::Stream(_) => {}
        }
        io::copy(self, &mut io::sink()).ok()?;
        self.digest()
    }

    /// Whether the payload's declared length was checked against the source's real length
    /// (a file, a slice): then every declared count the payload holds is backed by bytes
    /// present. From a stream it is not: bytes are only known to exist once read.
    pub fn length_verified(&self) -> bool {
        self.length_verified
    }

    /// Reads what is left of the payload without handing it out (hashing it when hashing),
    /// then returns the digest of the whole payload, as [`PayloadReader::digest`]; `None` if
    /// the rest cannot be read.
    pub(crate) fn digest_afresh_from_here(&mut self) -> Option<u64> {
        io::copy(self, &mut io::sink()).ok()?;
        self.digest()
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

    /// Fills `buf` from the payload and runs `check` on every piece of it, pieces of
    /// 4 MiB (the last may be shorter) starting at multiples of it, each checked right after
    /// it was read, while it is in cache. Pieces are read and checked in parallel where the
    /// source allows: a positioned source (a file) is read at explicit offsets by several
    /// threads at once (which also spreads the cost of faulting in fresh destination memory
    /// over the cores); a stream is read in order and each piece checked in parallel parts.
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
        if let Source::At { reader, .. } = &mut self.source {
            self.hash
                .after(reader.read_parallel(buf, &check, context))?;
            self.hash.update(buf);
            self.remaining -= len;
            return Ok(());
        }
        for piece in buf.chunks_mut(BULK_STEP) {
            self.read_exact(piece, context)?;
            piece.par_chunks(BULK_STEP / 64).try_for_each(&check)?;
        }
        Ok(())
    }

    /// Reads one polynomial of the key, in its elements' raw encoding (Montgomery limbs, 32
    /// bytes each), into `buf`, as [`PayloadReader::read_checked`] does. Call it for the key's
    /// polynomials, in halo2's order, and for nothing else: when the key's digest is being
    /// computed, each piece is hashed here while in cache, and the polynomial's hash becomes
    /// the next in the digest.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_checked`].
    pub fn read_polynomial(
        &mut self,
        buf: &mut [u8],
        check: impl Fn(&[u8]) -> Result<()> + Sync,
        context: &'static str,
    ) -> Result<()> {
        let hasher = self.polynomial_hasher(buf.len());
        let base = buf.as_ptr() as usize;
        self.read_checked(
            buf,
            |piece| {
                check(piece)?;
                if let Some(hasher) = &hasher {
                    hasher.add(piece.as_ptr() as usize - base, piece);
                }
                Ok(())
            },
            context,
        )?;
        self.record_polynomial(hasher)
    }

    /// Reads a run of spans, in payload order: the small fields a decoder checks itself
    /// ([`Span::Bytes`], each handed to `check_bytes` with its index among `spans` as soon
    /// as read, before any polynomial is read) and the key's polynomials
    /// ([`Span::Polynomial`], raw elements, in halo2's order, checked below the modulus
    /// unless `validation` trusts them, and hashed for the key's digest when it is
    /// computed), as the decoder expects them laid out for its circuit.
    ///
    /// From a file, an object or memory (a source whose length is verified) every
    /// polynomial is read straight into its own new vector, never zeroed first, in pieces
    /// spread over the cores, while this thread hashes the pieces in payload order as they
    /// land. From a stream, span after span, each vector growing with the bytes that arrive
    /// (as [`read_polynomial`](crate::backend_api::field::read_polynomial) does).
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] when the payload is shorter than the spans,
    /// [`Error::OutOfMemory`], [`Error::Truncated`], [`Error::InvalidFieldElement`], and
    /// `check_bytes`'s errors.
    pub fn read_spans(
        &mut self,
        spans: &[Span],
        groups: &[usize],
        validation: Validation,
        mut check_bytes: impl FnMut(usize, &[u8]) -> Result<()>,
        context: &'static str,
    ) -> Result<SpanData> {
        let total: u128 = spans.iter().map(Span::len).sum();
        self.ensure_available(total, context)?;
        let total = u64::try_from(total).map_err(|_| Error::Truncated { context })?;
        let bulk = self.length_verified && crate::memory::layout_matches();
        let check = |piece: &[u8]| check_raw_elements(piece, validation, context);
        let record = self.polynomials.is_some();
        let read = match (&mut self.source, bulk) {
            (Source::At { reader, .. }, true) => {
                let start = reader.position();
                let source = reader.source();
                let coalesce = source.costly_requests();
                let workers = match source.bulk_plan() {
                    Some((piece, pool)) => Workers {
                        pool: Some(pool),
                        piece,
                        coalesce,
                    },
                    None => Workers {
                        pool: None,
                        piece: BULK_STEP,
                        coalesce,
                    },
                };
                let read = bulk::read_spans(
                    source,
                    start,
                    spans,
                    groups,
                    &mut check_bytes,
                    Hooks {
                        hash: self.hash.hasher(),
                        check: &check,
                        record,
                        context,
                    },
                    &workers,
                );
                if read.is_ok() {
                    reader.advance_to(start + total);
                }
                read
            }
            (Source::Memory { rest, .. }, true) => {
                let source = Memory(rest);
                let workers = Workers {
                    pool: None,
                    piece: BULK_STEP,
                    coalesce: false,
                };
                let read = bulk::read_spans(
                    &source,
                    0,
                    spans,
                    groups,
                    &mut check_bytes,
                    Hooks {
                        hash: self.hash.hasher(),
                        check: &check,
                        record,
                        context,
                    },
                    &workers,
                );
                if read.is_ok() {
                    let all: &'a [u8] = rest;
                    *rest = all
                        .get(usize::try_from(total).unwrap_or(usize::MAX)..)
                        .unwrap_or_default();
                }
                read
            }
            _ => return self.read_spans_in_order(spans, groups, validation, check_bytes, context),
        };
        let (data, recorded) = self.hash.after(read)?;
        self.remaining -= total;
        if let (Some(recorded), Some(polynomials)) = (recorded, &mut self.polynomials) {
            polynomials.extend(recorded);
        }
        Ok(data)
    }

    /// [`PayloadReader::read_spans`] span after span, in order.
    fn read_spans_in_order(
        &mut self,
        spans: &[Span],
        groups: &[usize],
        validation: Validation,
        mut check_bytes: impl FnMut(usize, &[u8]) -> Result<()>,
        context: &'static str,
    ) -> Result<SpanData> {
        let mut data = SpanData::default();
        let mut polynomials = Vec::new();
        for (index, span) in spans.iter().enumerate() {
            match *span {
                Span::Bytes(len) => {
                    let start = data.bytes.len();
                    data.bytes.resize(start + len, 0);
                    let bytes = data.bytes.get_mut(start..).unwrap_or_default();
                    self.read_exact(bytes, context)?;
                    check_bytes(index, bytes)?;
                }
                Span::Polynomial { count, spare } => {
                    let mut values =
                        read_polynomial(self, count, FieldEncoding::Raw, validation, context)?;
                    values
                        .try_reserve_exact(spare)
                        .map_err(|_| Error::OutOfMemory {
                            what: context,
                            bytes: ((count + spare) as u64).saturating_mul(FR_BYTES as u64),
                        })?;
                    polynomials.push(values);
                }
            }
        }
        let mut polynomials = polynomials.into_iter();
        data.groups = groups
            .iter()
            .map(|&members| polynomials.by_ref().take(members).collect())
            .collect();
        if polynomials.next().is_some()
            || data.groups.iter().map(Vec::len).ne(groups.iter().copied())
        {
            return Err(Error::Internal(
                "bulk read groups do not cover its polynomials".into(),
            ));
        }
        Ok(data)
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

// Field elements and points read through the reader: the one way backends read
// polynomials ([`read_polynomial`]) and every other vector of elements.

/// Reads one point from the payload.
///
/// # Errors
///
/// [`Error::Truncated`] or [`Error::InvalidPoint`].
pub(crate) fn read_g1(
    reader: &mut PayloadReader<'_>,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<G1Affine> {
    let mut buf = [0u8; G1_RAW_BYTES];
    let bytes = buf
        .get_mut(..encoding.point_bytes())
        .ok_or(Error::InvalidPoint { context })?;
    reader.read_exact(bytes, context)?;
    decode_g1(bytes, encoding, validation, context)
}

/// Reads `count` points, after checking the payload can hold them.
///
/// # Errors
///
/// [`Error::LimitExceeded`], [`Error::Truncated`] or [`Error::InvalidPoint`].
pub(crate) fn read_g1_vec(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Vec<G1Affine>> {
    reader.ensure_available(count as u128 * encoding.point_bytes() as u128, context)?;
    (0..count)
        .map(|_| read_g1(reader, encoding, validation, context))
        .collect()
}

/// Reads `count` field elements, after checking the payload can hold them.
///
/// Raw elements (on targets where `Fr`'s memory is its raw encoding, see
/// [`raw_view`](crate::backend_api::raw_view)) are read straight into the vector's memory with
/// [`PayloadReader::read_checked`], each piece checked below the modulus while in cache
/// (unless trusted): no staging buffer, no per-element conversion, and from a file several
/// threads at once. Otherwise data is read in 2 MiB steps and converted in parallel by
/// [`decode_fr_chunk`].
///
/// # Errors
///
/// [`Error::LimitExceeded`] if the payload cannot hold `count` elements, [`Error::Truncated`],
/// or [`Error::InvalidFieldElement`].
pub fn read_fr_vec(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Vec<Fr>> {
    read_elements(reader, count, encoding, validation, context, false)
}

/// Reads one polynomial of the key, `count` elements, as [`read_fr_vec`] does, and, when the
/// key's digest is being computed, hashes it while reading
/// ([`PayloadReader::read_polynomial`]). Read the key's polynomials with it, in halo2's order,
/// and nothing else.
///
/// # Errors
///
/// As [`read_fr_vec`].
pub fn read_polynomial(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Vec<Fr>> {
    read_elements(reader, count, encoding, validation, context, true)
}

fn read_elements(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
    polynomial: bool,
) -> Result<Vec<Fr>> {
    reader.ensure_available(count as u128 * FR_BYTES as u128, context)?;
    if encoding == FieldEncoding::Raw && reader.prealloc(count) == count {
        if let Some(mut values) = crate::memory::zeroed(count)? {
            let bytes = crate::memory::as_raw_bytes_mut(&mut values)
                .ok_or(Error::InvalidFieldElement { context })?;
            let check = |piece: &[u8]| check_raw_elements(piece, validation, context);
            if polynomial {
                reader.read_polynomial(bytes, check, context)?;
            } else {
                reader.read_checked(bytes, check, context)?;
            }
            return Ok(values);
        }
    }
    // Converted in steps; a polynomial's steps are hashed as they are converted.
    let hasher = polynomial
        .then(|| reader.polynomial_hasher(count * FR_BYTES))
        .flatten();
    let mut values = Vec::new();
    values
        .try_reserve_exact(reader.prealloc(count))
        .map_err(|_| Error::OutOfMemory {
            what: context,
            bytes: (reader.prealloc(count) as u64).saturating_mul(FR_BYTES as u64),
        })?;
    let mut staging = vec![0u8; count.min(CHUNK_ELEMENTS) * FR_BYTES];
    let mut encoded = Vec::new();
    let mut left = count;
    while left > 0 {
        let step = left.min(CHUNK_ELEMENTS);
        let bytes = staging
            .get_mut(..step * FR_BYTES)
            .ok_or(Error::Truncated { context })?;
        reader.read_exact(bytes, context)?;
        let start = values.len();
        decode_fr_chunk(bytes, encoding, validation, context, &mut values)?;
        if let Some(hasher) = &hasher {
            let new = values.get(start..).unwrap_or_default();
            match crate::memory::as_raw_bytes(new) {
                Some(raw) => hasher.add(start * FR_BYTES, raw),
                None => {
                    encode_fr_chunk(new, FieldEncoding::Raw, &mut encoded);
                    hasher.add(start * FR_BYTES, encoded.as_flattened());
                }
            }
        }
        left -= step;
    }
    if polynomial {
        reader.record_polynomial(hasher)?;
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 13 + i / 7) as u8).collect()
    }

    #[test]
    fn element_count_times_size_cannot_overflow() {
        let bytes = [0u8; 64];
        for count in [usize::MAX, usize::MAX / FR_BYTES + 1, 1 << 60] {
            let mut source = &bytes[..];
            let mut reader = PayloadReader::new(&mut source, bytes.len() as u64, true);
            let result = read_fr_vec(
                &mut reader,
                count,
                FieldEncoding::Raw,
                Validation::Checked,
                "test",
            );
            assert!(
                matches!(result, Err(Error::LimitExceeded { .. })),
                "{count}: {result:?}"
            );
        }
    }

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

    /// A large read handed out whole from a source read at offsets is one read of the
    /// source (an object source fetches it in ranges at once), not a read per buffer.
    #[test]
    fn a_large_borrowed_read_is_one_read_of_the_source() -> Result<()> {
        struct Counted<'a>(Memory<'a>, std::sync::atomic::AtomicUsize);
        impl ReadAt for Counted<'_> {
            fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
                self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.0.read_exact_at(buf, offset)
            }
            fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
                self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.0.read_at(buf, offset)
            }
        }
        let data = pattern(3 * DIRECT_READ);
        let source = Counted(Memory(&data), 0.into());
        let len = data.len() as u64;
        let mut reader = PayloadReader::at(&source, 0, len, 1 << 10).narrow(len, true, true)?;
        let small = reader.read_array::<10>("small")?;
        let reads = source.1.load(std::sync::atomic::Ordering::Relaxed);
        let whole = reader.read_borrowed(2 * DIRECT_READ, "whole")?;
        assert_eq!(
            source.1.load(std::sync::atomic::Ordering::Relaxed),
            reads + 1
        );
        assert_eq!(&small[..], &data[..10]);
        assert_eq!(&whole[..], &data[10..10 + 2 * DIRECT_READ]);
        Ok(())
    }

    /// Every source, read with every kind of read, hashes exactly the payload's bytes in
    /// order: the digest equals the XXH3 of the payload, and hashing it afresh agrees.
    #[test]
    fn every_source_hashes_exactly_what_it_hands_out() -> Result<()> {
        let header = 64usize;
        let data = pattern(header + 2 * BULK_STEP + 1000);
        let payload = &data[header..];
        let expected = xxh3_64(payload);
        let mut file = tempfile::tempfile().map_err(|e| Error::io("create", e))?;
        std::io::Write::write_all(&mut file, &data).map_err(|e| Error::io("write", e))?;
        let mut stream = data.as_slice();
        let readers: Vec<(&str, PayloadReader<'_>)> = vec![
            ("memory", PayloadReader::from_slice(&data)),
            (
                "stream",
                PayloadReader::new(&mut stream, data.len() as u64, false),
            ),
            (
                "file",
                PayloadReader::at(&file, 0, data.len() as u64, 1 << 10),
            ),
        ];
        for (name, mut reader) in readers {
            reader.read_array::<64>("header")?;
            let mut reader = reader.narrow(payload.len() as u64, true, true)?;
            let mut out = Vec::new();
            out.extend_from_slice(&reader.read_array::<3>("small")?);
            let mut bulk = vec![0u8; BULK_STEP + 5];
            reader.read_checked(&mut bulk, |_| Ok(()), "bulk")?;
            out.extend_from_slice(&bulk);
            out.extend_from_slice(&reader.read_borrowed(100, "borrowed")?);
            // Straight from the source, past the buffer, for sources read at offsets.
            out.extend_from_slice(&reader.read_borrowed(DIRECT_READ + 7, "borrowed whole")?);
            let mut tail = Vec::new();
            reader
                .read_to_end(&mut tail)
                .map_err(|e| Error::io("read", e))?;
            out.extend_from_slice(&tail);
            assert_eq!(out, payload, "{name}");
            assert_eq!(reader.digest(), Some(expected), "{name}");
            if name != "stream" {
                assert_eq!(reader.digest_afresh(), Some(expected), "{name}");
            }
        }
        Ok(())
    }

    /// A read that fails part-way loses the running hash: no digest is ever reported for
    /// bytes that were not all handed out.
    #[test]
    fn a_failed_read_loses_the_hash() -> Result<()> {
        let data = pattern(100);
        let mut short = &data[..50];
        let mut reader = PayloadReader::new(&mut short, 100, false).narrow(100, false, true)?;
        let mut buf = [0u8; 80];
        assert!(matches!(
            reader.read_exact(&mut buf, "too much"),
            Err(Error::Truncated { .. })
        ));
        assert_eq!(reader.digest(), None);
        assert_eq!(reader.digest_afresh(), None);
        Ok(())
    }
}
