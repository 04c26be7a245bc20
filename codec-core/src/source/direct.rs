//! Reads of a file past the page cache (`O_DIRECT`), for a file read from the disk where the
//! page cache's memory costs more than the disk ([`crate::reads_past_page_cache`]).
//!
//! A read past the page cache must start, end and land on block boundaries, so each read
//! covers the blocks around the bytes asked for, into a buffer of this reader's own, aligned
//! to a block, and the bytes asked for are copied on from there. A file that cannot be
//! opened so (a file system without `O_DIRECT`) is not read so at all; a read the file system
//! refuses (`EINVAL`: a logical block larger than [`BLOCK`], some network and FUSE file
//! systems) is made through the page cache, and so is every read after it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::{Filling, BULK_STEP};

/// The alignment of a read past the page cache (its offset, length and memory): 4 KiB, the
/// logical block of today's disks and a multiple of the older 512 bytes.
pub(super) const BLOCK: usize = 4096;

/// The most one read past the page cache asks for: the largest piece a read in order asks for
/// at once (a bulk step) and the blocks around it; a longer read is made in reads of this
/// size, one after another.
const LARGEST: usize = BULK_STEP + 2 * BLOCK;

/// A file opened a second time, to be read past the page cache.
pub(super) struct Direct {
    /// The file, opened with `O_DIRECT`.
    file: File,
    /// The file system refused a read past the page cache: read through it from then on.
    refused: AtomicBool,
    /// Buffers not in use, one per read at once at most.
    spare: Mutex<Vec<Vec<u8>>>,
}

impl Direct {
    /// `file` opened again to be read past the page cache (through `/proc/self/fd`, so the
    /// same file whatever its path is now), or `None` where it cannot be.
    pub(super) fn open(file: &File) -> Option<Direct> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        // A regular file only: opening a FIFO again would wait for a writer.
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .ok()?;
        Some(Direct {
            file,
            refused: AtomicBool::new(false),
            spare: Mutex::new(Vec::new()),
        })
    }

    /// Writes the `len` bytes of the file from `offset` into `filling`, read past the page
    /// cache, or through `cached` (the same file) where the file system refuses that.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` when the file ends first; `InvalidInput` when the bytes go past what
    /// `filling` takes, or the read ends past the largest offset a file can have; the read's
    /// other I/O errors, past the page cache or, once refused, through it.
    pub(super) fn read(
        &self,
        cached: &File,
        filling: &mut Filling<'_>,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let mut buffer = self
            .spare
            .lock()
            .ok()
            .and_then(|mut spare| spare.pop())
            .unwrap_or_default();
        let read = self.read_with(&mut buffer, cached, filling, offset, len);
        if let Ok(mut spare) = self.spare.lock() {
            spare.push(buffer);
        }
        read
    }

    fn read_with(
        &self,
        buffer: &mut Vec<u8>,
        cached: &File,
        filling: &mut Filling<'_>,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        let end = offset
            .checked_add(len)
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        // The bytes from the block `offset` is in to the read's end (`aligned` rounds up).
        let from_block = (offset % BLOCK as u64).saturating_add(len);
        let aligned = aligned(
            buffer,
            usize::try_from(from_block).unwrap_or(LARGEST).min(LARGEST),
        );
        let mut at = offset;
        while at < end {
            let block = at - at % BLOCK as u64;
            let skip = (at - block) as usize;
            // In `u64` (a file's offsets), then within the buffer: no overflow either way.
            let rest = (end - block).min(aligned.len() as u64) as usize;
            let want = rest.next_multiple_of(BLOCK).min(aligned.len());
            let (read, _) = aligned.split_at_mut(want);
            let got = self.read_block(cached, read, block)?;
            let useful = got.min(usize::try_from(end - block).unwrap_or(usize::MAX));
            let Some(bytes) = read.get(skip..useful).filter(|bytes| !bytes.is_empty()) else {
                return Err(io::ErrorKind::UnexpectedEof.into());
            };
            if !filling.write(bytes) {
                return Err(io::ErrorKind::InvalidInput.into());
            }
            at += bytes.len() as u64;
        }
        Ok(())
    }

    /// Reads what the file has from `at` into `buf` (`at`, `buf`'s address and length on
    /// block boundaries), past the page cache unless refused; how many bytes (short at the
    /// file's end).
    fn read_block(&self, cached: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
        // An offset past `i64::MAX` is `EINVAL` whichever way it is read: not a refusal.
        let end = at.saturating_add(buf.len() as u64);
        if end > i64::MAX as u64 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        if !self.refused() {
            match read_retrying(&self.file, buf, at) {
                Err(err) if err.kind() == io::ErrorKind::InvalidInput => {
                    self.refused.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        read_retrying(cached, buf, at)
    }

    /// Whether a read was refused and the file is read through the page cache.
    pub(super) fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// [`Direct::read_block`] of a buffer of the caller's (for a test of the refusal).
    #[cfg(test)]
    pub(super) fn read_block_into(
        &self,
        cached: &File,
        buf: &mut [u8],
        at: u64,
    ) -> io::Result<usize> {
        self.read_block(cached, buf, at)
    }
}

/// `want` bytes of `buffer` (grown as needed) that start on a block boundary, a multiple of
/// a block long.
fn aligned(buffer: &mut Vec<u8>, want: usize) -> &mut [u8] {
    let want = want.next_multiple_of(BLOCK).max(BLOCK);
    if buffer.len() < want + BLOCK {
        *buffer = vec![0; want + BLOCK];
    }
    // `align_offset` of a byte pointer is below `BLOCK` (its contract allows `usize::MAX`
    // only where alignment cannot be reached, which a `u8` pointer always can; `min` keeps
    // the slice in bounds regardless).
    let skip = buffer.as_ptr().align_offset(BLOCK).min(BLOCK);
    let end = (skip + want).min(buffer.len());
    buffer.get_mut(skip..end).unwrap_or_default()
}

/// `pread`, again where interrupted.
fn read_retrying(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, at) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Whether `file` is on a file system that reads past the page cache and refuses a read off
/// a block boundary (ext4, XFS), for tests that must see reads made past it.
#[cfg(test)]
pub(crate) fn on_a_block_file_system(file: &File) -> bool {
    const EXT4: u64 = 0xEF53;
    const XFS: u64 = 0x5846_5342;
    rustix::fs::fstatfs(file).is_ok_and(|stat| [EXT4, XFS].contains(&(stat.f_type as u64)))
}
