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
//! the circuit is reported as such, as in an element-by-element read. Not from a source
//! whose every request costs a round trip (an object store) or that is read in order (a file
//! from the disk): there every byte is read in payload order, the small spans with the
//! polynomials around them, and each is checked as it arrives, so the error is still the one
//! a read in payload order meets first. Read apart first, the small spans of a file on the
//! disk cost a seek each and leave islands of read-ahead in the file that break the stream
//! the rest is read as (a k = 18 key's load from the disk took 15% longer).

use halo2curves::bn256::Fr;

use crate::error::Result;
use crate::memory::FR_BYTES;
use crate::poly_hash::PolyHasher;
use crate::source::ReadAt;
use crate::xxh3::Xxh3;

mod exec;
mod plan;

use exec::{read_small_spans_first, run, Batch, CheckSpan};
use plan::{
    coalesced, offsets_of, one_request_a_piece, segment_step, segments_of, vectors_for, MIN_REQUEST,
};

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
/// and `piece` bytes; and whether adjacent spans are asked for together.
pub(crate) struct Workers<'p> {
    pub(crate) pool: Option<&'p rayon::ThreadPool>,
    /// Largest piece, a power of two of at least 1 KiB.
    pub(crate) piece: usize,
    /// Every request costs a round trip ([`ReadAt::costly_requests`]) or the source is read
    /// in order ([`ReadAt::reads_in_order`]): the small spans are read with the polynomials
    /// around them, and adjacent pieces are read together, in whole rounds of `lanes`
    /// requests of up to `piece` bytes ([`requests_for`](crate::source::requests_for)).
    pub(crate) coalesce: bool,
    /// Requests the source serves at once ([`ReadAt::requests_at_once`]).
    pub(crate) lanes: usize,
    /// The pool's threads alone read ([`ReadAt::reads_in_order`]: taking requests in
    /// payload order); the calling thread never takes a request, even with nothing to visit.
    pub(crate) pool_only: bool,
    /// The polynomials' memory may ask for transparent huge pages: a fault per 2 MiB instead
    /// of one per 4 KiB, where faulting fresh memory is the cost (a file in the page cache,
    /// memory), and where the machine's loads ask for them at all
    /// ([`crate::asks_for_huge_pages`]). Not for a file read from the disk
    /// ([`ReadAt::reads_in_order`]): the disk is the cost there.
    pub(crate) huge_pages: bool,
}

/// Reads `spans`, laid out one after the other from `start` in `source` (which holds them:
/// the caller checked the length), the polynomials into `groups` (how many of them each
/// group takes, in order). `check_bytes` sees each [`Span::Bytes`] (its index among the
/// spans, its bytes): before any polynomial is read, or, when `workers.coalesce` (a source
/// whose requests are costly, or that is read in order), in payload order as they arrive
/// (an error is then the one a read in payload order meets first). Returns the data, and
/// each polynomial's digest hash when `hooks.record`.
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
    let (offsets, total) = offsets_of(spans, start, context)?;
    let small: usize = spans
        .iter()
        .map(|span| match span {
            Span::Bytes(len) => *len,
            Span::Polynomial { .. } => 0,
        })
        .sum();
    let mut bytes = vec![0u8; small];
    let (sizes, mut grouped) = vectors_for(spans, groups, workers.huge_pages, context)?;
    let hashers: Vec<Option<PolyHasher>> = sizes
        .iter()
        .map(|&(count, _)| hooks.record.then(|| PolyHasher::new(count * FR_BYTES)))
        .collect();

    let record = hooks.record;
    // Every request was read once `run` returns `Ok` (see the SAFETY argument below).
    {
        let requests = workers.coalesce.then(|| {
            let largest = workers.piece.max(MIN_REQUEST) as u64;
            crate::source::requests_for(total, workers.lanes, MIN_REQUEST as u64, largest)
        });
        let step = segment_step(workers, requests.map(|count| total.div_ceil(count)));
        let segments = segments_of(spans, &offsets, &mut bytes, &mut grouped, step, context)?;
        let planned = if let Some(count) = requests {
            coalesced(segments, start, total, count)
        } else {
            let mut planned = one_request_a_piece(segments);
            read_small_spans_first(source, &mut planned.reads, check_bytes, context)?;
            planned
        };
        let read_first: Vec<&[u8]> = planned.reads.iter().map(|(_, dst, _)| &**dst).collect();
        let check_in_order: Option<CheckSpan<'_>> = workers.coalesce.then_some(check_bytes);
        run(
            source,
            Batch {
                requests: planned.requests,
                roles: &planned.roles,
                items: &planned.items,
                read_first: &read_first,
            },
            &hashers,
            check_in_order,
            hooks,
            workers,
        )?;
    }

    // Every request was read: each vector's first `count` elements are initialised.
    for (values, &(count, _)) in grouped.iter_mut().flatten().zip(&sizes) {
        {
            // SAFETY: `run` returned `Ok` only after every request was read by
            // `read_exact_vectored_at` (a failed request fails the run) and handed back, as
            // initialised `&mut [u8]`, exactly the memory of each destination (`read_request`
            // compares pointers and lengths, and fails the run otherwise: a `ReadAt` is a
            // public, safe trait, so only what it returns is trusted, and safe code cannot
            // make an initialised slice of uninitialised memory). The `Dst::Uninit`
            // destinations of this vector tile its first `count` elements' bytes
            // (`segments_of`: `chunks_mut` of exactly that range). Test:
            // `a_source_that_hands_back_other_memory_is_refused`. Any 32 bytes are a valid `Fr`
            // (`uninit_bytes_mut` returned a view only because `Fr`'s memory is its raw
            // encoding, see `raw_view`).
            #[allow(unsafe_code)] // one of the two uses of `unsafe` outside `memory`
            unsafe {
                crate::memory::set_len_after_fill(values, count)
            };
        }
    }
    let recorded = match record {
        true => Some(
            hashers
                .into_iter()
                .flatten()
                .map(PolyHasher::finish)
                .collect::<Result<Vec<_>>>()?,
        ),
        false => None,
    };
    Ok((
        SpanData {
            bytes,
            groups: grouped,
        },
        recorded,
    ))
}

#[cfg(test)]
mod tests;
