//! Bulk reads: a run of spans (a key's polynomials and the small fields between them) read
//! at once from a source at explicit offsets, each polynomial straight into the spare
//! capacity of its own new vector, in pieces taken in payload order by every core, while the
//! calling thread hashes the pieces in payload order as they land.
//!
//! Why at once rather than polynomial by polynomial: a halo2-lib key at k = 14 has about 150
//! polynomials of 512 KiB, each smaller than one piece, so read one at a time every read is
//! single-threaded and the stream hash of the payload (XXH3, in order) waits for it. Read as
//! one run, every core reads, the hashing thread trails the readers by a piece or two and
//! finds each piece still in cache, and the destination is never zeroed before it is read
//! into (a zeroing pass costs as much as the copy when the allocator hands back memory a
//! previous key freed).
//!
//! The small spans (length prefixes, section frames) are read first and handed to the
//! decoder's check before any polynomial is read, so a count or length that disagrees with
//! the circuit is reported as such, as in an element-by-element read.

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

use halo2curves::bn256::Fr;
use xxhash_rust::xxh3::Xxh3;

use crate::error::{Error, Result};
use crate::field::FR_BYTES;
use crate::poly_hash::PolyHasher;
use crate::source::ReadAt;

/// One span of a bulk read ([`PayloadReader::read_spans`](crate::backend_api::PayloadReader::read_spans)),
/// in payload order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// `len` bytes the decoder checks itself (a length prefix, a section frame), handed to
    /// its check as soon as they are read, before any polynomial is read.
    Bytes(usize),
    /// One of the key's polynomials, in halo2's order: `count` raw elements (32 bytes each,
    /// Montgomery limbs) read into a new vector that has room for `spare` elements more,
    /// checked below the modulus unless trusted, and hashed into the key's digest when it is
    /// computed.
    Polynomial {
        /// Elements read.
        count: usize,
        /// Further elements the vector has room for (none moved in).
        spare: usize,
    },
}

impl Span {
    /// The span's length in the payload.
    pub fn len(&self) -> u128 {
        match *self {
            Span::Bytes(len) => len as u128,
            Span::Polynomial { count, .. } => count as u128 * FR_BYTES as u128,
        }
    }

    /// Whether the span holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a bulk read read.
#[derive(Debug, Default)]
pub struct SpanData {
    /// The bytes of every [`Span::Bytes`], concatenated in payload order.
    pub bytes: Vec<u8>,
    /// The vector of every [`Span::Polynomial`], in payload order, in the groups asked for.
    pub groups: Vec<Vec<Vec<Fr>>>,
}

/// What a bulk read does besides reading.
pub(crate) struct Hooks<'h> {
    /// The stream hash of the payload, updated with every byte in payload order.
    pub(crate) hash: Option<&'h mut Xxh3>,
    /// Checks each piece of a polynomial (values below the modulus), on the thread that read it.
    pub(crate) check: &'h (dyn Fn(&[u8]) -> Result<()> + Sync),
    /// Hash every polynomial for the key's digest (BLAKE3, piece by piece).
    pub(crate) record: bool,
    /// Errors name this.
    pub(crate) context: &'static str,
}

/// Where the pieces are read: the source's own pool and piece size, or rayon's global pool
/// and `piece` bytes.
pub(crate) struct Workers<'p> {
    pub(crate) pool: Option<&'p rayon::ThreadPool>,
    /// Largest piece, a power of two of at least 1 KiB.
    pub(crate) piece: usize,
}

/// A piece of a polynomial to read.
struct Piece<'s> {
    dst: &'s mut [MaybeUninit<u8>],
    /// Offset in the source.
    offset: u64,
    /// Which polynomial, and where in it.
    polynomial: usize,
    at: usize,
}

/// What the calling thread hashes, in payload order.
enum Item {
    Bytes(Range<usize>),
    Piece(usize),
}

/// Reads `spans`, laid out one after the other from `start` in `source` (which holds them:
/// the caller checked the length), the polynomials into `groups` (how many of them each
/// group takes, in order). `check_bytes` sees each [`Span::Bytes`] (its index among the
/// spans, its bytes) before any polynomial is read. Returns the data, and each
/// polynomial's digest hash when `hooks.record`.
///
/// # Errors
///
/// [`Error::OutOfMemory`] when a vector cannot be allocated, the source's errors
/// ([`Error::Truncated`] for a source shorter than declared), `check_bytes`'s and
/// `hooks.check`'s errors.
pub(crate) fn read_spans(
    source: &dyn ReadAt,
    start: u64,
    spans: &[Span],
    groups: &[usize],
    check_bytes: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    hooks: Hooks<'_>,
    workers: &Workers<'_>,
) -> Result<(SpanData, Option<Vec<[u8; 32]>>)> {
    let context = hooks.context;
    let truncated = || Error::Truncated { context };
    // Where each span starts, and the small spans' bytes, read and checked first.
    let mut offsets = Vec::with_capacity(spans.len());
    let mut at = start;
    for span in spans {
        offsets.push(at);
        let len = u64::try_from(span.len()).map_err(|_| truncated())?;
        at = at.checked_add(len).ok_or_else(truncated)?;
    }
    let small: usize = spans
        .iter()
        .map(|span| match span {
            Span::Bytes(len) => *len,
            Span::Polynomial { .. } => 0,
        })
        .sum();
    let mut bytes = vec![0u8; small];
    let mut items = Vec::new();
    let mut requests = Vec::new();
    let mut rest: &mut [u8] = &mut bytes;
    let mut filled = 0;
    for (index, (span, &offset)) in spans.iter().zip(&offsets).enumerate() {
        if let Span::Bytes(len) = *span {
            let (dst, tail) = std::mem::take(&mut rest)
                .split_at_mut_checked(len)
                .ok_or_else(truncated)?;
            rest = tail;
            requests.push((dst, offset));
            items.push((index, Item::Bytes(filled..filled + len)));
            filled += len;
        }
    }
    source
        .read_exact_many_at(&mut requests)
        .map_err(|err| Error::from_read(err, context))?;
    drop(requests);
    for (index, item) in &items {
        if let Item::Bytes(range) = item {
            check_bytes(*index, bytes.get(range.clone()).unwrap_or_default())?;
        }
    }

    // Every polynomial's vector, group by group (each group's vector holds its
    // polynomials' in the key).
    let sizes: Vec<(usize, usize)> = spans
        .iter()
        .filter_map(|span| match *span {
            Span::Polynomial { count, spare } => Some((count, spare)),
            Span::Bytes(_) => None,
        })
        .collect();
    if groups.iter().sum::<usize>() != sizes.len() {
        return Err(Error::Internal(
            "bulk read groups do not cover its polynomials".into(),
        ));
    }
    let mut grouped: Vec<Vec<Vec<Fr>>> = Vec::with_capacity(groups.len());
    let mut next = sizes.iter();
    for &members in groups {
        let mut group = Vec::with_capacity(members);
        for &(count, spare) in next.by_ref().take(members) {
            let mut values: Vec<Fr> = Vec::new();
            values
                .try_reserve_exact(count.saturating_add(spare))
                .map_err(|_| Error::OutOfMemory {
                    what: context,
                    bytes: (count.saturating_add(spare) as u64).saturating_mul(FR_BYTES as u64),
                })?;
            group.push(values);
        }
        grouped.push(group);
    }
    let hashers: Vec<Option<PolyHasher>> = spans
        .iter()
        .filter_map(|span| match *span {
            Span::Polynomial { count, .. } => {
                Some(hooks.record.then(|| PolyHasher::new(count * FR_BYTES)))
            }
            Span::Bytes(_) => None,
        })
        .collect();
    let step = workers.piece.max(FR_BYTES);
    let mut pieces = Vec::new();
    let polynomial_spans =
        spans
            .iter()
            .zip(&offsets)
            .enumerate()
            .filter_map(|(index, (span, offset))| match *span {
                Span::Polynomial { count, .. } => Some((index, count, *offset)),
                Span::Bytes(_) => None,
            });
    for ((index, count, offset), (polynomial, values)) in
        polynomial_spans.zip(grouped.iter_mut().flatten().enumerate())
    {
        let spare = values
            .spare_capacity_mut()
            .get_mut(..count)
            .ok_or_else(|| {
                Error::Internal("a polynomial's vector is smaller than its span".into())
            })?;
        let raw = crate::raw_view::uninit_bytes_mut(spare).ok_or_else(|| {
            Error::Internal("bulk reads need the raw layout of field elements".into())
        })?;
        for (number, dst) in raw.chunks_mut(step).enumerate() {
            items.push((index, Item::Piece(pieces.len())));
            pieces.push(Piece {
                dst,
                offset: offset + (number * step) as u64,
                polynomial,
                at: number * step,
            });
        }
    }
    items.sort_by_key(|(index, _)| *index);
    let items: Vec<Item> = items.into_iter().map(|(_, item)| item).collect();

    let record = hooks.record;
    run(source, pieces, &items, &bytes, &hashers, hooks, workers)?;

    // Every piece was read: each vector's first `count` elements are initialised.
    for (values, &(count, _)) in grouped.iter_mut().flatten().zip(&sizes) {
        {
            // SAFETY: `run` returned `Ok` only after every piece of `pieces` was filled by
            // `read_exact_uninit_at` (a failed piece fails the run), and the pieces of this
            // vector tile its first `count` elements' bytes (`chunks_mut` of exactly that
            // range). Any 32 bytes are a valid `Fr` (`uninit_bytes_mut` returned a view only
            // because `Fr`'s memory is its raw encoding, see `raw_view`).
            unsafe { crate::raw_view::set_len_after_fill(values, count) };
        }
    }
    let recorded = if record {
        Some(
            hashers
                .into_iter()
                .flatten()
                .map(PolyHasher::finish)
                .collect::<Result<Vec<_>>>()?,
        )
    } else {
        None
    };
    Ok((
        SpanData {
            bytes,
            groups: grouped,
        },
        recorded,
    ))
}

/// Reads every piece (on the pool's threads, in payload order, each checked and hashed for
/// the digest on its thread) while the calling thread hashes `items` in payload order.
fn run<'s>(
    source: &dyn ReadAt,
    pieces: Vec<Piece<'s>>,
    items: &[Item],
    bytes: &[u8],
    hashers: &[Option<PolyHasher>],
    hooks: Hooks<'_>,
    workers: &Workers<'_>,
) -> Result<()> {
    let Hooks {
        hash,
        check,
        context,
        ..
    } = hooks;
    let count = pieces.len();
    let shared = Shared {
        queue: Mutex::new(pieces.into_iter().enumerate()),
        done: (0..count).map(|_| OnceLock::new()).collect(),
        failure: Mutex::new(None),
        abort: AtomicBool::new(false),
        signal: Mutex::new(()),
        landed: Condvar::new(),
    };
    let work = || {
        while let Some((index, piece)) = shared.next() {
            let read = read_piece(source, piece, check, hashers, context);
            match read {
                Ok(bytes) => shared.land(index, bytes),
                Err(err) => shared.fail(err),
            }
        }
    };
    let threads = workers.pool.map_or_else(
        rayon::current_num_threads,
        rayon::ThreadPool::current_num_threads,
    );
    // A thread of the pool itself must not wait for the pool's work: it reads too, and
    // hashes once everything is read.
    let inside = match workers.pool {
        Some(pool) => pool.current_thread_index().is_some(),
        None => rayon::current_thread_index().is_some(),
    };
    let mut hash = hash;
    in_place_scope(workers.pool, |scope| {
        for _ in 0..threads {
            scope.spawn(|_| work());
        }
        match (&mut hash, inside) {
            (Some(hasher), false) => {
                hash_in_order(&shared, items, bytes, hasher);
            }
            _ => work(),
        }
    });
    if let Some(err) = shared.take_failure() {
        return Err(err);
    }
    if let (Some(hasher), true) = (hash, inside) {
        if !hash_in_order(&shared, items, bytes, hasher) {
            return Err(Error::Internal("a bulk read lost a piece".into()));
        }
    }
    Ok(())
}

/// Runs `op` in a scope of `pool` (rayon's global pool if `None`) whose spawned work runs on
/// the pool's threads while `op` runs on this one.
fn in_place_scope<'scope, R>(
    pool: Option<&rayon::ThreadPool>,
    op: impl FnOnce(&rayon::Scope<'scope>) -> R,
) -> R {
    match pool {
        Some(pool) => pool.in_place_scope(op),
        None => rayon::in_place_scope(op),
    }
}

/// Reads one piece, checks it, and hashes it for the digest.
fn read_piece<'s>(
    source: &dyn ReadAt,
    piece: Piece<'s>,
    check: &(dyn Fn(&[u8]) -> Result<()> + Sync),
    hashers: &[Option<PolyHasher>],
    context: &'static str,
) -> Result<&'s [u8]> {
    crate::source::populate(piece.dst);
    let read: &'s mut [u8] = source
        .read_exact_uninit_at(piece.dst, piece.offset)
        .map_err(|err| Error::from_read(err, context))?;
    let read: &'s [u8] = read;
    check(read)?;
    if let Some(Some(hasher)) = hashers.get(piece.polynomial) {
        hasher.add(piece.at, read);
    }
    Ok(read)
}

/// Hashes `items` in order, waiting for each piece to land; `false` if a read failed first.
fn hash_in_order(shared: &Shared<'_>, items: &[Item], bytes: &[u8], hasher: &mut Xxh3) -> bool {
    for item in items {
        match item {
            Item::Bytes(range) => hasher.update(bytes.get(range.clone()).unwrap_or_default()),
            Item::Piece(index) => match shared.wait(*index) {
                Some(piece) => hasher.update(piece),
                None => return false,
            },
        }
    }
    true
}

/// What the readers and the hashing thread share.
struct Shared<'s> {
    /// The pieces not yet taken, in payload order.
    queue: Mutex<std::iter::Enumerate<std::vec::IntoIter<Piece<'s>>>>,
    /// Each piece's bytes, once read and checked.
    done: Vec<OnceLock<&'s [u8]>>,
    /// The first error.
    failure: Mutex<Option<Error>>,
    /// Set after an error: nothing more is read.
    abort: AtomicBool,
    /// Wakes the hashing thread when a piece lands (or a read fails).
    signal: Mutex<()>,
    landed: Condvar,
}

impl<'s> Shared<'s> {
    fn next(&self) -> Option<(usize, Piece<'s>)> {
        if self.abort.load(Ordering::Acquire) {
            return None;
        }
        self.queue.lock().ok()?.next()
    }

    fn land(&self, index: usize, bytes: &'s [u8]) {
        if let Some(slot) = self.done.get(index) {
            let _ = slot.set(bytes);
        }
        self.wake();
    }

    fn fail(&self, err: Error) {
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(err);
        }
        self.abort.store(true, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        // Taken so that the hashing thread, between its check and its wait, cannot miss it.
        drop(self.signal.lock());
        self.landed.notify_all();
    }

    /// The bytes of piece `index` once it has landed; `None` once a read failed.
    fn wait(&self, index: usize) -> Option<&'s [u8]> {
        let slot = self.done.get(index)?;
        let mut guard = self.signal.lock().ok()?;
        loop {
            if let Some(bytes) = slot.get() {
                return Some(bytes);
            }
            if self.abort.load(Ordering::Acquire) {
                return None;
            }
            guard = self.landed.wait(guard).ok()?;
        }
    }

    fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .ok()
            .and_then(|mut failure| failure.take())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use halo2_proofs::halo2curves::ff::Field;
    use halo2curves::serde::SerdeObject;
    use xxhash_rust::xxh3::xxh3_64;

    use super::*;
    use crate::field::FieldEncoding;
    use crate::options::Validation;
    use crate::payload::PayloadReader;
    use crate::source::BULK_STEP;

    /// A payload laid out as halo2 writes polynomials: each behind its length (u32 BE).
    fn payload(polys: &[Vec<Fr>]) -> (Vec<u8>, Vec<Span>) {
        let mut bytes = Vec::new();
        let mut spans = Vec::new();
        for poly in polys {
            bytes.extend_from_slice(&(poly.len() as u32).to_be_bytes());
            spans.push(Span::Bytes(4));
            for value in poly {
                bytes.extend_from_slice(&crate::field::encode_fr(value, FieldEncoding::Raw));
            }
            spans.push(Span::Polynomial {
                count: poly.len(),
                spare: 1,
            });
        }
        (bytes, spans)
    }

    fn polys() -> Vec<Vec<Fr>> {
        let mut rng = rand::thread_rng();
        // Smaller than a piece, exactly a piece, and over two pieces.
        [
            1 << 10,
            BULK_STEP / FR_BYTES,
            (2 * BULK_STEP) / FR_BYTES + 1024,
            3,
        ]
        .iter()
        .map(|&len| (0..len).map(|_| Fr::random(&mut rng)).collect())
        .collect()
    }

    /// From a file, memory and a stream, a run of spans gives the same polynomials (grouped
    /// as asked, each with its spare room), the small spans' bytes, the payload's stream
    /// hash, and each polynomial's digest hash.
    #[test]
    fn every_source_reads_the_same_spans() {
        let polys = polys();
        let (bytes, spans) = payload(&polys);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let mut stream = bytes.as_slice();
        let len = bytes.len() as u64;
        let readers = [
            ("file", PayloadReader::at(&file, 0, len, 1 << 10)),
            ("memory", PayloadReader::from_slice(&bytes)),
            ("stream", PayloadReader::new(&mut stream, len, false)),
        ];
        for (name, reader) in readers {
            let mut reader = reader.narrow(len, name != "stream", true).unwrap();
            reader.record_polynomials();
            let mut seen = Vec::new();
            let data = reader
                .read_spans(
                    &spans,
                    &[1, 3],
                    Validation::Checked,
                    |index, prefix| {
                        seen.push((index, prefix.to_vec()));
                        Ok(())
                    },
                    "test",
                )
                .unwrap();
            let flat: Vec<&Vec<Fr>> = data.groups.iter().flatten().collect();
            assert_eq!(data.groups.iter().map(Vec::len).collect::<Vec<_>>(), [1, 3]);
            assert_eq!(flat.len(), polys.len(), "{name}");
            for (read, original) in flat.iter().zip(&polys) {
                assert_eq!(*read, original, "{name}");
                assert!(read.capacity() > read.len(), "{name}: no spare room");
            }
            let prefixes: Vec<u8> = polys
                .iter()
                .flat_map(|p| (p.len() as u32).to_be_bytes())
                .collect();
            assert_eq!(data.bytes, prefixes, "{name}");
            assert_eq!(
                seen.iter().map(|(index, _)| *index).collect::<Vec<_>>(),
                [0, 2, 4, 6],
                "{name}"
            );
            assert_eq!(reader.remaining(), 0, "{name}");
            assert_eq!(reader.digest(), Some(xxh3_64(&bytes)), "{name}");
            let recorded = reader.recorded_polynomials().unwrap();
            let expected: Vec<[u8; 32]> = polys
                .iter()
                .map(|p| *blake3::hash(crate::raw_view::as_raw_bytes(p).unwrap()).as_bytes())
                .collect();
            assert_eq!(recorded, expected, "{name}");
        }
    }

    /// The small spans are checked before any polynomial is read: a bad prefix is the error,
    /// whatever the polynomials hold.
    #[test]
    fn small_spans_are_checked_first() {
        let mut polys = polys();
        // An element above the modulus: refused when checked, if it were read.
        polys[0][0] = Fr::from_raw_bytes_unchecked(&[0xff; 32]);
        let (bytes, spans) = payload(&polys);
        let mut reader = PayloadReader::from_slice(&bytes);
        let refused = reader.read_spans(
            &spans,
            &[4],
            Validation::Checked,
            |index, _| match index {
                4 => Err(Error::Malformed("third prefix".into())),
                _ => Ok(()),
            },
            "test",
        );
        assert!(matches!(refused, Err(Error::Malformed(_))), "{refused:?}");
        let mut reader = PayloadReader::from_slice(&bytes);
        let invalid = reader.read_spans(&spans, &[4], Validation::Checked, |_, _| Ok(()), "test");
        assert!(
            matches!(invalid, Err(Error::InvalidFieldElement { .. })),
            "{invalid:?}"
        );
        let mut reader = PayloadReader::from_slice(&bytes);
        let trusted = reader.read_spans(&spans, &[4], Validation::Trusted, |_, _| Ok(()), "test");
        assert!(trusted.is_ok());
    }

    /// A file shorter than the payload declared (truncated while it loads) is a truncation,
    /// with nothing half-read returned; so are groups that do not cover the polynomials.
    #[test]
    fn a_short_source_or_wrong_groups_are_errors() {
        let polys = polys();
        let (bytes, spans) = payload(&polys);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes[..bytes.len() - 1000]).unwrap();
        let mut reader = PayloadReader::at(&file, 0, bytes.len() as u64, 1 << 10)
            .narrow(bytes.len() as u64, true, true)
            .unwrap();
        let short = reader.read_spans(&spans, &[4], Validation::Trusted, |_, _| Ok(()), "tail");
        assert!(
            matches!(short, Err(Error::Truncated { context: "tail" })),
            "{short:?}"
        );
        assert_eq!(reader.digest(), None);
        let mut reader = PayloadReader::from_slice(&bytes);
        let wrong = reader.read_spans(&spans, &[3], Validation::Trusted, |_, _| Ok(()), "test");
        assert!(matches!(wrong, Err(Error::Internal(_))), "{wrong:?}");
    }
}
