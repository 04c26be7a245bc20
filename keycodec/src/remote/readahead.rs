//! Ranges of an object fetched ahead of a reader that reads in order.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::task::JoinHandle;

use keycodec_core::transport::Dst;
use keycodec_core::{Error, Result};

use tokio::runtime::Handle;

use super::fetch::{Admission, Fetcher};

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

    /// Notes that the reader took `n` bytes at `offset` from bytes held elsewhere, which go
    /// on until `held_until`: windows are fetched from there once it has taken a first
    /// window's worth, as many ahead of it as it has earned (so a decoder that reads on past
    /// a load's first round finds its next bytes fetched, not a first window to wait for).
    pub(super) fn took_held(
        &mut self,
        fetcher: &Arc<Fetcher>,
        handle: &Handle,
        bound: u64,
        (offset, n): (u64, u64),
        held_until: u64,
    ) {
        if offset != self.at || self.window == 0 {
            self.restart(offset);
        }
        self.at = offset.saturating_add(n);
        self.taken = self.taken.saturating_add(n);
        if self.windows.is_empty() && self.front.is_none() {
            self.next = self.next.max(held_until);
        }
        // A reader that takes a header and a verifying key from held bytes, then reads in
        // bulk (most backends), has earned nothing past them.
        if self.taken >= FIRST_WINDOW {
            self.fill(fetcher, handle, bound);
        }
    }

    /// Starts fetching windows until enough are ahead of the reader.
    fn fill(&mut self, fetcher: &Arc<Fetcher>, handle: &Handle, bound: u64) {
        let size = fetcher.info.size;
        let ahead_allowed =
            (AHEAD_PER_TAKEN * self.taken).clamp(FIRST_WINDOW, bound.max(FIRST_WINDOW));
        while self.next < size && self.next - self.at < ahead_allowed {
            let start = self.next;
            let len = self.window.min(size - start);
            let fetcher = Arc::clone(fetcher);
            let task = handle.spawn(async move {
                let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
                fetcher
                    .fetch_vectored(start, vec![Dst::Init(&mut bytes)], Admission::Flow)
                    .await?;
                Ok(bytes)
            });
            self.windows.push_back((start, task));
            self.next = start + len;
            self.window = (self.window * 2).min(LARGEST_WINDOW);
        }
    }

    /// Copies into `buf` what the front window holds from the reader's position (waiting
    /// for it), fetching windows of `fetcher`'s object on `handle`, never more than `bound`
    /// bytes ahead; returns how many bytes (0 only at the end of the object).
    ///
    /// # Errors
    ///
    /// The failed fetch's error.
    pub(super) fn read(
        &mut self,
        fetcher: &Arc<Fetcher>,
        handle: &Handle,
        bound: u64,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<usize> {
        // Windows that start past the reader (fetched beyond bytes held elsewhere, which
        // did not come) cannot serve it.
        let ahead_of_reader = self.front.is_none()
            && self
                .windows
                .front()
                .is_some_and(|(start, _)| *start != offset);
        if offset != self.at || self.window == 0 || ahead_of_reader {
            self.restart(offset);
        }
        self.fill(fetcher, handle, bound);
        if self.front.is_none() {
            let Some((start, window)) = self.windows.pop_front() else {
                return Ok(0);
            };
            let bytes = match handle.block_on(window) {
                Ok(fetched) => fetched?,
                Err(_) => return Err(Error::Internal("a read-ahead task failed".into())),
            };
            self.front = Some((start, bytes));
        }
        let Some((start, bytes)) = &self.front else {
            return Ok(0);
        };
        let from = self
            .at
            .checked_sub(*start)
            .and_then(|from| usize::try_from(from).ok())
            .unwrap_or(usize::MAX);
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
