//! One object in object storage as a source of bytes at explicit offsets: a read takes what
//! is held of it ([`HeldRanges`]: the object's first bytes, a load's first round, its end),
//! and the rest by ranged GETs, each conditional on the version the load started with, as
//! many in flight as the transfer's flow allows ([`Fetcher`]); reads in order (a decoder's
//! stream) are served from ranges fetched ahead of them.

use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::runtime::Handle;

use keycodec_core::transport::{Dst, Filling, ReadAt};
use keycodec_core::{Error, Result};

use super::fetch::{write_next, Admission, Fetcher};
use super::held::{Answer, Held, HeldRanges, Segment};
use super::readahead::ReadAhead;

/// Bytes the first GET of a load asks for: a container's header and, for most circuits, its
/// verifying key, so that what a decoder reads first is in hand after one round trip.
pub(super) const OPENING: u64 = 64 << 10;

/// An object read by ranged GETs (see the module docs). A failure of the store is kept (the
/// first one) for the caller: the reader above sees only that a read failed.
pub(super) struct ObjectSource {
    pub(super) fetcher: Arc<Fetcher>,
    pub(super) handle: Handle,
    /// Bytes per ranged GET of a bulk read (a power of two, a multiple of the core's bulk
    /// step).
    pub(super) range_size: usize,
    /// The threads bulk reads run on: one per request the flow may allow in flight, started
    /// by the first bulk read (a header's read or a download needs none).
    pub(super) threads: usize,
    pub(super) pool: OnceLock<Option<rayon::ThreadPool>>,
    pub(super) readahead: Mutex<ReadAhead>,
    /// The most bytes the read-ahead holds.
    pub(super) read_ahead: u64,
    pub(super) failure: Mutex<Option<Error>>,
    /// Ranges fetched ahead of the reads that need them: a load's first round, the
    /// object's end ([`ObjectSource::fetch_tail`]).
    pub(super) held: HeldRanges,
}

/// The object's last bytes fetched as a load starts: a container's end (the circuit's record
/// after the payload), which a decoder reads last, after a bulk read, would otherwise cost a
/// round trip of its own.
pub(super) const TAIL: u64 = 64 << 10;

impl ObjectSource {
    /// The store's failure that made a read fail, if one did.
    pub(super) fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .ok()
            .and_then(|mut failure| failure.take())
    }

    pub(super) fn fail(&self, error: Error) -> io::Error {
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(error);
        }
        io::Error::other("object storage failed (the object's error says why)")
    }

    pub(super) fn size(&self) -> u64 {
        self.fetcher.info.size
    }

    /// Starts fetching the object's last bytes (at most [`TAIL`], none of those held):
    /// reads that fall within them take them instead of a request.
    pub(super) fn fetch_tail(&mut self) {
        let size = self.size();
        let end = self.held.segments(size.saturating_sub(TAIL)..size, size);
        if let Some(Segment::Gap(range)) = end.last() {
            let tail = Held::known(&self.handle, &self.fetcher, range.clone());
            self.held.add(tail);
        }
    }

    /// Starts fetching `ranges` of the object, of the version the load reads, ahead of the
    /// reads that need them (a first round once the version is known).
    pub(super) fn fetch_ahead(&mut self, ranges: impl IntoIterator<Item = Range<u64>>) {
        for range in ranges {
            let held = Held::known(&self.handle, &self.fetcher, range);
            self.held.add(held);
        }
    }

    /// Holds `ranges` (a load's first bytes and first round): reads there take them
    /// instead of a request.
    pub(super) fn hold(&mut self, ranges: impl IntoIterator<Item = Held>) {
        for held in ranges {
            self.held.add(held);
        }
    }

    /// Writes the bytes held (those that came, of this version) into the tee, if any, and
    /// notes their ranges as written.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] writing the file.
    pub(super) fn write_held_to_tee(&self) -> Result<()> {
        let Some(tee) = &self.fetcher.tee else {
            return Ok(());
        };
        for held in self.held.iter() {
            let Some(answer) = held.bytes_blocking(&self.handle, &self.fetcher.info) else {
                continue;
            };
            keycodec_core::transport::write_all_at(&tee.file, &answer.bytes, held.start())
                .map_err(|err| Error::io("write the downloaded bytes to", err))?;
            if let Ok(mut written) = tee.written.lock() {
                written.push(held.start()..held.start() + answer.bytes.len() as u64);
            }
        }
        Ok(())
    }

    /// Fills `dsts`, one after the other from `offset` (within the object), from the bytes
    /// held where they are and by ranged GETs elsewhere, each part written in its turn.
    ///
    /// The first gap's GET is sent at once, while the held bytes before it are waited for; a
    /// later gap's in its turn, once the one before it is received. So a fill holds at most
    /// one place in the flow, and never while it waits on a request that needs one: held
    /// ranges are fetched, and fetched again where they did not come, outside the flow
    /// ([`Admission::Now`]).
    async fn fill<'b>(&self, dsts: Vec<Dst<'b>>, offset: u64) -> Result<Vec<&'b mut [u8]>> {
        use futures_util::future::{join, join_all};
        let len: u64 = dsts.iter().map(|dst| dst.len() as u64).sum();
        let segments = self.held.segments(offset..offset + len, self.size());
        if let [Segment::Gap(_)] = segments.as_slice() {
            return self
                .fetcher
                .fetch_vectored(offset, dsts, Admission::Flow)
                .await;
        }
        let fetcher = &self.fetcher;
        let first_gap = segments
            .iter()
            .position(|segment| matches!(segment, Segment::Gap(_)))
            .unwrap_or(segments.len());
        let (before, after) = segments.split_at(first_gap);
        let early = async {
            match after.first() {
                Some(Segment::Gap(range)) => {
                    Some(fetcher.send(range.clone(), Admission::Flow).await)
                }
                _ => None,
            }
        };
        let held = join_all(before.iter().map(|segment| async move {
            match segment {
                Segment::Held(held, _) => held.bytes(&fetcher.info).await,
                Segment::Gap(_) => None,
            }
        }));
        let (mut early, held) = join(early, held).await;
        let mut filling = Filling::new(dsts);
        for (segment, answer) in before.iter().zip(held) {
            if let Segment::Held(held, range) = segment {
                self.write_held(held, range, answer, &mut filling).await?;
            }
        }
        for segment in after {
            match segment {
                Segment::Gap(range) => {
                    let sent = match early.take() {
                        Some(sent) => sent?,
                        None => fetcher.send(range.clone(), Admission::Flow).await?,
                    };
                    fetcher
                        .receive(sent, &mut |chunk| write_next(&mut filling, chunk))
                        .await?;
                }
                Segment::Held(held, range) => {
                    let answer = held.bytes(&fetcher.info).await;
                    self.write_held(held, range, answer, &mut filling).await?;
                }
            }
        }
        filling.finish().ok_or(Error::Truncated {
            context: "a range of the object",
        })
    }

    /// Writes `range` of `held` next into `filling`: from its `answer`, or fetched again
    /// where it did not come (outside the flow, see [`ObjectSource::fill`]).
    async fn write_held(
        &self,
        held: &Held,
        range: &Range<u64>,
        answer: Option<Arc<Answer>>,
        filling: &mut Filling<'_>,
    ) -> Result<()> {
        let Some(answer) = answer else {
            return self
                .fetcher
                .fetch_into(range.clone(), filling, Admission::Now)
                .await;
        };
        let bytes = held
            .part(&answer, range.clone())
            .ok_or_else(|| Error::Internal("held bytes out of place".into()))?;
        write_next(filling, bytes)
    }

    /// Copies into `buf` the bytes held from `offset`, as many as are held there in one
    /// range (waiting for them); `None` where none are, or they did not come.
    fn read_held(&self, buf: &mut [u8], offset: u64) -> Option<usize> {
        let (held, within) = self.held.at(offset, self.size())?;
        let answer = held.bytes_blocking(&self.handle, &self.fetcher.info)?;
        let n = usize::try_from(within.end - offset).map_or(buf.len(), |n| n.min(buf.len()));
        let (head, _) = buf.split_at_mut(n);
        head.copy_from_slice(held.part(&answer, offset..offset + n as u64)?);
        Some(n)
    }

    /// Fills `buf` with the object's bytes from `offset` (within the object): in pieces
    /// ([`super::range_piece`]), all at once (the flow lets as many through as it keeps in
    /// flight).
    fn fetch(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let piece = super::range_piece(buf.len() as u64, self.requests_at_once(), self.range_size);
        let step = usize::try_from(piece).unwrap_or(self.range_size).max(1);
        let requests = buf.chunks_mut(step).enumerate().map(|(index, piece)| {
            self.fill(vec![Dst::Init(piece)], offset + (index * step) as u64)
        });
        let fetched = self
            .handle
            .block_on(futures_util::future::try_join_all(requests));
        fetched.map(drop).map_err(|error| self.fail(error))
    }
}

impl ReadAt for ObjectSource {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.size()) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.fetch(buf, offset)
    }

    /// Reads in order are served by the read-ahead (see [`ReadAhead`]).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let available = self.size().saturating_sub(offset);
        let n = usize::try_from(available).map_or(buf.len(), |a| a.min(buf.len()));
        if n == 0 {
            return Ok(0);
        }
        let (head, _) = buf.split_at_mut(n);
        if let Some(n) = self.read_held(head, offset) {
            if let Ok(mut readahead) = self.readahead.lock() {
                let held_until = self.held.held_until(offset, self.size());
                let took = (offset, n as u64);
                readahead.took_held(
                    &self.fetcher,
                    &self.handle,
                    self.read_ahead,
                    took,
                    held_until,
                );
            }
            return Ok(n);
        }
        match self.readahead.lock() {
            Ok(mut readahead) => readahead
                .read(&self.fetcher, &self.handle, self.read_ahead, head, offset)
                .map_err(|error| self.fail(error)),
            Err(_) => self.fetch(head, offset).map(|()| n),
        }
    }

    /// The requests at once (as many in flight as the flow allows), each a ranged GET
    /// conditional on the object's version.
    fn read_exact_many_at(&self, requests: &mut [(&mut [u8], u64)]) -> io::Result<()> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        for (buf, offset) in requests.iter() {
            let end = offset.checked_add(buf.len() as u64);
            if end.is_none_or(|end| end > self.size()) {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        let fetches = requests
            .iter_mut()
            .filter(|(buf, _)| !buf.is_empty())
            .map(|(buf, offset)| self.fill(vec![Dst::Init(buf)], *offset));
        let fetched = self.handle.block_on(
            stream::iter(fetches)
                .buffer_unordered(super::MAX_CONCURRENCY_CEILING)
                .try_collect::<Vec<_>>(),
        );
        fetched.map(drop).map_err(|error| self.fail(error))
    }

    /// One ranged GET for all of them.
    fn read_exact_vectored_at<'b>(
        &self,
        dsts: Vec<Dst<'b>>,
        offset: u64,
    ) -> io::Result<Vec<&'b mut [u8]>> {
        let len: u64 = dsts.iter().map(|dst| dst.len() as u64).sum();
        let end = offset.checked_add(len);
        if end.is_none_or(|end| end > self.size()) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if len == 0 {
            return Ok(dsts.into_iter().map(|_| <&mut [u8]>::default()).collect());
        }
        self.handle
            .block_on(self.fill(dsts, offset))
            .map_err(|error| self.fail(error))
    }

    fn costly_requests(&self) -> bool {
        true
    }

    /// The requests its flow lets start now (a read-ahead's window in flight takes one).
    fn requests_at_once(&self) -> usize {
        self.fetcher.flow.available().max(1)
    }

    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        // Without threads of its own, a load still works, on rayon's pool.
        let pool = self.pool.get_or_init(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.threads)
                .thread_name(|index| format!("keycodec-fetch-{index}"))
                .build()
                .ok()
        });
        pool.as_ref().map(|pool| (self.range_size, pool))
    }
}
