//! A bulk read's plan: where each span lands, which segments are read together in one
//! request, and in what order the calling thread visits them.

use halo2curves::bn256::Fr;

use super::*;
use crate::error::{Error, Result};
use crate::memory::FR_BYTES;
use crate::source::Dst;

/// What one segment of a request is.
#[derive(Clone, Copy)]
pub(super) enum Role {
    /// The small span `span` (its index among the spans): checked by `check_bytes`, in
    /// payload order, on the hashing thread.
    Bytes { span: usize },
    /// Bytes `at..` of polynomial `polynomial`: checked and hashed for the digest on the
    /// thread that read them.
    Piece { polynomial: usize, at: usize },
}

/// A request: adjacent segments read together from `offset`; segment `first + i` is the
/// request's `i`-th.
pub(super) struct Request<'s> {
    pub(super) offset: u64,
    pub(super) first: usize,
    pub(super) dsts: Vec<Dst<'s>>,
}

/// What the calling thread visits, in payload order: small spans read before the rest, or
/// a segment of a request.
pub(super) enum Item {
    /// The `i`-th small span read first.
    Bytes(usize),
    Segment(usize),
}

/// Where each span starts, laid out one after the other from `start`, and how many bytes
/// they take in all.
pub(super) fn offsets_of(
    spans: &[Span],
    start: u64,
    context: &'static str,
) -> Result<(Vec<u64>, u64)> {
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
/// group (`groups`: how many polynomials each takes, in order); huge pages asked for where
/// `huge_pages` ([`Workers::huge_pages`]).
pub(super) fn vectors_for(
    spans: &[Span],
    groups: &[usize],
    huge_pages: bool,
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
            if let Some(memory) =
                crate::memory::uninit_bytes_mut(values.spare_capacity_mut()).filter(|_| huge_pages)
            {
                crate::memory::advise_huge_pages_if_asked(memory);
            }
            group.push(values);
        }
        grouped.push(group);
    }
    Ok((sizes, grouped))
}

/// One segment to read: its role, its payload offset, where it lands.
pub(super) type Segment<'s> = (Role, u64, Dst<'s>);

/// The pieces polynomials are cut into: `workers.piece`, or, where requests of about
/// `request` bytes group pieces, an eighth of a request or less (a request then ends within
/// an eighth of its share of the payload), at least 64 KiB, and at most the bulk step (small
/// enough to be checked while in cache). A power of two: a piece is a subtree of its
/// polynomial's BLAKE3 tree.
pub(super) fn segment_step(workers: &Workers<'_>, request: Option<u64>) -> usize {
    const SMALLEST: usize = 64 << 10;
    match request {
        Some(request) => {
            let eighth = usize::try_from(request / 8).unwrap_or(usize::MAX).max(1);
            let below = 1usize << eighth.ilog2();
            below.clamp(
                SMALLEST,
                workers.piece.clamp(SMALLEST, crate::source::BULK_STEP),
            )
        }
        None => workers.piece.max(FR_BYTES),
    }
}

/// The segments, in payload order: each polynomial in pieces of `step` bytes (subtrees of
/// its BLAKE3 tree) landing in its vector's spare capacity, each small span whole in `bytes`.
pub(super) fn segments_of<'s>(
    spans: &[Span],
    offsets: &[u64],
    bytes: &'s mut [u8],
    grouped: &'s mut [Vec<Vec<Fr>>],
    step: usize,
    context: &'static str,
) -> Result<Vec<Segment<'s>>> {
    let step = step.max(FR_BYTES);
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
pub(super) struct Planned<'s> {
    pub(super) requests: Vec<Request<'s>>,
    pub(super) items: Vec<Item>,
    pub(super) roles: Vec<(Role, u64)>,
    pub(super) reads: Vec<(usize, &'s mut [u8], u64)>,
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

/// From a source whose requests are costly: adjacent segments together, in `count`
/// requests of about equal shares of the `total` bytes from `start`: a segment joins the
/// request whose share its first byte falls in.
pub(super) fn coalesced(
    segments: Vec<Segment<'_>>,
    start: u64,
    total: u64,
    count: u64,
) -> Planned<'_> {
    let share_of = |offset: u64| {
        let into = u128::from(offset.saturating_sub(start));
        into * u128::from(count.max(1)) / u128::from(total.max(1))
    };
    let mut planned = Planned::with_capacity(segments.len());
    let mut share = None;
    for (index, (role, offset, dst)) in segments.into_iter().enumerate() {
        planned.items.push(Item::Segment(index));
        planned.roles.push((role, offset));
        let this = share_of(offset);
        match planned.requests.last_mut() {
            Some(request) if share == Some(this) => request.dsts.push(dst),
            _ => planned.requests.push(Request {
                offset,
                first: index,
                dsts: vec![dst],
            }),
        }
        share = Some(this);
    }
    planned
}

/// From a file or memory: the small spans apart (read first, at once), then one request per
/// piece.
pub(super) fn one_request_a_piece(segments: Vec<Segment<'_>>) -> Planned<'_> {
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

/// The smallest request a coalescing bulk read makes.
pub(super) const MIN_REQUEST: usize = 1 << 20;
