//! How many requests a transfer keeps in flight: it starts at a few, adds more while the
//! total throughput grows, and stops adding when it does not, never past a ceiling (the
//! caller's memory cap, or [`RemoteOptions::max_concurrency`](super::RemoteOptions)).
//!
//! Why: one object storage stream carries 50-100 MB/s however fat the link, and a request's
//! first byte comes tens of milliseconds after it is sent, so the streams a link needs depend
//! on the link, which only the transfer can measure. The throughput is measured in epochs: an
//! epoch ends once as many requests have completed as are allowed in flight (each stream has
//! finished about one) and at least [`MIN_EPOCH`] has passed. An epoch that was at least
//! [`GAIN`] faster than the one before earns half as many streams again; one that was not
//! ends the growth (the server, the link or the cores are the bound: more streams would only
//! hold more memory).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

/// The shortest epoch: shorter ones measure the timer more than the link.
pub(crate) const MIN_EPOCH: Duration = Duration::from_millis(50);

/// How much faster an epoch must be than the one before for the transfer to add streams.
pub(crate) const GAIN: f64 = 1.15;

/// The growth of a transfer's requests in flight (see the module docs).
#[derive(Debug)]
pub(crate) struct Growth {
    limit: usize,
    ceiling: usize,
    growing: bool,
    epoch: Instant,
    epoch_bytes: u64,
    epoch_requests: usize,
    /// The last epoch's throughput, bytes per second.
    rate: f64,
}

impl Growth {
    /// Starting at `start` requests in flight, at most `ceiling` (both at least 1).
    pub(crate) fn new(start: usize, ceiling: usize) -> Growth {
        let ceiling = ceiling.max(1);
        Growth {
            limit: start.clamp(1, ceiling),
            ceiling,
            growing: start < ceiling,
            epoch: Instant::now(),
            epoch_bytes: 0,
            epoch_requests: 0,
            rate: 0.0,
        }
    }

    /// Requests allowed in flight now.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Notes a completed request of `bytes`; returns how many more requests are allowed in
    /// flight from now (0 most of the time).
    pub(crate) fn completed(&mut self, bytes: u64) -> usize {
        self.epoch_bytes += bytes;
        self.epoch_requests += 1;
        let elapsed = self.epoch.elapsed();
        if !self.growing || self.epoch_requests < self.limit || elapsed < MIN_EPOCH {
            return 0;
        }
        let rate = self.epoch_bytes as f64 / elapsed.as_secs_f64();
        let more = if rate > self.rate * GAIN {
            self.limit.div_ceil(2).min(self.ceiling - self.limit)
        } else {
            0
        };
        self.limit += more;
        self.growing = more > 0 && self.limit < self.ceiling;
        self.rate = rate;
        self.epoch = Instant::now();
        self.epoch_bytes = 0;
        self.epoch_requests = 0;
        more
    }
}

/// Requests in flight of one transfer, shared by its threads: a permit per request, as many
/// permits as its [`Growth`] allows.
#[derive(Debug)]
pub(crate) struct Flow {
    permits: Semaphore,
    growth: Mutex<Growth>,
}

impl Flow {
    pub(crate) fn new(growth: Growth) -> Flow {
        Flow {
            permits: Semaphore::new(growth.limit()),
            growth: Mutex::new(growth),
        }
    }

    /// Requests that may start now without waiting for one in flight to end.
    pub(crate) fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Waits for room for one more request.
    pub(crate) async fn admit(&self) -> Option<SemaphorePermit<'_>> {
        // The semaphore is never closed; a closed one would admit without waiting.
        self.permits.acquire().await.ok()
    }

    /// Notes a completed request of `bytes` (its permit released after this).
    pub(crate) fn completed(&self, bytes: u64) {
        let more = match self.growth.lock() {
            Ok(mut growth) => growth.completed(bytes),
            Err(_) => 0,
        };
        if more > 0 {
            self.permits.add_permits(more);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transfer through `streams` streams of a `per_stream` rate within a `total` cap: the
    /// throughput an epoch of `limit` streams measures.
    fn epochs(per_stream: f64, total: f64, start: usize, ceiling: usize) -> usize {
        let mut growth = Growth::new(start, ceiling);
        for _ in 0..20 {
            let limit = growth.limit();
            let rate = (limit as f64 * per_stream).min(total);
            // An epoch of `limit` requests of 100 MB, as long as the rate says (longer than
            // the shortest epoch).
            let seconds = limit as f64 * 1e8 / rate;
            growth.epoch = Instant::now() - Duration::from_secs_f64(seconds.max(0.06));
            growth.epoch_bytes = 0;
            for _ in 0..limit {
                growth.completed(100_000_000);
            }
        }
        growth.limit()
    }

    #[test]
    fn streams_grow_while_the_total_grows_and_stop_when_it_does_not() {
        // 10 MB/s a stream, 160 MB/s in all: 16 fill the link; growth stops just past it.
        let filled = epochs(10e6, 160e6, 8, 64);
        assert!((16..=27).contains(&filled), "{filled} streams");
        // A server that carries 200 MB/s whatever the streams: growth stops at once.
        assert_eq!(epochs(1e9, 200e6, 8, 64), 12);
        // The ceiling holds.
        assert_eq!(epochs(1e6, 1e12, 8, 20), 20);
        // A start at the ceiling never grows.
        assert_eq!(epochs(1e6, 1e12, 5, 5), 5);
    }
}
