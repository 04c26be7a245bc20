//! One object in object storage as a source of bytes at explicit offsets: every read is one or
//! more ranged GETs, each conditional on the version the load started with, as many in flight
//! as the transfer's [`Flow`] allows; reads in order (a decoder's stream) are served from
//! ranges fetched ahead of them.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use keycodec_core::transport::{Dst, Filling, ReadAt};
use keycodec_core::{Error, Result};

use super::flow::Flow;
use super::{store_error, ObjectInfo};

/// Where the bytes read are also written: a file the object is being downloaded into, at the
/// same offsets, and which ranges have been.
pub(super) struct Tee {
    pub(super) file: File,
    pub(super) written: Mutex<Vec<Range<u64>>>,
}

impl Tee {
    /// The ranges of `0..size` not written yet.
    pub(super) fn gaps(&self, size: u64) -> Vec<Range<u64>> {
        let mut written = self
            .written
            .lock()
            .map(|written| written.clone())
            .unwrap_or_default();
        written.sort_by_key(|range| range.start);
        let mut gaps = Vec::new();
        let mut next = 0;
        for range in written {
            if range.start > next {
                gaps.push(next..range.start);
            }
            next = next.max(range.end);
        }
        if next < size {
            gaps.push(next..size);
        }
        gaps
    }
}

/// One version of one object, fetched by ranged GETs conditional on that version; shared by
/// the requests of a transfer (and its read-ahead's tasks).
pub(super) struct Fetcher {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) location: ObjectPath,
    pub(super) info: ObjectInfo,
    pub(super) tee: Option<Tee>,
    pub(super) flow: Flow,
}

impl Fetcher {
    /// One ranged GET of the bytes of `dsts`, one after the other from `start`, once the flow
    /// admits it: the bytes are copied into each destination in turn as they arrive (and
    /// written to the tee), and the destinations returned initialised.
    async fn fetch_vectored<'b>(
        &self,
        start: u64,
        dsts: Vec<Dst<'b>>,
    ) -> Result<Vec<&'b mut [u8]>> {
        let len: u64 = dsts.iter().map(|dst| dst.len() as u64).sum();
        let mut filling = Filling::new(dsts);
        self.fetch_range(start..start + len, &mut |chunk| {
            filling
                .write(chunk)
                .then_some(())
                .ok_or_else(|| Error::Malformed("the store sent more bytes than asked".into()))
        })
        .await?;
        filling.finish().ok_or(Error::Truncated {
            context: "a range of the object",
        })
    }

    /// One ranged GET of `range`, once the flow admits it, conditional on the object's
    /// version: each chunk handed to `take` as it arrives (and written to the tee); the range
    /// noted as written once the tee holds all of it.
    async fn fetch_range(
        &self,
        range: Range<u64>,
        take: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
    ) -> Result<()> {
        let _permit = self.flow.admit().await;
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            // `If-Match` compares strongly: a weak ETag (`W/"…"`, a server that may re-encode)
            // never matches, so the version is checked on the response instead.
            if_match: self.info.e_tag.clone().filter(|tag| !is_weak(tag)),
            version: self.info.version.clone(),
            ..GetOptions::default()
        };
        let response = self
            .store
            .get_opts(&self.location, options)
            .await
            .map_err(|err| self.store_failure(err))?;
        if let (Some(expected), Some(found)) = (&self.info.e_tag, &response.meta.e_tag) {
            if opaque(expected) != opaque(found) {
                return Err(self.changed());
            }
        }
        let mut body = response.into_stream();
        let mut received = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| self.store_failure(err))?;
            if received + chunk.len() as u64 > range.end - range.start {
                return Err(Error::Malformed(
                    "the store sent more bytes than asked".into(),
                ));
            }
            take(&chunk)?;
            if let Some(tee) = &self.tee {
                keycodec_core::transport::write_all_at(&tee.file, &chunk, range.start + received)
                    .map_err(|err| Error::io("write the downloaded bytes to", err))?;
            }
            received += chunk.len() as u64;
        }
        if received != range.end - range.start {
            return Err(Error::Truncated {
                context: "a range of the object",
            });
        }
        self.flow.completed(received);
        if let Some(tee) = &self.tee {
            if let Ok(mut written) = tee.written.lock() {
                written.push(range);
            }
        }
        Ok(())
    }

    /// `range` of the object into the tee only, in ranged GETs of `piece` bytes, as many in
    /// flight as the flow allows, reporting bytes received to `progress`.
    pub(super) async fn download(
        &self,
        range: Range<u64>,
        piece: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        use futures_util::stream::{self, TryStreamExt};
        let piece = piece.max(1);
        // As many pieces as the range holds, computed, never listed: a size is a claim.
        let pieces = (range.end.saturating_sub(range.start)).div_ceil(piece);
        let fetches = (0..pieces).map(|index| {
            let start = range.start + index * piece;
            let end = (start + piece).min(range.end);
            async move {
                self.fetch_range(start..end, &mut |_| Ok(())).await?;
                progress(end - start);
                Ok::<(), Error>(())
            }
        });
        // The flow, not the stream, bounds the requests in flight; the stream only keeps
        // enough of them waiting.
        stream::iter(fetches)
            .buffer_unordered(super::MAX_CONCURRENCY_CEILING)
            .try_collect::<Vec<()>>()
            .await
            .map(drop)
    }

    fn store_failure(&self, err: object_store::Error) -> Error {
        match err {
            object_store::Error::Precondition { .. } => self.changed(),
            other => store_error("read a range of", other),
        }
    }

    fn changed(&self) -> Error {
        Error::ObjectChanged {
            expected: self
                .info
                .e_tag
                .clone()
                .or_else(|| self.info.version.clone())
                .unwrap_or_default(),
        }
    }
}

/// Bytes the first GET of a load asks for: a container's header and, for most circuits, its
/// verifying key, so that what a decoder reads first is in hand after one round trip.
pub(super) const OPENING: u64 = 64 << 10;

/// The object's first `len` bytes (all of them if it is smaller), by one ranged GET, and what
/// its response says of the object: its whole size, ETag and version. A load's first round
/// trip thus both describes the object and brings the bytes read first (a HEAD and then a GET
/// would take two). `Ok(None)` when the store did not answer so (a missing or empty object,
/// a server that ignores ranges, a failed request): ask with a HEAD, whose answer or error
/// stands.
///
/// # Errors
///
/// [`Error::Malformed`] when the store sent more bytes than the range it reported.
pub(super) async fn opening(
    store: &dyn ObjectStore,
    location: &ObjectPath,
    len: u64,
) -> Result<Option<(ObjectInfo, Vec<u8>)>> {
    let options = GetOptions {
        range: Some(GetRange::Bounded(0..len)),
        ..GetOptions::default()
    };
    let Ok(response) = store.get_opts(location, options).await else {
        return Ok(None);
    };
    // `object_store` checked the reported range against the one asked for and the size it
    // reports; the bytes are bounded by that range, never by the size.
    let expected = len.min(response.meta.size);
    if response.range != (0..expected) {
        return Ok(None);
    }
    let info = ObjectInfo::from(response.meta.clone());
    let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    let mut body = response.into_stream();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return Ok(None);
        };
        if (bytes.len() + chunk.len()) as u64 > expected {
            return Err(Error::Malformed(
                "the store sent more bytes than asked".into(),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes.len() as u64 == expected).then_some((info, bytes)))
}

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
}

impl ObjectSource {
    /// The store's failure that made a read fail, if one did.
    pub(super) fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .ok()
            .and_then(|mut failure| failure.take())
    }

    fn fail(&self, error: Error) -> io::Error {
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(error);
        }
        io::Error::other("object storage failed (the object's error says why)")
    }

    fn size(&self) -> u64 {
        self.fetcher.info.size
    }

    /// Hands the object's first bytes, already fetched ([`opening`]), to the read-ahead: the
    /// reader's first reads from offset 0 take them without a request.
    pub(super) fn seed(&self, bytes: Vec<u8>) {
        if let Ok(mut readahead) = self.readahead.lock() {
            readahead.seed(bytes);
        }
    }

    /// Fills `buf` with the object's bytes from `offset` (within the object): ranged GETs
    /// of a piece each ([`super::range_piece`]), all sent at once (the flow lets as many
    /// through as it keeps in flight).
    fn fetch(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let piece = super::range_piece(buf.len() as u64, self.threads, self.range_size);
        let step = usize::try_from(piece).unwrap_or(self.range_size).max(1);
        let fetcher = &self.fetcher;
        let requests = buf.chunks_mut(step).enumerate().map(|(index, piece)| {
            fetcher.fetch_vectored(offset + (index * step) as u64, vec![Dst::Init(piece)])
        });
        let fetched = self
            .handle
            .block_on(futures_util::future::try_join_all(requests));
        fetched.map(drop).map_err(|error| self.fail(error))
    }
}

/// Ranges fetched ahead of a reader that reads in order (a decoder reading a stream through
/// a small buffer), so that its reads do not each wait for a round trip: the first window
/// small, each next one twice as large up to [`LARGEST_WINDOW`], as many in flight as the
/// flow allows, and never more bytes ahead than [`AHEAD_PER_TAKEN`] times what the reader has
/// taken since it last moved elsewhere (nor than the source's `read_ahead` bound). A read elsewhere drops
/// the windows fetched ahead.
#[derive(Default)]
pub(super) struct ReadAhead {
    /// Where the reader reads next; the first window starts there.
    at: u64,
    /// The next window's start and length.
    next: u64,
    window: u64,
    /// Bytes taken since the reader last moved elsewhere.
    taken: u64,
    windows: VecDeque<(u64, JoinHandle<Result<Vec<u8>>>)>,
    /// The front window's bytes once fetched, and how many of them were taken.
    front: Option<(u64, Vec<u8>)>,
}

/// The first window of a read-ahead.
const FIRST_WINDOW: u64 = 256 << 10;
/// Bytes fetched ahead per byte the reader has taken: a reader that takes a 4 KiB verifying
/// key and moves elsewhere (a bulk read) has had a first window fetched for nothing, a
/// decoder that reads on has 64 windows in flight after 1 MiB.
const AHEAD_PER_TAKEN: u64 = 64;
/// The largest window: small enough that a stream of 10 MB/s brings one in a tenth of a
/// second (the reader waits for a whole window), so that many are in flight within the bound
/// on bytes ahead.
const LARGEST_WINDOW: u64 = 1 << 20;

impl ReadAhead {
    /// Drops the windows fetched ahead and starts again at `at`.
    fn restart(&mut self, at: u64) {
        for (_, window) in self.windows.drain(..) {
            window.abort();
        }
        self.at = at;
        self.next = at;
        self.window = FIRST_WINDOW;
        self.taken = 0;
        self.front = None;
    }

    /// Starts again at 0 with `bytes`, the object's first ones, as the front window.
    fn seed(&mut self, bytes: Vec<u8>) {
        self.restart(0);
        if !bytes.is_empty() {
            self.next = bytes.len() as u64;
            self.front = Some((0, bytes));
        }
    }

    /// Starts fetching windows until enough are ahead of the reader.
    fn fill(&mut self, source: &ObjectSource) {
        let size = source.size();
        let ahead_allowed =
            (AHEAD_PER_TAKEN * self.taken).clamp(FIRST_WINDOW, source.read_ahead.max(FIRST_WINDOW));
        while self.next < size && self.next - self.at < ahead_allowed {
            let start = self.next;
            let len = self.window.min(size - start);
            let fetcher = Arc::clone(&source.fetcher);
            let task = source.handle.spawn(async move {
                let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
                fetcher
                    .fetch_vectored(start, vec![Dst::Init(&mut bytes)])
                    .await?;
                Ok(bytes)
            });
            self.windows.push_back((start, task));
            self.next = start + len;
            self.window = (self.window * 2).min(LARGEST_WINDOW);
        }
    }

    /// Copies into `buf` what the front window holds from the reader's position (waiting
    /// for it); returns how many bytes (0 only at the end of the object).
    fn read(&mut self, source: &ObjectSource, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset != self.at || self.window == 0 {
            self.restart(offset);
        }
        self.fill(source);
        if self.front.is_none() {
            let Some((start, window)) = self.windows.pop_front() else {
                return Ok(0);
            };
            let bytes = match source.handle.block_on(window) {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(error)) => return Err(source.fail(error)),
                Err(_) => {
                    return Err(source.fail(Error::Internal("a read-ahead task failed".into())))
                }
            };
            self.front = Some((start, bytes));
        }
        let Some((start, bytes)) = &self.front else {
            return Ok(0);
        };
        let from = usize::try_from(self.at - start).unwrap_or(usize::MAX);
        let rest = bytes.get(from..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        let (head, _) = buf.split_at_mut(n);
        head.copy_from_slice(rest.get(..n).unwrap_or_default());
        self.at += n as u64;
        self.taken += n as u64;
        if n == rest.len() {
            self.front = None;
        }
        Ok(n)
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        for (_, window) in self.windows.drain(..) {
            window.abort();
        }
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
        match self.readahead.lock() {
            Ok(mut readahead) => readahead.read(self, head, offset),
            Err(_) => self.fetch(head, offset).map(|()| n),
        }
    }

    /// The requests at once (as many in flight as the flow allows), each a ranged GET
    /// conditional on the object's version.
    fn read_exact_many_at(&self, requests: &mut [(&mut [u8], u64)]) -> io::Result<()> {
        use futures_util::stream::{self, TryStreamExt};
        for (buf, offset) in requests.iter() {
            let end = offset.checked_add(buf.len() as u64);
            if end.is_none_or(|end| end > self.size()) {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        let fetcher = &self.fetcher;
        let fetches = requests
            .iter_mut()
            .filter(|(buf, _)| !buf.is_empty())
            .map(|(buf, offset)| fetcher.fetch_vectored(*offset, vec![Dst::Init(buf)]));
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
            .block_on(self.fetcher.fetch_vectored(offset, dsts))
            .map_err(|error| self.fail(error))
    }

    fn costly_requests(&self) -> bool {
        true
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

/// Whether an ETag is weak (`W/"…"`).
fn is_weak(tag: &str) -> bool {
    tag.starts_with("W/")
}

/// An ETag's opaque part, for the weak comparison (RFC 9110 8.8.3.2): `W/"x"` and `"x"` match.
fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}
