//! One object in object storage as a source of bytes at explicit offsets: every read is one or
//! more ranged GETs sent at once, each conditional on the version the load started with.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::sync::Mutex;

use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::runtime::Handle;

use codec_core::transport::{Dst, ReadAt};
use codec_core::{Error, Result};

use crate::{store_error, ObjectInfo};

/// Where the bytes read are also written: a file the object is being downloaded into, at the
/// same offsets, and which ranges have been.
pub(super) struct Tee<'a> {
    pub(super) file: &'a File,
    pub(super) written: Mutex<Vec<Range<u64>>>,
}

impl Tee<'_> {
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

/// An object read by ranged GETs (see the module docs). A failure of the store is kept (the
/// first one) for the caller: the reader above sees only that a read failed.
pub(super) struct ObjectSource<'a> {
    pub(super) store: &'a dyn ObjectStore,
    pub(super) handle: &'a Handle,
    pub(super) location: &'a ObjectPath,
    pub(super) info: &'a ObjectInfo,
    /// Bytes per ranged GET (a power of two, a multiple of the core's bulk step).
    pub(super) range_size: usize,
    /// The threads bulk reads run on: as many ranged GETs in flight as it has threads.
    pub(super) pool: Option<rayon::ThreadPool>,
    pub(super) tee: Option<Tee<'a>>,
    pub(super) failure: Mutex<Option<Error>>,
}

impl ObjectSource<'_> {
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

    /// Fills `buf` with the object's bytes from `offset` (within the object): one ranged
    /// GET per [`ObjectSource::range_size`] bytes, all sent at once.
    fn fetch(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let step = self.range_size.max(1);
        let requests = buf
            .chunks_mut(step)
            .enumerate()
            .map(|(index, piece)| self.fetch_one(offset + (index * step) as u64, piece));
        let fetched = self
            .handle
            .block_on(futures_util::future::try_join_all(requests));
        fetched.map(drop).map_err(|error| self.fail(error))
    }

    /// One ranged GET into `dst`, conditional on the object's version; the bytes are copied
    /// into `dst` as they arrive (and written to the tee).
    async fn fetch_one(&self, start: u64, dst: &mut [u8]) -> Result<()> {
        self.fetch_vectored(start, vec![Dst::Init(dst)])
            .await
            .map(drop)
    }

    /// One ranged GET of the bytes of `dsts`, one after the other from `start`, conditional
    /// on the object's version: the bytes are copied into each destination in turn as they
    /// arrive (and written to the tee), and the destinations returned initialised.
    async fn fetch_vectored<'b>(
        &self,
        start: u64,
        dsts: Vec<Dst<'b>>,
    ) -> Result<Vec<&'b mut [u8]>> {
        let len: u64 = dsts.iter().map(|dst| dst.len() as u64).sum();
        let end = start + len;
        let options = GetOptions {
            range: Some(GetRange::Bounded(start..end)),
            // `If-Match` compares strongly: a weak ETag (`W/"…"`, a server that may re-encode)
            // never matches, so the version is checked on the response instead.
            if_match: self.info.e_tag.clone().filter(|tag| !is_weak(tag)),
            version: self.info.version.clone(),
            ..GetOptions::default()
        };
        let response = self
            .store
            .get_opts(self.location, options)
            .await
            .map_err(|err| self.store_failure(err))?;
        if let (Some(expected), Some(found)) = (&self.info.e_tag, &response.meta.e_tag) {
            if opaque(expected) != opaque(found) {
                return Err(self.changed());
            }
        }
        let mut body = response.into_stream();
        let mut filling = Filling::new(dsts);
        let mut received = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| self.store_failure(err))?;
            if !filling.write(&chunk) {
                return Err(Error::Malformed(
                    "the store sent more bytes than asked".into(),
                ));
            }
            if let Some(tee) = &self.tee {
                codec_core::transport::write_all_at(tee.file, &chunk, start + received)
                    .map_err(|err| Error::io("write the downloaded bytes to", err))?;
            }
            received += chunk.len() as u64;
        }
        let filled = filling.finish().ok_or(Error::Truncated {
            context: "a range of the object",
        })?;
        if let Some(tee) = &self.tee {
            if let Ok(mut written) = tee.written.lock() {
                written.push(start..end);
            }
        }
        Ok(filled)
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

impl ReadAt for ObjectSource<'_> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.info.size) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.fetch(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let available = self.info.size.saturating_sub(offset);
        let n = usize::try_from(available).map_or(buf.len(), |a| a.min(buf.len()));
        let (head, _) = buf.split_at_mut(n);
        self.fetch(head, offset)?;
        Ok(n)
    }

    /// The requests at once (as many in flight as the pool has threads, times four: they are
    /// small), each a ranged GET conditional on the object's version.
    fn read_exact_many_at(&self, requests: &mut [(&mut [u8], u64)]) -> io::Result<()> {
        use futures_util::stream::{self, TryStreamExt};
        for (buf, offset) in requests.iter() {
            let end = offset.checked_add(buf.len() as u64);
            if end.is_none_or(|end| end > self.info.size) {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        let in_flight = 4 * self
            .pool
            .as_ref()
            .map_or(8, rayon::ThreadPool::current_num_threads);
        let fetches = requests
            .iter_mut()
            .filter(|(buf, _)| !buf.is_empty())
            .map(|(buf, offset)| self.fetch_one(*offset, buf));
        let fetched = self.handle.block_on(
            stream::iter(fetches)
                .buffer_unordered(in_flight.max(1))
                .try_collect::<Vec<()>>(),
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
        if end.is_none_or(|end| end > self.info.size) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if len == 0 {
            return Ok(dsts.into_iter().map(|_| <&mut [u8]>::default()).collect());
        }
        self.handle
            .block_on(self.fetch_vectored(offset, dsts))
            .map_err(|error| self.fail(error))
    }

    fn costly_requests(&self) -> bool {
        true
    }

    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        self.pool.as_ref().map(|pool| (self.range_size, pool))
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

/// Destinations filled in turn with the bytes of one response.
struct Filling<'b> {
    /// Those not yet full, the first being filled; each with how many of its bytes are
    /// written.
    pending: std::collections::VecDeque<(Dst<'b>, usize)>,
    full: Vec<&'b mut [u8]>,
}

impl<'b> Filling<'b> {
    fn new(dsts: Vec<Dst<'b>>) -> Self {
        let mut filling = Filling {
            full: Vec::with_capacity(dsts.len()),
            pending: dsts.into_iter().map(|dst| (dst, 0)).collect(),
        };
        filling.retire();
        filling
    }

    /// Writes `bytes` next; `false` if they go past the last destination.
    fn write(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            let Some((dst, written)) = self.pending.front_mut() else {
                return false;
            };
            let n = (dst.len() - *written).min(bytes.len());
            let (now, later) = bytes.split_at(n);
            let range = *written..*written + n;
            match dst {
                Dst::Init(buf) => match buf.get_mut(range) {
                    Some(to) => to.copy_from_slice(now),
                    None => return false,
                },
                Dst::Uninit(buf) => match buf.get_mut(range) {
                    Some(to) => {
                        to.write_copy_of_slice(now);
                    }
                    None => return false,
                },
            }
            *written += n;
            bytes = later;
            self.retire();
        }
        true
    }

    /// Moves the full destinations at the front to `full`.
    fn retire(&mut self) {
        while self
            .pending
            .front()
            .is_some_and(|(dst, written)| *written == dst.len())
        {
            let Some((dst, _)) = self.pending.pop_front() else {
                break;
            };
            self.full.push(match dst {
                Dst::Init(buf) => buf,
                // SAFETY: a destination is retired only once `written == dst.len()`, and
                // `write` advances `written` by exactly the bytes it copied into
                // `buf[written..written + n]`, from the start: every byte of `buf` was written.
                // The test `vectored_reads_fill_every_destination` checks it byte for byte.
                Dst::Uninit(buf) => unsafe { buf.assume_init_mut() },
            });
        }
    }

    /// Every destination, initialised, once all are full.
    fn finish(self) -> Option<Vec<&'b mut [u8]>> {
        self.pending.is_empty().then_some(self.full)
    }
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;

    use super::*;

    /// Destinations of every size, initialised or not, filled from chunks that straddle
    /// them, come back holding exactly the bytes sent, in order; too few or too many bytes
    /// are refused.
    #[test]
    fn vectored_reads_fill_every_destination() {
        let data: Vec<u8> = (0..30_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let sizes = [0usize, 1, 4096, 3, 2000, 3900];
        for chunk in [1usize, 7, 1000, 10_000] {
            let mut inits: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0xAA; n]).collect();
            let mut uninits: Vec<Vec<u8>> = sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
            let mut dsts = Vec::new();
            for (i, (init, uninit)) in inits.iter_mut().zip(&mut uninits).enumerate() {
                dsts.push(Dst::Init(init.as_mut_slice()));
                let n = sizes[i];
                let spare: &mut [MaybeUninit<u8>] = &mut uninit.spare_capacity_mut()[..n];
                dsts.push(Dst::Uninit(spare));
            }
            let total: usize = dsts.iter().map(Dst::len).sum();
            let mut filling = Filling::new(dsts);
            for piece in data[..total].chunks(chunk) {
                assert!(filling.write(piece));
            }
            assert!(
                !filling.write(&[1]),
                "a byte past the last destination is refused"
            );
            let filled = filling.finish().expect("every destination full");
            let joined: Vec<u8> = filled.iter().flat_map(|dst| dst.iter().copied()).collect();
            assert_eq!(joined, &data[..total], "chunks of {chunk}");
        }
        let mut short = vec![0u8; 10];
        let mut filling = Filling::new(vec![Dst::Init(&mut short)]);
        assert!(filling.write(&[1; 9]));
        assert!(filling.finish().is_none(), "a short response is no fill");
    }
}
