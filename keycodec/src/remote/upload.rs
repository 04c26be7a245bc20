//! A multipart upload as a `Write`: bytes are cut into parts of a fixed size, a few of which
//! are in flight (and in memory) at once: as many as the upload's [`Growth`] allows, which
//! adds parts in flight while the upload's throughput grows with them.

use std::io::{self, Write};

use object_store::{MultipartUpload, PutPayloadMut};
use tokio::runtime::Handle;
use tokio::task::{JoinHandle, JoinSet};

use super::flow::Growth;
use super::{store_error, RemoteOptions};
use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::{Error, Result};

/// Writes into a multipart upload. Nothing is stored under the object's name until
/// [`UploadWriter::finish`] completes the upload; [`UploadWriter::abort`] (or an error, or
/// the process dying first) leaves no object behind.
pub(super) struct UploadWriter<'a> {
    handle: &'a Handle,
    /// The request starting the upload, until the first write (which needs the upload and
    /// learns its part size): sent before the caller's encoding begins, so that its round
    /// trip overlaps the work before the first byte.
    started: Option<JoinHandle<object_store::Result<Box<dyn MultipartUpload>>>>,
    size: Option<u64>,
    options: RemoteOptions,
    upload: Option<Parts>,
    part_size: usize,
    growth: Growth,
    /// Bytes handed to the upload so far.
    handed: u64,
    failure: Option<Error>,
    progress: &'a (dyn Fn(u64) + Sync),
}

impl<'a> UploadWriter<'a> {
    /// Writes into the upload `started` starts, of `size` bytes if known.
    pub(super) fn new(
        handle: &'a Handle,
        started: JoinHandle<object_store::Result<Box<dyn MultipartUpload>>>,
        size: Option<u64>,
        options: RemoteOptions,
        progress: &'a (dyn Fn(u64) + Sync),
    ) -> Self {
        UploadWriter {
            handle,
            started: Some(started),
            size,
            options,
            upload: None,
            part_size: options.part_for(size),
            growth: Growth::new(options.upload_concurrency, options.upload_concurrency),
            handed: 0,
            failure: None,
            progress,
        }
    }

    /// The upload, its parts sized once the first bytes are here: for the size given, or
    /// else for the container whose header `first` begins with (a save's), or else as
    /// configured.
    fn parts(&mut self, first: &[u8]) -> Option<&mut Parts> {
        if let Some(started) = self.started.take() {
            let started = match self.handle.block_on(started) {
                Ok(Ok(started)) => started,
                Ok(Err(err)) => {
                    self.failure = Some(store_error("start an upload of", err));
                    return None;
                }
                Err(_) => {
                    self.failure = Some(Error::Internal(
                        "the task starting the upload failed".into(),
                    ));
                    return None;
                }
            };
            let size = self.size.or_else(|| {
                let header = Header::from_bytes(first.get(..HEADER_LEN)?).ok()?;
                Some(header.container_len(HEADER_LEN))
            });
            self.part_size = self.options.part_for(size);
            let start = self.options.upload_concurrency.max(1);
            self.growth = Growth::new(start, (self.options.memory / self.part_size).max(start));
            self.upload = Some(Parts::new(started, self.part_size));
        }
        self.upload.as_mut()
    }

    /// Uploads the last part and completes the upload: the object appears, whole.
    pub(super) fn finish(mut self) -> Result<()> {
        self.parts(&[]);
        let Some(upload) = self.upload.take() else {
            return Err(self.failure.take().unwrap_or_else(|| self.failed()));
        };
        // `finish` aborts the upload itself when a part or the completion fails.
        self.handle
            .block_on(upload.finish())
            .map_err(|err| store_error("complete the upload of", err))
    }

    /// Aborts the upload (the store drops the parts it has); returns the failure of a part,
    /// if one made the writer fail, else `error`.
    pub(super) fn abort(mut self, error: Error) -> Error {
        self.parts(&[]);
        if let Some(mut upload) = self.upload.take() {
            // The error that stopped the save is the one to report.
            self.handle.block_on(upload.abort());
        }
        self.failure.take().unwrap_or(error)
    }

    fn failed(&self) -> Error {
        Error::Internal("the upload was used after it failed".into())
    }
}

impl Write for UploadWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.parts(buf).is_none() {
            return Err(io::Error::other("the upload failed"));
        }
        // A part at a time, each after waiting for room: a whole polynomial handed over at
        // once never has more parts in memory than the growth allows.
        for part in buf.chunks(self.part_size.max(1)) {
            let limit = self.growth.limit();
            let Some(upload) = self.upload.as_mut() else {
                return Err(io::Error::other("the upload failed"));
            };
            if let Err(err) = self.handle.block_on(upload.wait_for_capacity(limit)) {
                self.failure = Some(store_error("upload a part of", err));
                return Err(io::Error::other("an upload of a part failed"));
            }
            // Spawning the part's upload needs the runtime's context.
            let _context = self.handle.enter();
            // A write that fills a part hands it over (the upload sends it). Once the parts
            // in flight are at the limit, each part handed over waited for one to complete:
            // its size is what the upload carried meanwhile.
            let part_size = self.part_size.max(1) as u64;
            let parts_before = self.handed / part_size;
            self.handed += part.len() as u64;
            if self.handed / part_size > parts_before && parts_before >= limit as u64 {
                self.growth.completed(part_size);
            }
            upload.write(part);
            (self.progress)(part.len() as u64);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A multipart upload's parts: cut from the bytes written, each sent as it fills, with as
/// many in flight as the caller waits for. As object_store's `WriteMultipart` drives them,
/// except that a failure is reported as itself: `WriteMultipart` reports a failed abort's
/// error in place of the part's or the completion's that made it abort.
struct Parts {
    upload: Box<dyn MultipartUpload>,
    buffer: PutPayloadMut,
    part_size: usize,
    in_flight: JoinSet<object_store::Result<()>>,
}

impl Parts {
    fn new(upload: Box<dyn MultipartUpload>, part_size: usize) -> Self {
        Parts {
            upload,
            buffer: PutPayloadMut::new(),
            part_size: part_size.max(1),
            in_flight: JoinSet::new(),
        }
    }

    /// Waits until fewer than `limit` parts are in flight (none, for 0); the first part that
    /// failed meanwhile is the error.
    async fn wait_for_capacity(&mut self, limit: usize) -> object_store::Result<()> {
        while !self.in_flight.is_empty() && self.in_flight.len() >= limit {
            match self.in_flight.join_next().await {
                Some(Ok(sent)) => sent?,
                Some(Err(failed)) => {
                    return Err(object_store::Error::Generic {
                        store: "keycodec upload",
                        source: Box::new(failed),
                    })
                }
                None => break,
            }
        }
        Ok(())
    }

    /// Adds `bytes` to the part being filled, sending each part that fills (in the runtime
    /// the caller entered).
    fn write(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = self.part_size.saturating_sub(self.buffer.content_length());
            let (now, rest) = bytes.split_at(bytes.len().min(room));
            self.buffer.extend_from_slice(now);
            bytes = rest;
            if self.buffer.content_length() >= self.part_size {
                let part = std::mem::take(&mut self.buffer);
                self.in_flight.spawn(self.upload.put_part(part.into()));
            }
        }
    }

    /// Sends the last part, waits for every part, and completes the upload. On a failure the
    /// upload is aborted (whether the abort succeeds changes nothing: no object appears
    /// either way) and the failure is returned.
    async fn finish(mut self) -> object_store::Result<()> {
        if self.buffer.content_length() > 0 {
            let part = std::mem::take(&mut self.buffer);
            self.in_flight.spawn(self.upload.put_part(part.into()));
        }
        let completed = match self.wait_for_capacity(0).await {
            Ok(()) => self.upload.complete().await.map(drop),
            Err(failed) => Err(failed),
        };
        if completed.is_err() {
            self.abort().await;
        }
        completed
    }

    /// Stops the parts in flight and aborts the upload. A failed abort (or a process killed
    /// mid-upload) leaves the parts stored, and billed, until a lifecycle rule or
    /// `abort-multipart-upload` removes them; no object is visible.
    async fn abort(&mut self) {
        self.in_flight.shutdown().await;
        let _ = self.upload.abort().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::{PutPayload, PutResult, UploadPart};
    use std::future::Future;
    use std::pin::Pin;

    type Reply<'a, T> = Pin<Box<dyn Future<Output = object_store::Result<T>> + Send + 'a>>;

    /// An upload whose parts fail (or not), whose completion fails, and whose abort fails too.
    #[derive(Debug)]
    struct Failing {
        parts_fail: bool,
    }

    fn failure(what: &'static str) -> object_store::Error {
        object_store::Error::Generic {
            store: "test",
            source: what.into(),
        }
    }

    impl MultipartUpload for Failing {
        fn put_part(&mut self, _data: PutPayload) -> UploadPart {
            let fails = self.parts_fail;
            Box::pin(async move {
                match fails {
                    true => Err(failure("the part failed")),
                    false => Ok(()),
                }
            })
        }

        fn complete<'a, 'b>(&'a mut self) -> Reply<'b, PutResult>
        where
            'a: 'b,
            Self: 'b,
        {
            Box::pin(async { Err(failure("the completion failed")) })
        }

        fn abort<'a, 'b>(&'a mut self) -> Reply<'b, ()>
        where
            'a: 'b,
            Self: 'b,
        {
            Box::pin(async { Err(failure("the abort failed")) })
        }
    }

    /// A failed part or completion is what the upload reports, not the failed abort after it.
    #[test]
    fn a_failed_upload_reports_its_own_failure_not_the_aborts() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build();
        let Ok(runtime) = runtime else {
            panic!("a runtime for the test");
        };
        let bytes = vec![7u8; 12 << 20];
        for (parts_fail, expected) in [(false, "the completion failed"), (true, "the part failed")]
        {
            let handle = runtime.handle();
            let started = handle.spawn(async move {
                Ok(Box::new(Failing { parts_fail }) as Box<dyn MultipartUpload>)
            });
            let progress = |_| {};
            let size = Some(bytes.len() as u64);
            let mut writer =
                UploadWriter::new(handle, started, size, RemoteOptions::default(), &progress);
            let outcome = match writer.write_all(&bytes) {
                Ok(()) => writer.finish(),
                Err(err) => Err(writer.abort(Error::io("upload", err))),
            };
            let reported = match outcome {
                Ok(()) => panic!("an upload whose {expected:?} succeeded"),
                Err(err) => err.to_string(),
            };
            assert!(reported.contains(expected), "{expected:?}: {reported}");
            assert!(!reported.contains("abort"), "{reported}");
        }
    }
}
