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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

use halo2curves::bn256::Fr;
use xxhash_rust::xxh3::Xxh3;

use crate::error::{Error, Result};
use crate::memory::FR_BYTES;
use crate::poly_hash::PolyHasher;
use crate::source::{Dst, ReadAt};

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
    /// Every request costs a round trip ([`ReadAt::costly_requests`]): the small spans are
    /// read with the polynomials around them, and adjacent pieces are read together, in
    /// requests of up to `piece` bytes sized so that every thread has a few.
    pub(crate) coalesce: bool,
}

/// What one segment of a request is.
#[derive(Clone, Copy)]
enum Role {
    /// The small span `span` (its index among the spans): checked by `check_bytes`, in
    /// payload order, on the hashing thread.
    Bytes { span: usize },
    /// Bytes `at..` of polynomial `polynomial`: checked and hashed for the digest on the
    /// thread that read them.
    Piece { polynomial: usize, at: usize },
}

/// A request: adjacent segments read together from `offset`; segment `first + i` is the
/// request's `i`-th.
struct Request<'s> {
    offset: u64,
    first: usize,
    dsts: Vec<Dst<'s>>,
}

/// What the calling thread visits, in payload order: small spans read before the rest, or
/// a segment of a request.
enum Item {
    /// The `i`-th small span read first.
    Bytes(usize),
    Segment(usize),
}

/// Reads `spans`, laid out one after the other from `start` in `source` (which holds them:
/// the caller checked the length), the polynomials into `groups` (how many of them each
/// group takes, in order). `check_bytes` sees each [`Span::Bytes`] (its index among the
/// spans, its bytes): before any polynomial is read, or, from a source whose requests are
/// costly, in payload order as they arrive (an error is then the one a read in payload
/// order meets first). Returns the data, and each polynomial's digest hash when
/// `hooks.record`.
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
    let (sizes, mut grouped) = vectors_for(spans, groups, context)?;
    let hashers: Vec<Option<PolyHasher>> = sizes
        .iter()
        .map(|&(count, _)| hooks.record.then(|| PolyHasher::new(count * FR_BYTES)))
        .collect();

    let record = hooks.record;
    // Every request was read once `run` returns `Ok` (see the SAFETY argument below).
    {
        let segments = segments_of(spans, &offsets, &mut bytes, &mut grouped, workers, context)?;
        let planned = if workers.coalesce {
            coalesced(segments, total, workers)
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
            #[allow(unsafe_code)] // the one use of `unsafe` outside `memory`
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

/// Where each span starts, laid out one after the other from `start`, and how many bytes
/// they take in all.
fn offsets_of(spans: &[Span], start: u64, context: &'static str) -> Result<(Vec<u64>, u64)> {
    let truncated = || Error::Truncated { context };
    let mut offsets = Vec::with_capacity(spans.len());
    let mut at = start;
    for span in spans {
        offsets.push(at);
        let len = u64::try_from(span.len()).map_err(|_| truncated())?;
        at = at.checked_add(len).ok_or_else(truncated)?;
    }
    Ok((offsets, at - start))
}

/// The polynomials' vectors, group by group.
type Grouped = Vec<Vec<Vec<Fr>>>;

/// Every polynomial's `(count, spare)`, and its vector, empty with room for both, group by
/// group (`groups`: how many polynomials each takes, in order).
fn vectors_for(
    spans: &[Span],
    groups: &[usize],
    context: &'static str,
) -> Result<(Vec<(usize, usize)>, Grouped)> {
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
            if let Some(memory) = crate::memory::uninit_bytes_mut(values.spare_capacity_mut()) {
                crate::memory::advise_huge_pages(memory);
            }
            group.push(values);
        }
        grouped.push(group);
    }
    Ok((sizes, grouped))
}

/// One segment to read: its role, its payload offset, where it lands.
type Segment<'s> = (Role, u64, Dst<'s>);

/// The segments, in payload order: each polynomial in pieces (subtrees of its BLAKE3 tree)
/// landing in its vector's spare capacity, each small span whole in `bytes`.
fn segments_of<'s>(
    spans: &[Span],
    offsets: &[u64],
    bytes: &'s mut [u8],
    grouped: &'s mut [Vec<Vec<Fr>>],
    workers: &Workers<'_>,
    context: &'static str,
) -> Result<Vec<Segment<'s>>> {
    let step = match workers.coalesce {
        // Requests group pieces: pieces stay small enough to be checked while in cache.
        true => workers.piece.min(crate::source::BULK_STEP),
        false => workers.piece,
    }
    .max(FR_BYTES);
    let mut segments: Vec<Segment<'s>> = Vec::new();
    let mut vectors = grouped.iter_mut().flatten().enumerate();
    let mut rest: &'s mut [u8] = bytes;
    for (index, (span, &offset)) in spans.iter().zip(offsets).enumerate() {
        match *span {
            Span::Bytes(len) => {
                let (dst, tail) = std::mem::take(&mut rest)
                    .split_at_mut_checked(len)
                    .ok_or(Error::Truncated { context })?;
                rest = tail;
                segments.push((Role::Bytes { span: index }, offset, Dst::Init(dst)));
            }
            Span::Polynomial { count, .. } => {
                let (polynomial, values) = vectors.next().ok_or_else(|| {
                    Error::Internal("a bulk read has more spans than vectors".into())
                })?;
                let spare = values
                    .spare_capacity_mut()
                    .get_mut(..count)
                    .ok_or_else(|| {
                        Error::Internal("a polynomial's vector is smaller than its span".into())
                    })?;
                let raw = crate::memory::uninit_bytes_mut(spare).ok_or_else(|| {
                    Error::Internal("bulk reads need the raw layout of field elements".into())
                })?;
                for (number, dst) in raw.chunks_mut(step).enumerate() {
                    let role = Role::Piece {
                        polynomial,
                        at: number * step,
                    };
                    segments.push((role, offset + (number * step) as u64, Dst::Uninit(dst)));
                }
            }
        }
    }
    Ok(segments)
}

/// The requests of a bulk read, what the calling thread visits, each segment's role, and
/// the small spans read before the rest (`(span, bytes, offset)`).
struct Planned<'s> {
    requests: Vec<Request<'s>>,
    items: Vec<Item>,
    roles: Vec<(Role, u64)>,
    reads: Vec<(usize, &'s mut [u8], u64)>,
}

impl Planned<'_> {
    /// A plan with room for `segments` segments.
    fn with_capacity(segments: usize) -> Self {
        Planned {
            requests: Vec::new(),
            items: Vec::with_capacity(segments),
            roles: Vec::with_capacity(segments),
            reads: Vec::new(),
        }
    }
}

/// From a source whose requests are costly: adjacent segments together, in requests of
/// about a share of the payload per thread (two or more each), within the piece size.
///
/// A segment joins the request before it while that brings the request nearer the target
/// than leaving it: a halo2-lib key's polynomials come with 4-byte prefixes, so a request
/// of two 512 KiB polynomials is 8 bytes over a 1 MiB target, and a rule of "no more than
/// the target" would send every polynomial alone. A request so ends under twice the target,
/// or is one segment.
fn coalesced<'s>(segments: Vec<Segment<'s>>, total: u64, workers: &Workers<'_>) -> Planned<'s> {
    let threads = workers.pool.map_or_else(
        rayon::current_num_threads,
        rayon::ThreadPool::current_num_threads,
    );
    let share = usize::try_from(total / (2 * threads.max(1) as u64)).unwrap_or(usize::MAX);
    let target = share.clamp(MIN_REQUEST, workers.piece.max(MIN_REQUEST));
    let mut planned = Planned::with_capacity(segments.len());
    for (index, (role, offset, dst)) in segments.into_iter().enumerate() {
        planned.items.push(Item::Segment(index));
        planned.roles.push((role, offset));
        let len = dst.len();
        match planned.requests.last_mut() {
            Some(request) if joins(request.dsts.iter().map(Dst::len).sum(), len, target) => {
                request.dsts.push(dst);
            }
            _ => planned.requests.push(Request {
                offset,
                first: index,
                dsts: vec![dst],
            }),
        }
    }
    planned
}

/// Whether a segment of `len` bytes joins a request of `sum` bytes aiming at `target`: when
/// the request ends nearer the target with it than without it.
fn joins(sum: usize, len: usize, target: usize) -> bool {
    let end = sum.saturating_add(len);
    sum < target && (end <= target || end - target <= target - sum)
}

/// From a file or memory: the small spans apart (read first, at once), then one request per
/// piece.
fn one_request_a_piece(segments: Vec<Segment<'_>>) -> Planned<'_> {
    let mut planned = Planned::with_capacity(segments.len());
    for (index, (role, offset, dst)) in segments.into_iter().enumerate() {
        planned.roles.push((role, offset));
        match (role, dst) {
            (Role::Bytes { span }, Dst::Init(dst)) => {
                planned.items.push(Item::Bytes(planned.reads.len()));
                planned.reads.push((span, dst, offset));
            }
            (_, dst) => {
                planned.items.push(Item::Segment(index));
                planned.requests.push(Request {
                    offset,
                    first: index,
                    dsts: vec![dst],
                });
            }
        }
    }
    planned
}

/// Reads the small spans set apart, at once, and checks each before any polynomial is read.
fn read_small_spans_first(
    source: &dyn ReadAt,
    reads: &mut [(usize, &mut [u8], u64)],
    check_bytes: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    context: &'static str,
) -> Result<()> {
    let mut many: Vec<(&mut [u8], u64)> = reads
        .iter_mut()
        .map(|(_, dst, offset)| (&mut **dst, *offset))
        .collect();
    source
        .read_exact_many_at(&mut many)
        .map_err(|err| Error::from_read(err, context))?;
    drop(many);
    for (span, dst, _) in reads.iter() {
        check_bytes(*span, dst)?;
    }
    Ok(())
}

/// The smallest request a coalescing bulk read makes.
const MIN_REQUEST: usize = 1 << 20;

/// Checks a small span's bytes (by its index among the spans).
type CheckSpan<'c> = &'c mut dyn FnMut(usize, &[u8]) -> Result<()>;

/// What one bulk read reads: its requests, each segment's role and offset, and what the
/// calling thread visits in order (`read_first`: the small spans read before the rest).
struct Batch<'s, 'b> {
    requests: Vec<Request<'s>>,
    roles: &'b [(Role, u64)],
    items: &'b [Item],
    read_first: &'b [&'b [u8]],
}

/// Reads every request (on the pool's threads, in payload order, each piece checked and
/// hashed for the digest on its thread) while the calling thread visits the items in
/// payload order: hashing them, and handing small spans read in the requests to
/// `check_in_order`.
fn run<'s>(
    source: &dyn ReadAt,
    batch: Batch<'s, '_>,
    hashers: &[Option<PolyHasher>],
    mut check_in_order: Option<CheckSpan<'_>>,
    hooks: Hooks<'_>,
    workers: &Workers<'_>,
) -> Result<()> {
    let Hooks {
        hash,
        check,
        context,
        ..
    } = hooks;
    let Batch {
        requests,
        roles,
        items,
        read_first,
    } = batch;
    let shared = Shared {
        queue: Mutex::new(requests.into_iter()),
        done: (0..roles.len()).map(|_| OnceLock::new()).collect(),
        failure: Mutex::new(None),
        failed_at: AtomicU64::new(u64::MAX),
        signal: Mutex::new(()),
        landed: Condvar::new(),
    };
    let work = || {
        while let Some(request) = shared.next() {
            read_request(source, request, roles, check, hashers, context, &shared);
        }
    };
    let threads = workers.pool.map_or_else(
        rayon::current_num_threads,
        rayon::ThreadPool::current_num_threads,
    );
    // A thread of the pool itself must not wait for the pool's work: it reads too, and
    // visits the items once everything is read.
    let inside = match workers.pool {
        Some(pool) => pool.current_thread_index().is_some(),
        None => rayon::current_thread_index().is_some(),
    };
    let mut hash = hash;
    let visits = hash.is_some() || check_in_order.is_some();
    let visitor = Visitor {
        shared: &shared,
        roles,
        items,
        read_first,
    };
    in_place_scope(workers.pool, |scope| {
        for _ in 0..threads {
            scope.spawn(|_| work());
        }
        match (visits, inside) {
            (true, false) => visitor.visit(&mut hash, &mut check_in_order),
            _ => work(),
        }
    });
    if visits && inside {
        visitor.visit(&mut hash, &mut check_in_order);
    }
    let landed = |item: &Item| match item {
        Item::Bytes(_) => true,
        Item::Segment(index) => shared
            .done
            .get(*index)
            .is_some_and(|slot| slot.get().is_some()),
    };
    match shared.take_failure() {
        Some(err) => Err(err),
        None if items.iter().all(landed) => Ok(()),
        None => Err(Error::Internal("a bulk read lost a piece".into())),
    }
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

/// Reads one request and lands its segments in order, each piece checked and hashed for
/// the digest; a failure is recorded where it happened.
fn read_request<'s>(
    source: &dyn ReadAt,
    mut request: Request<'s>,
    roles: &[(Role, u64)],
    check: &(dyn Fn(&[u8]) -> Result<()> + Sync),
    hashers: &[Option<PolyHasher>],
    context: &'static str,
    shared: &Shared<'s>,
) {
    for dst in &mut request.dsts {
        if let Dst::Uninit(buf) = dst {
            crate::memory::populate(buf);
        }
    }
    // Where each destination is: a source must hand back exactly these (see `run`'s use).
    let given: Vec<(*const u8, usize)> = request
        .dsts
        .iter()
        .map(|dst| match dst {
            Dst::Init(buf) => (buf.as_ptr(), buf.len()),
            Dst::Uninit(buf) => (buf.as_ptr().cast::<u8>(), buf.len()),
        })
        .collect();
    let filled = match source.read_exact_vectored_at(request.dsts, request.offset) {
        Ok(filled) => filled,
        Err(err) => return shared.fail(Error::from_read(err, context), request.offset),
    };
    let same = filled.len() == given.len()
        && filled
            .iter()
            .zip(&given)
            .all(|(read, &(at, len))| std::ptr::eq(read.as_ptr(), at) && read.len() == len);
    if !same {
        let err = Error::Internal("a source handed back other memory than it was given".into());
        return shared.fail(err, request.offset);
    }
    for (index, read) in (request.first..).zip(filled) {
        let read: &'s [u8] = read;
        let Some(&(role, offset)) = roles.get(index) else {
            return shared.fail(Error::Internal("a segment without a role".into()), 0);
        };
        if let Role::Piece { polynomial, at } = role {
            if let Err(err) = check(read) {
                return shared.fail(err, offset);
            }
            if let Some(Some(hasher)) = hashers.get(polynomial) {
                hasher.add(at, read);
            }
        }
        shared.land(index, read);
    }
}

/// The calling thread's pass over the items, in payload order.
struct Visitor<'v, 's> {
    shared: &'v Shared<'s>,
    roles: &'v [(Role, u64)],
    items: &'v [Item],
    read_first: &'v [&'v [u8]],
}

impl Visitor<'_, '_> {
    /// Hashes every item into `hash` and hands each small span read by a request to
    /// `check`, waiting for each segment to land; stops at the first failure in payload
    /// order (recording `check`'s as such).
    fn visit(&self, hash: &mut Option<&mut Xxh3>, check: &mut Option<CheckSpan<'_>>) {
        for item in self.items {
            let read = match item {
                Item::Bytes(index) => self.read_first.get(*index).copied().unwrap_or_default(),
                Item::Segment(index) => {
                    let Some(&(role, offset)) = self.roles.get(*index) else {
                        return;
                    };
                    let Some(read) = self.shared.wait(*index, offset) else {
                        return;
                    };
                    if let (Role::Bytes { span }, Some(check)) = (role, check.as_mut()) {
                        if let Err(err) = check(span, read) {
                            return self.shared.fail(err, offset);
                        }
                    }
                    read
                }
            };
            if let Some(hasher) = hash.as_mut() {
                hasher.update(read);
            }
        }
    }
}

/// What the readers and the calling thread share.
struct Shared<'s> {
    /// The requests not yet taken, in payload order.
    queue: Mutex<std::vec::IntoIter<Request<'s>>>,
    /// Each segment's bytes, once read (and checked, for a piece).
    done: Vec<OnceLock<&'s [u8]>>,
    /// The failure earliest in the payload, and where it is.
    failure: Mutex<Option<(u64, Error)>>,
    /// Where that failure is (`u64::MAX`: none): nothing more is taken, and nothing at or
    /// after it is waited for.
    failed_at: AtomicU64,
    /// Wakes the calling thread when a segment lands (or a read fails).
    signal: Mutex<()>,
    landed: Condvar,
}

impl<'s> Shared<'s> {
    fn next(&self) -> Option<Request<'s>> {
        if self.failed_at.load(Ordering::Acquire) != u64::MAX {
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

    /// Records `err` at payload offset `at`, unless a failure earlier in the payload is
    /// recorded: the error a read in payload order would meet first wins (requests are
    /// taken in payload order, so every request before a failure was taken, and lands or
    /// fails).
    fn fail(&self, err: Error, at: u64) {
        if let Ok(mut failure) = self.failure.lock() {
            if failure.as_ref().is_none_or(|(first, _)| at < *first) {
                *failure = Some((at, err));
                self.failed_at.fetch_min(at, Ordering::AcqRel);
            }
        }
        self.wake();
    }

    fn wake(&self) {
        // Taken so that the calling thread, between its check and its wait, cannot miss it.
        drop(self.signal.lock());
        self.landed.notify_all();
    }

    /// The bytes of segment `index` (at payload offset `offset`) once it has landed; `None`
    /// once a read failed at or before it.
    fn wait(&self, index: usize, offset: u64) -> Option<&'s [u8]> {
        let slot = self.done.get(index)?;
        let mut guard = self.signal.lock().ok()?;
        loop {
            if let Some(bytes) = slot.get() {
                return Some(bytes);
            }
            if self.failed_at.load(Ordering::Acquire) <= offset {
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
            .map(|(_, err)| err)
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

    /// Memory read as an object store is: every request costly, each counted; with its
    /// own piece size and pool, as an object source has, if given.
    struct Costly<'a> {
        bytes: &'a [u8],
        requests: std::sync::atomic::AtomicUsize,
        plan: Option<(usize, rayon::ThreadPool)>,
    }

    impl<'a> Costly<'a> {
        fn new(bytes: &'a [u8]) -> Self {
            Costly {
                bytes,
                requests: std::sync::atomic::AtomicUsize::new(0),
                plan: None,
            }
        }

        /// Read in pieces of up to `piece` bytes by a pool of `threads`.
        fn planned(bytes: &'a [u8], piece: usize, threads: usize) -> Self {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            Costly {
                plan: Some((piece, pool)),
                ..Costly::new(bytes)
            }
        }

        fn requests(&self) -> usize {
            self.requests.load(Ordering::Relaxed)
        }
    }

    impl ReadAt for Costly<'_> {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.requests.fetch_add(1, Ordering::Relaxed);
            crate::source::Memory(self.bytes).read_exact_at(buf, offset)
        }

        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            self.requests.fetch_add(1, Ordering::Relaxed);
            crate::source::Memory(self.bytes).read_at(buf, offset)
        }

        fn read_exact_vectored_at<'b>(
            &self,
            dsts: Vec<Dst<'b>>,
            offset: u64,
        ) -> std::io::Result<Vec<&'b mut [u8]>> {
            self.requests.fetch_add(1, Ordering::Relaxed);
            crate::source::Memory(self.bytes).read_exact_vectored_at(dsts, offset)
        }

        fn costly_requests(&self) -> bool {
            true
        }

        fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
            self.plan.as_ref().map(|(piece, pool)| (*piece, pool))
        }
    }

    /// A source (safe code, as any `ReadAt` may be) that hands back memory of its own instead
    /// of the destinations it was given.
    struct Elsewhere<'a>(&'a [u8]);

    impl ReadAt for Elsewhere<'_> {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            crate::source::Memory(self.0).read_exact_at(buf, offset)
        }

        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            crate::source::Memory(self.0).read_at(buf, offset)
        }

        fn read_exact_vectored_at<'b>(
            &self,
            dsts: Vec<Dst<'b>>,
            _offset: u64,
        ) -> std::io::Result<Vec<&'b mut [u8]>> {
            Ok(dsts
                .iter()
                .map(|dst| &mut Vec::leak(vec![0u8; dst.len()])[..])
                .collect())
        }
    }

    /// The polynomials' memory is taken as initialised only when the source handed back
    /// exactly the destinations: one that hands back other memory fails the read, and no
    /// vector is given a length over memory nobody wrote (the `SAFETY` argument of
    /// `read_spans`).
    #[test]
    fn a_source_that_hands_back_other_memory_is_refused() {
        let polys = polys();
        let (bytes, spans) = payload(&polys);
        let source = Elsewhere(&bytes);
        let len = bytes.len() as u64;
        let mut reader = PayloadReader::at(&source, 0, len, 1 << 10)
            .narrow(len, true, true)
            .unwrap();
        let result = reader.read_spans(&spans, &[1, 3], Validation::Trusted, |_, _| Ok(()), "test");
        assert!(
            matches!(result, Err(Error::Internal(ref why)) if why.contains("other memory")),
            "{:?}",
            result.map(|data| data.bytes.len())
        );
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
        let costly = Costly::new(&bytes);
        let readers = [
            ("file", PayloadReader::at(&file, 0, len, 1 << 10)),
            ("costly", PayloadReader::at(&costly, 0, len, 1 << 10)),
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
                .map(|p| *blake3::hash(crate::memory::as_raw_bytes(p).unwrap()).as_bytes())
                .collect();
            assert_eq!(recorded, expected, "{name}");
        }
    }

    /// `count` random polynomials of `bytes` bytes each.
    fn random_polys(count: usize, bytes: usize) -> Vec<Vec<Fr>> {
        let mut rng = rand::thread_rng();
        (0..count)
            .map(|_| {
                (0..bytes / FR_BYTES)
                    .map(|_| Fr::random(&mut rng))
                    .collect()
            })
            .collect()
    }

    /// Reads `polys` behind their prefixes (a halo2-lib key's shape) from `costly`, checks
    /// every byte and the digest, and returns the requests the bulk read made.
    fn requests_of_a_bulk_read(polys: &[Vec<Fr>], costly: impl Fn(&[u8]) -> Costly<'_>) -> usize {
        let (bytes, spans) = payload(polys);
        let costly = costly(&bytes);
        let len = bytes.len() as u64;
        let mut reader = PayloadReader::at(&costly, 0, len, 1 << 10)
            .narrow(len, true, true)
            .unwrap();
        let before = costly.requests();
        let data = reader
            .read_spans(
                &spans,
                &[polys.len()],
                Validation::Checked,
                |_, _| Ok(()),
                "test",
            )
            .unwrap();
        assert_eq!(data.groups[0], polys);
        assert_eq!(reader.digest(), Some(xxh3_64(&bytes)));
        costly.requests() - before
    }

    /// From a source whose requests are costly, adjacent spans are asked for together:
    /// fewer requests than pieces, none smaller than it must be, and every byte read once.
    #[test]
    fn costly_sources_get_few_large_requests() {
        // Many polynomials smaller than a piece.
        let requests =
            requests_of_a_bulk_read(&random_polys(64, 64 << 10), |bytes| Costly::new(bytes));
        // 4 MiB of payload in requests of at least 1 MiB (one per span would be 128).
        assert!(requests <= 5, "{requests} requests");
    }

    /// Polynomials of half a request behind their 4-byte prefixes (a halo2-lib key's shape
    /// at k = 14 from an object store: 512 KiB against 1 MiB requests) go two to a request,
    /// though two with their prefixes are 8 bytes over it.
    #[test]
    fn costly_requests_pair_polynomials_of_half_a_request() {
        // 8 threads: a share of the payload per thread is under the smallest request.
        let requests = requests_of_a_bulk_read(&random_polys(16, MIN_REQUEST / 2), |bytes| {
            Costly::planned(bytes, 16 << 20, 8)
        });
        // One request a polynomial would be 16.
        assert_eq!(requests, 8, "{requests} requests");
    }

    /// From a costly source (small spans read with the polynomials), the error is the one
    /// a read in payload order meets first: a bad prefix before a bad element, or a bad
    /// element before a bad prefix.
    #[test]
    fn costly_sources_report_the_first_error_in_payload_order() {
        let bad_prefix = |index: usize, _: &[u8]| match index {
            4 => Err(Error::Malformed("third prefix".into())),
            _ => Ok(()),
        };
        for (poisoned, prefix_first) in [(3, true), (0, false)] {
            let mut polys = polys();
            polys[poisoned][0] = Fr::from_raw_bytes_unchecked(&[0xff; 32]);
            let (bytes, spans) = payload(&polys);
            let costly = Costly::new(&bytes);
            let len = bytes.len() as u64;
            let mut reader = PayloadReader::at(&costly, 0, len, 1 << 10)
                .narrow(len, true, true)
                .unwrap();
            let refused = reader.read_spans(&spans, &[4], Validation::Checked, bad_prefix, "test");
            match prefix_first {
                true => assert!(matches!(refused, Err(Error::Malformed(_))), "{refused:?}"),
                false => assert!(
                    matches!(refused, Err(Error::InvalidFieldElement { .. })),
                    "{refused:?}"
                ),
            }
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
