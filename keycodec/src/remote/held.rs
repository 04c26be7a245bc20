//! Ranges of an object fetched ahead of the reads that need them, into memory of their own:
//! the object's end (a container's record, read last, after a bulk read), and a load's first
//! round, sent with its first request, before the object's size is known.
//!
//! Why a first round: a load learns the object's size and layout from its first answer, a
//! round trip after it starts; the requests for the payload would otherwise wait for that
//! answer, and the link would carry nothing for a round trip more. So a load of a proving key
//! or parameters asks, with its first request, for the bytes that follow too
//! ([`RemoteOptions::first_round`](super::RemoteOptions::first_round)), in pieces small
//! enough for streams of 10 MB/s. They are not conditional on the object's
//! version, which is not known yet: each answer's own account of the object (its size, ETag
//! and version) must match the load's, or its bytes are not used. Pieces past the object's
//! end are refused by the store, and a refused or failed piece is fetched again, like any
//! range, where a read needs it.

use std::ops::Range;
use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use keycodec_core::transport::Dst;
use keycodec_core::{Error, Result};

use super::fetch::{Admission, Fetcher};
use super::ObjectInfo;

/// A first round's piece: what one stream of 10 MB/s brings in a tenth of a second.
const PIECE: u64 = 1 << 20;

/// One range being fetched or fetched, and what its answer said of the object.
pub(super) struct Held {
    /// The range asked for (an unconditional one may reach past the object's end).
    range: Range<u64>,
    bytes: Shared<BoxFuture<'static, Option<Arc<Answer>>>>,
    /// The task fetching them, if they are not in hand.
    task: Option<AbortHandle>,
}

/// The bytes of an answer and the object they are of.
pub(super) struct Answer {
    pub(super) info: ObjectInfo,
    pub(super) bytes: Vec<u8>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Held {
    fn spawn(
        handle: &Handle,
        range: Range<u64>,
        fetch: impl std::future::Future<Output = Option<Answer>> + Send + 'static,
    ) -> Held {
        let task = handle.spawn(fetch);
        let abort = task.abort_handle();
        Held {
            range,
            bytes: async move { task.await.ok().flatten().map(Arc::new) }
                .boxed()
                .shared(),
            task: Some(abort),
        }
    }

    /// Bytes in hand: the object's from `start`, as `info` describes it.
    pub(super) fn fetched(start: u64, info: ObjectInfo, bytes: Vec<u8>) -> Held {
        let range = start..start + bytes.len() as u64;
        let answer = Some(Arc::new(Answer { info, bytes }));
        Held {
            range,
            bytes: futures_util::future::ready(answer).boxed().shared(),
            task: None,
        }
    }

    /// `range` of the object as `fetcher` knows it, by one ranged GET conditional on its
    /// version, sent at once (outside the flow: reads that hold a place in it may wait on
    /// these bytes).
    pub(super) fn known(handle: &Handle, fetcher: &Arc<Fetcher>, range: Range<u64>) -> Held {
        let fetcher = Arc::clone(fetcher);
        let (start, len) = (range.start, range.end - range.start);
        Held::spawn(handle, range, async move {
            let mut bytes = vec![0u8; usize::try_from(len).ok()?];
            fetcher
                .fetch_vectored(start, vec![Dst::Init(&mut bytes)], Admission::Now)
                .await
                .ok()?;
            Some(Answer {
                info: fetcher.info.clone(),
                bytes,
            })
        })
    }

    /// The pieces of a first round over `range`: the first `first` bytes long (what the
    /// load reads first, in hand sooner), the rest of a stream's tenth of a second each.
    pub(super) fn pieces(range: Range<u64>, first: u64) -> impl Iterator<Item = Range<u64>> {
        let mut start = range.start;
        let mut len = first.max(1);
        std::iter::from_fn(move || {
            (start < range.end).then(|| {
                let piece = start..start.saturating_add(len).min(range.end);
                start = piece.end;
                len = PIECE;
                piece
            })
        })
    }

    /// A load's first round (see the module docs): `range` in pieces, the last one short
    /// where `range` ends within one.
    pub(super) fn first_round(
        handle: &Handle,
        store: &Arc<dyn ObjectStore>,
        location: &ObjectPath,
        range: Range<u64>,
    ) -> Vec<Held> {
        Held::pieces(range, PIECE)
            .map(|piece| Held::unconditional(handle, store, location, piece))
            .collect()
    }

    /// `range` of the object by one ranged GET conditional on no version (see
    /// [`unconditional`]).
    pub(super) fn unconditional(
        handle: &Handle,
        store: &Arc<dyn ObjectStore>,
        location: &ObjectPath,
        range: Range<u64>,
    ) -> Held {
        let (store, location) = (Arc::clone(store), location.clone());
        let asked = range.clone();
        Held::spawn(handle, range, async move {
            let (info, bytes) = unconditional(&*store, &location, asked).await.ok()??;
            Some(Answer { info, bytes })
        })
    }

    /// The bytes, once fetched, if they are `info`'s object's from the range's start to
    /// its end or the object's.
    pub(super) async fn bytes(&self, info: &ObjectInfo) -> Option<Arc<Answer>> {
        match self.bytes.peek() {
            Some(answer) => self.of(answer.clone(), info),
            None => self.of(self.bytes.clone().await, info),
        }
    }

    /// [`Held::bytes`] from a thread outside the runtime: without entering it once they are
    /// in hand (a decoder reading in order asks for every few KiB).
    pub(super) fn bytes_blocking(&self, handle: &Handle, info: &ObjectInfo) -> Option<Arc<Answer>> {
        match self.bytes.peek() {
            Some(answer) => self.of(answer.clone(), info),
            None => handle.block_on(self.bytes(info)),
        }
    }

    /// `answer`, if it is `info`'s object's bytes over the whole range (to its end or the
    /// object's).
    fn of(&self, answer: Option<Arc<Answer>>, info: &ObjectInfo) -> Option<Arc<Answer>> {
        let answer = answer?;
        let end = self.range.end.min(info.size);
        let whole = end.checked_sub(self.range.start) == Some(answer.bytes.len() as u64);
        (answer.info == *info && whole).then_some(answer)
    }

    /// Where the range starts.
    pub(super) fn start(&self) -> u64 {
        self.range.start
    }

    /// The bytes of `part` (within the range) out of this range's `answer`.
    pub(super) fn part<'a>(&self, answer: &'a Answer, part: Range<u64>) -> Option<&'a [u8]> {
        let from = usize::try_from(part.start.checked_sub(self.range.start)?).ok()?;
        let len = usize::try_from(part.end.checked_sub(part.start)?).ok()?;
        answer.bytes.get(from..from.checked_add(len)?)
    }

    /// The held range within an object of `size` bytes.
    fn within(&self, size: u64) -> Range<u64> {
        self.range.start.min(size)..self.range.end.min(size)
    }
}

/// The object's bytes in `range` (fewer when it ends sooner) by one ranged GET conditional
/// on nothing, and what the answer says of the object: its whole size, ETag and version.
/// `Ok(None)` when the store did not answer so (a missing object, a range past its end, a
/// server that ignores ranges, a failed request).
///
/// # Errors
///
/// [`Error::Malformed`] when the store sent more bytes than the range it reported.
pub(super) async fn unconditional(
    store: &dyn ObjectStore,
    location: &ObjectPath,
    range: Range<u64>,
) -> Result<Option<(ObjectInfo, Vec<u8>)>> {
    let options = GetOptions {
        range: Some(GetRange::Bounded(range.clone())),
        ..GetOptions::default()
    };
    let Ok(response) = store.get_opts(location, options).await else {
        return Ok(None);
    };
    // `object_store` checked the reported range against the one asked for and the size it
    // reports; the bytes are bounded by that range, never by the size.
    let expected = range.start..range.end.min(response.meta.size);
    if response.range != expected || expected.is_empty() {
        return Ok(None);
    }
    let info = ObjectInfo::from(response.meta.clone());
    let len = expected.end - expected.start;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let mut body = response.into_stream();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return Ok(None);
        };
        if (bytes.len() + chunk.len()) as u64 > len {
            return Err(Error::Malformed(
                "the store sent more bytes than asked".into(),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes.len() as u64 == len).then_some((info, bytes)))
}

/// A part of a read: held bytes, or a gap to fetch.
pub(super) enum Segment<'h> {
    Held(&'h Held, Range<u64>),
    Gap(Range<u64>),
}

/// The ranges held for one load, in order and apart.
#[derive(Default)]
pub(super) struct HeldRanges {
    ranges: Vec<Held>,
}

impl HeldRanges {
    /// Holds `held` too, unless it overlaps a range held already.
    pub(super) fn add(&mut self, held: Held) {
        let apart = self
            .ranges
            .iter()
            .all(|h| h.range.end <= held.range.start || held.range.end <= h.range.start);
        if apart && !held.range.is_empty() {
            let at = self
                .ranges
                .partition_point(|h| h.range.start < held.range.start);
            self.ranges.insert(at, held);
        }
    }

    /// The ranges held, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Held> {
        self.ranges.iter()
    }

    /// Where the bytes held from `offset` on without a gap end, within an object of `size`
    /// bytes (`offset` itself where none are held there).
    pub(super) fn held_until(&self, offset: u64, size: u64) -> u64 {
        let mut end = offset;
        for held in &self.ranges {
            let within = held.within(size);
            if within.start <= end && within.end > end {
                end = within.end;
            }
        }
        end
    }

    /// The held range that holds `offset`, within an object of `size` bytes.
    pub(super) fn at(&self, offset: u64, size: u64) -> Option<(&Held, Range<u64>)> {
        self.ranges.iter().find_map(|held| {
            let within = held.within(size);
            within.contains(&offset).then_some((held, within))
        })
    }

    /// `range`, within an object of `size` bytes, as held parts and gaps, in order.
    pub(super) fn segments(&self, range: Range<u64>, size: u64) -> Vec<Segment<'_>> {
        let mut segments = Vec::new();
        let mut at = range.start;
        for held in &self.ranges {
            let within = held.within(size);
            let (start, end) = (within.start.max(at), within.end.min(range.end));
            if start >= end {
                continue;
            }
            if start > at {
                segments.push(Segment::Gap(at..start));
            }
            segments.push(Segment::Held(held, start..end));
            at = end;
        }
        if at < range.end {
            segments.push(Segment::Gap(at..range.end));
        }
        segments
    }
}
