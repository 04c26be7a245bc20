//! A multipart upload as a `Write`: bytes are cut into parts of a fixed size, a few of which
//! are in flight (and in memory) at once: as many as the upload's [`Growth`] allows, which
//! adds parts in flight while the upload's throughput grows with them.

use std::io::{self, Write};

use object_store::{MultipartUpload, WriteMultipart};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

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
    upload: Option<WriteMultipart>,
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
    fn parts(&mut self, first: &[u8]) -> Option<&mut WriteMultipart> {
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
            self.upload = Some(WriteMultipart::new_with_chunk_size(started, self.part_size));
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
            .map(drop)
            .map_err(|err| store_error("complete the upload of", err))
    }

    /// Aborts the upload (the store drops the parts it has); returns the failure of a part,
    /// if one made the writer fail, else `error`.
    pub(super) fn abort(mut self, error: Error) -> Error {
        self.parts(&[]);
        if let Some(upload) = self.upload.take() {
            // The error that stopped the save is the one to report. A failed abort (or a
            // process killed mid-upload) leaves the parts stored, and billed, until a
            // lifecycle rule or `abort-multipart-upload` removes them; no object is visible.
            let _ = self.handle.block_on(upload.abort());
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
