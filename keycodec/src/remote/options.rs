//! How a [`Remote`](super::Remote) transfers: its options, and the sizes and counts of
//! requests they give.

use super::*;

/// How a [`Remote`] transfers. Requests in flight adapt to the link (see [`RemoteOptions::concurrency`]).
#[derive(Clone, Copy, Debug)]
pub struct RemoteOptions {
    /// Bytes per part of an upload (S3 needs at least 5 MiB for every part but the last, and
    /// at most 10,000 parts: 8 MiB parts make objects of up to 80 GiB); an upload of a file
    /// whose size is known uses smaller parts for a smaller file (a share of it per part in
    /// flight, at least 5 MiB), and larger ones where 10,000 would not hold it. Every part
    /// but the last has the same size (as R2 requires). Default 8 MiB.
    pub part_size: usize,
    /// Parts uploaded at once at the start of an upload; more while the upload's throughput
    /// grows with them, within [`RemoteOptions::memory`]. Default 16.
    pub upload_concurrency: usize,
    /// The largest ranged GET of a load or a download. A load's or a download's bytes go in
    /// whole rounds of as many requests as may be in flight when it starts, each an equal
    /// share, as few rounds as keep each within this size (a smaller object: one round, every
    /// request paying its round trip once), and none under 1 MiB (256 KiB for a download)
    /// where the object allows. Rounded to a power of two of at least 4 MiB. Default 16 MiB.
    pub range_size: usize,
    /// Ranged GETs in flight at the start of a load or a download. While the transfer's
    /// throughput, measured as it runs, grows by 15% or more with each step, half as many
    /// again are added, up to [`RemoteOptions::max_concurrency`]; when it stops growing, so
    /// do they. Default 32 (one S3 stream carries 50-100 MB/s: 16 fill about 10 Gbit/s, 32
    /// about 20 Gbit/s, with latency hidden behind the other requests).
    pub concurrency: usize,
    /// The most ranged GETs in flight (each on its own thread, where its bytes are checked
    /// as they land; at most 256), besides those of bytes held ahead of the reads (a load's
    /// first request and first round, the object's end). A load's requests land in the key's
    /// own memory, a download's in its file: neither holds more for more requests. Default
    /// 64.
    pub max_concurrency: usize,
    /// Bytes a load of a proving key or parameters (by a codec that reads in bulk, see
    /// `KeyCodec::reads_in_order`) asks for with its first request, after
    /// the object's first 64 KiB, before the object's size is known: in ranges of 1 MiB,
    /// conditional on no version (each answer's own account of the object must match the
    /// load's, or its bytes are fetched again). The payload's requests then need not wait a
    /// round trip for the first answer. On a smaller object, the ranges past its end are
    /// refused by the store: a request each, no bytes. A load through the cache that must
    /// learn the object's version first (unpinned) asks for them once it has it, conditional
    /// on it. Held until the load ends, within a quarter of [`RemoteOptions::memory`]; 0 for
    /// none. Default 32 MiB (what a link of 400 MB/s carries in 80 ms).
    pub first_round: usize,
    /// Bytes a transfer may hold beyond the key itself: an upload's parts in flight, a
    /// streamed decoder's reads ahead, a load's first round. Default 1 GiB.
    pub memory: usize,
    /// How long a load through a cache ([`crate::load_key`] of an object and its
    /// fetches of parameters and keys) waits for another process that holds the lock on the same cached
    /// file (downloading it) before it reports that process: an [`Error::Io`] of kind
    /// `TimedOut` naming the holder. Default [`keycodec_core::DEFAULT_LOCK_TIMEOUT`].
    pub lock_timeout: std::time::Duration,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            part_size: 8 << 20,
            upload_concurrency: 16,
            range_size: 16 << 20,
            concurrency: 32,
            max_concurrency: 64,
            first_round: 32 << 20,
            memory: 1 << 30,
            lock_timeout: keycodec_core::DEFAULT_LOCK_TIMEOUT,
        }
    }
}

/// The most bytes a streamed decoder's reads ahead hold (within three quarters of
/// [`RemoteOptions::memory`], the first round taking at most the last quarter): 64 windows
/// of 1 MiB, enough to keep the most requests in flight.
pub(crate) const READ_AHEAD: u64 = 64 << 20;

/// The most requests in flight any transfer keeps (a bound on [`RemoteOptions::max_concurrency`]).
pub(crate) const MAX_CONCURRENCY_CEILING: usize = 256;

impl RemoteOptions {
    /// The largest ranged GET, a power of two of at least the core's bulk step.
    pub(crate) fn largest_range(&self) -> usize {
        self.range_size
            .max(transport::BULK_STEP)
            .checked_next_power_of_two()
            .unwrap_or(transport::BULK_STEP)
    }

    /// Bytes of a load's first round (see [`RemoteOptions::first_round`]).
    pub(crate) fn first_round_bytes(&self) -> u64 {
        self.first_round.min(self.memory / 4) as u64
    }

    /// The most bytes a streamed decoder's reads ahead hold: [`READ_AHEAD`], within three
    /// quarters of [`RemoteOptions::memory`].
    pub(crate) fn read_ahead_bytes(&self) -> u64 {
        ((self.memory - self.memory / 4) as u64).min(READ_AHEAD)
    }

    /// An upload's part for `size` bytes, if known (see [`RemoteOptions::part_size`]).
    pub(crate) fn part_for(&self, size: Option<u64>) -> usize {
        const SMALLEST: u64 = 5 << 20;
        const MOST_PARTS: u64 = 10_000;
        let configured = self.part_size.max(1) as u64;
        let part = match size {
            Some(size) => (size / (2 * self.upload_concurrency.max(1) as u64))
                .clamp(SMALLEST.min(configured), configured)
                .max(size.div_ceil(MOST_PARTS)),
            None => configured,
        };
        usize::try_from(part).unwrap_or(usize::MAX)
    }

    /// The most requests in flight.
    pub(crate) fn ceiling(&self) -> usize {
        // Every bound within the ceiling first: `clamp` panics when its least is over its most.
        let least = self.concurrency.clamp(1, MAX_CONCURRENCY_CEILING);
        self.max_concurrency.clamp(least, MAX_CONCURRENCY_CEILING)
    }

    /// Ranged GETs in flight at the start, within [`RemoteOptions::ceiling`].
    pub(crate) fn starting(&self) -> usize {
        self.concurrency.clamp(1, self.ceiling())
    }

    /// A download's range for an object of `size` bytes (see [`range_piece`]).
    pub(crate) fn download_piece(&self, size: u64) -> u64 {
        range_piece(size, self.starting(), self.largest_range())
    }
}

/// The range each GET fetches of `len` bytes fetched at once by `lanes` requests in flight:
/// whole rounds of `lanes` requests ([`transport::requests_for`]), each within `largest` and
/// of at least 256 KiB where `len` allows.
pub(crate) fn range_piece(len: u64, lanes: usize, largest: usize) -> u64 {
    let count = transport::requests_for(len, lanes, 256 << 10, largest as u64);
    len.div_ceil(count).max(1)
}
