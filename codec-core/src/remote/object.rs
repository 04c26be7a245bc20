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

use crate::error::{Error, Result};
use crate::source::ReadAt;

use super::{store_error, ObjectInfo};

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
        let end = start + dst.len() as u64;
        let options = GetOptions {
            range: Some(GetRange::Bounded(start..end)),
            if_match: self.info.e_tag.clone(),
            version: self.info.version.clone(),
            ..GetOptions::default()
        };
        let response = self
            .store
            .get_opts(self.location, options)
            .await
            .map_err(|err| self.store_failure(err))?;
        let mut body = response.into_stream();
        let mut filled = 0usize;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| self.store_failure(err))?;
            let target = dst
                .get_mut(filled..filled + chunk.len())
                .ok_or_else(|| Error::Malformed("the store sent more bytes than asked".into()))?;
            target.copy_from_slice(&chunk);
            filled += chunk.len();
        }
        if filled != dst.len() {
            return Err(Error::Truncated {
                context: "a range of the object",
            });
        }
        if let Some(tee) = &self.tee {
            crate::file::write_all_at(tee.file, dst, start)
                .map_err(|err| Error::io("write the downloaded bytes to", err))?;
            if let Ok(mut written) = tee.written.lock() {
                written.push(start..end);
            }
        }
        Ok(())
    }

    fn store_failure(&self, err: object_store::Error) -> Error {
        match err {
            object_store::Error::Precondition { .. } => Error::ObjectChanged {
                expected: self
                    .info
                    .e_tag
                    .clone()
                    .or_else(|| self.info.version.clone())
                    .unwrap_or_default(),
            },
            other => store_error("read a range of", other),
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

    fn bulk_plan(&self) -> Option<(usize, &rayon::ThreadPool)> {
        self.pool.as_ref().map(|pool| (self.range_size, pool))
    }
}
