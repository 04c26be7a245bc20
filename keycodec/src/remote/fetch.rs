//! Ranged GETs of one version of one object, admitted by the transfer's [`Flow`], the bytes
//! copied into their destinations as they arrive (and into a download's file).

use std::fs::File;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};

use keycodec_core::transport::{Dst, Filling};
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
    /// One ranged GET of the bytes of `dsts`, one after the other from `start`, once
    /// `admission` lets it: the bytes are copied into each destination in turn as they arrive
    /// (and written to the tee), and the destinations returned initialised.
    pub(super) async fn fetch_vectored<'b>(
        &self,
        start: u64,
        dsts: Vec<Dst<'b>>,
        admission: Admission,
    ) -> Result<Vec<&'b mut [u8]>> {
        let len: u64 = dsts.iter().map(|dst| dst.len() as u64).sum();
        let mut filling = Filling::new(dsts);
        self.fetch_into(start..start + len, &mut filling, admission)
            .await?;
        filling.finish().ok_or(Error::Truncated {
            context: "a range of the object",
        })
    }

    /// One ranged GET of `range`, written next into `filling` as it arrives.
    pub(super) async fn fetch_into(
        &self,
        range: Range<u64>,
        filling: &mut Filling<'_>,
        admission: Admission,
    ) -> Result<()> {
        let sent = self.send(range, admission).await?;
        self.receive(sent, &mut |chunk| write_next(filling, chunk))
            .await
    }

    /// One ranged GET of `range`, once the flow admits it, conditional on the object's
    /// version: each chunk handed to `take` as it arrives (and written to the tee); the range
    /// noted as written once the tee holds all of it.
    async fn fetch_range(
        &self,
        range: Range<u64>,
        take: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
    ) -> Result<()> {
        let sent = self.send(range, Admission::Flow).await?;
        self.receive(sent, take).await
    }

    /// Sends a ranged GET of `range`, conditional on the object's version, once `admission`
    /// lets it, and waits for its answer to begin (its body is [`Fetcher::receive`]d).
    pub(super) async fn send(&self, range: Range<u64>, admission: Admission) -> Result<Sent<'_>> {
        let permit = match admission {
            Admission::Flow => self.flow.admit().await,
            Admission::Now => None,
        };
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
        Ok(Sent {
            permit,
            range,
            response,
        })
    }

    /// The body of a GET [`Fetcher::send`] sent: each chunk handed to `take` as it arrives
    /// (and written to the tee); the range noted as written once the tee holds all of it.
    pub(super) async fn receive(
        &self,
        sent: Sent<'_>,
        take: &mut (dyn FnMut(&[u8]) -> Result<()> + Send),
    ) -> Result<()> {
        let Sent {
            permit,
            range,
            response,
        } = sent;
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
        // The flow measures the requests it admitted, not those sent outside it.
        if permit.is_some() {
            self.flow.completed(received);
        }
        drop(permit);
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

/// When a GET is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admission {
    /// Once the transfer's flow has room for it (it holds its place until its body is
    /// received): a bulk read's or a read-ahead's.
    Flow,
    /// At once, outside the flow: the few that bytes held ahead of the reads wait on (a
    /// held range's own fetch, or its fetch again), so that no read holding a place in the
    /// flow waits on a request that needs one.
    Now,
}

/// A GET sent, its answer begun, holding its place in the flow until its body is received.
pub(super) struct Sent<'f> {
    permit: Option<tokio::sync::SemaphorePermit<'f>>,
    range: Range<u64>,
    response: object_store::GetResult,
}

/// Writes `chunk` next into `filling`.
///
/// # Errors
///
/// [`Error::Malformed`] when it goes past the destinations.
pub(super) fn write_next(filling: &mut Filling<'_>, chunk: &[u8]) -> Result<()> {
    filling
        .write(chunk)
        .then_some(())
        .ok_or_else(|| Error::Malformed("the store sent more bytes than asked".into()))
}

/// Whether an ETag is weak (`W/"…"`).
fn is_weak(tag: &str) -> bool {
    tag.starts_with("W/")
}

/// An ETag's opaque part, for the weak comparison (RFC 9110 8.8.3.2): `W/"x"` and `"x"` match.
fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}
