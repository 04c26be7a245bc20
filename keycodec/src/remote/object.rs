//! One object in object storage as a source of bytes at explicit offsets: every read is one or
//! more ranged GETs, each conditional on the version the load started with, as many in flight
//! as the transfer's flow allows ([`Fetcher`]); reads in order (a decoder's stream) are served from
//! ranges fetched ahead of them.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::runtime::Handle;

use keycodec_core::transport::{Dst, ReadAt};
use keycodec_core::{Error, Result};

use super::fetch::Fetcher;
use super::readahead::ReadAhead;
use super::ObjectInfo;

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
    /// The object's last bytes, fetched as a load starts ([`ObjectSource::fetch_tail`]).
    pub(super) tail: OnceLock<Tail>,
}

/// The object's last bytes fetched as a load starts: a container's end (the circuit's record
/// after the payload), which a decoder reads last, after a bulk read, would otherwise cost a
/// round trip of its own.
pub(super) const TAIL: u64 = 64 << 10;

/// The object's bytes from `start` to its end, being fetched or fetched.
pub(super) struct Tail {
    start: u64,
    state: Mutex<TailState>,
}

enum TailState {
    Fetching(tokio::task::JoinHandle<Result<Vec<u8>>>),
    Fetched(Vec<u8>),
    Failed,
}

impl Drop for Tail {
    fn drop(&mut self) {
        if let Ok(TailState::Fetching(task)) = self.state.get_mut() {
            task.abort();
        }
    }
}

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

    /// Hands the object's first bytes, already fetched ([`opening`]), to the read-ahead: the
    /// reader's first reads from offset 0 take them without a request.
    pub(super) fn seed(&self, bytes: Vec<u8>) {
        if let Ok(mut readahead) = self.readahead.lock() {
            readahead.seed(bytes);
        }
    }

    /// Starts fetching the object's last bytes (at most [`TAIL`], none of the first
    /// `opened`, which the reader has already): reads that fall within them take them
    /// instead of a request.
    pub(super) fn fetch_tail(&self, opened: u64) {
        let start = self.size().saturating_sub(TAIL).max(opened);
        if start >= self.size() || self.tail.get().is_some() {
            return;
        }
        let fetcher = Arc::clone(&self.fetcher);
        let task = self.handle.spawn(async move {
            let len = usize::try_from(fetcher.info.size.saturating_sub(start)).unwrap_or(0);
            let mut bytes = vec![0u8; len];
            fetcher
                .fetch_vectored(start, vec![Dst::Init(&mut bytes)])
                .await?;
            Ok(bytes)
        });
        let tail = Tail {
            start,
            state: Mutex::new(TailState::Fetching(task)),
        };
        let _ = self.tail.set(tail);
    }

    /// Fills `buf` with the bytes from `offset` out of the tail, if it holds them all and
    /// its fetch succeeded (waiting for it); `false` otherwise (a failed fetch is left to
    /// the read's own request to report).
    fn read_tail(&self, buf: &mut [u8], offset: u64) -> bool {
        let Some(tail) = self.tail.get().filter(|tail| offset >= tail.start) else {
            return false;
        };
        let Ok(mut state) = tail.state.lock() else {
            return false;
        };
        if let TailState::Fetching(task) = &mut *state {
            *state = match self.handle.block_on(task) {
                Ok(Ok(bytes)) => TailState::Fetched(bytes),
                _ => TailState::Failed,
            };
        }
        let TailState::Fetched(bytes) = &*state else {
            return false;
        };
        let held = usize::try_from(offset - tail.start)
            .ok()
            .and_then(|from| bytes.get(from..from.checked_add(buf.len())?));
        match held {
            Some(held) => {
                buf.copy_from_slice(held);
                true
            }
            None => false,
        }
    }

    /// Fills `buf` with the object's bytes from `offset` (within the object): ranged GETs
    /// of a piece each ([`super::range_piece`]), all sent at once (the flow lets as many
    /// through as it keeps in flight).
    fn fetch(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let piece = super::range_piece(buf.len() as u64, self.requests_at_once(), self.range_size);
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

impl ReadAt for ObjectSource {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.size()) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if self.read_tail(buf, offset) {
            return Ok(());
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
        if self.read_tail(head, offset) {
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
