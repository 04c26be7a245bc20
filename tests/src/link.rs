//! An emulated cloud link on loopback: a TCP proxy in front of a server that delays every
//! request by a latency (its time to first byte) and caps the throughput of each connection
//! and of all connections together, as a cloud network and an object store do (one S3 GET
//! stream carries 50-100 MB/s however fat the link; a machine's link carries 1-3 GB/s).
//!
//! Bytes from the client are held for the latency, then forwarded: a request reaches the
//! server that much later, and so does its response's first byte; a connection's bytes keep
//! their order. Bytes in either direction are paced through two budgets, the connection's and
//! the link's (one budget per direction: a link is full duplex), each a rate with a burst of
//! [`BURST`] bytes. Opening a connection costs nothing (no handshake is emulated). One thread
//! per direction of a connection, and one per delay line; the proxy runs until the process
//! ends.

use std::fmt;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes a budget lets through at once after being idle.
pub const BURST: u64 = 256 << 10;

/// Bytes read and forwarded at a time.
const CHUNK: usize = 64 << 10;

/// A link's latency and caps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkProfile {
    /// Added to every request's time to first byte.
    pub latency: Duration,
    /// Bytes per second one connection carries, each way.
    pub per_stream: f64,
    /// Bytes per second all connections together carry, each way.
    pub total: f64,
}

impl LinkProfile {
    /// A cloud link scaled to what loopback on two cores carries: 40 ms to a request's first
    /// byte (unscaled), 10 MB/s per connection and 160 MB/s in all: an S3 stream of ~80 MB/s
    /// and a ~13 Gbit/s link, both divided by eight. As on the real link, filling it takes
    /// more than sixteen requests in flight.
    pub const CLOUD: LinkProfile = LinkProfile {
        latency: Duration::from_millis(40),
        per_stream: 10e6,
        total: 160e6,
    };
}

impl fmt::Display for LinkProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}ms,{}MB/s,{}MB/s",
            self.latency.as_millis(),
            self.per_stream / 1e6,
            self.total / 1e6
        )
    }
}

impl FromStr for LinkProfile {
    type Err = String;

    /// `LATENCY,PER_STREAM,TOTAL`, as `40ms,10MB/s,160MB/s` (latency in `ms` or `s`; rates in
    /// `B/s`, `KB/s`, `MB/s`, `GB/s`, decimal), or `cloud` for [`LinkProfile::CLOUD`].
    fn from_str(text: &str) -> Result<Self, String> {
        if text == "cloud" {
            return Ok(LinkProfile::CLOUD);
        }
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let [latency, per_stream, total] = parts.as_slice() else {
            return Err(format!(
                "{text}: a link is LATENCY,PER_STREAM,TOTAL (40ms,10MB/s,160MB/s) or `cloud`"
            ));
        };
        let latency = if let Some(ms) = latency.strip_suffix("ms") {
            ms.parse::<f64>().map(|ms| ms / 1e3)
        } else if let Some(s) = latency.strip_suffix('s') {
            s.parse::<f64>()
        } else {
            return Err(format!("{latency}: a latency in ms or s (40ms)"));
        }
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 60.0)
        .ok_or_else(|| format!("{latency}: a latency of 0 to 60 s (40ms)"))?;
        let profile = LinkProfile {
            latency: Duration::from_secs_f64(latency),
            per_stream: rate(per_stream)?,
            total: rate(total)?,
        };
        if profile.per_stream > profile.total {
            return Err(format!(
                "{text}: a connection cannot carry more than the whole link"
            ));
        }
        Ok(profile)
    }
}

/// Bytes per second of `40MB/s`.
fn rate(text: &str) -> Result<f64, String> {
    let number = text
        .strip_suffix("/s")
        .ok_or_else(|| format!("{text}: a rate per second (80MB/s)"))?;
    let (digits, scale) = [("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1.0)]
        .iter()
        .find_map(|(unit, scale)| number.strip_suffix(unit).map(|d| (d, *scale)))
        .ok_or_else(|| format!("{text}: a rate in B/s, KB/s, MB/s or GB/s"))?;
    digits
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|r| r.is_finite() && *r >= 1e3)
        .ok_or_else(|| format!("{text}: a rate of at least 1KB/s"))
}

/// A rate, as a schedule: the instant its next byte may go.
struct Budget {
    rate: f64,
    next: Mutex<Instant>,
}

impl Budget {
    fn new(rate: f64) -> Budget {
        Budget {
            rate,
            next: Mutex::new(Instant::now()),
        }
    }

    /// Books `bytes`; returns when they have gone at this rate (after those booked before,
    /// or now less the burst's worth if the budget was idle).
    fn book(&self, bytes: usize) -> Instant {
        let now = Instant::now();
        let burst = Duration::from_secs_f64(BURST as f64 / self.rate);
        let mut next = self.next.lock().unwrap();
        let start = (*next).max(now.checked_sub(burst).unwrap_or(now));
        *next = start + Duration::from_secs_f64(bytes as f64 / self.rate);
        *next
    }

    /// Waits until `bytes` may go.
    fn pace(&self, bytes: usize) {
        let until = self.book(bytes);
        if let Some(wait) = until.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

/// What the link carried.
#[derive(Default)]
struct Counters {
    down: AtomicU64,
    up: AtomicU64,
    connections: AtomicUsize,
    open: AtomicUsize,
    peak_open: AtomicUsize,
}

/// The link: one budget each way for all its connections, in front of any number of servers
/// ([`Link::front`]).
pub struct Link {
    profile: LinkProfile,
    down: Arc<Budget>,
    up: Arc<Budget>,
    counters: Arc<Counters>,
}

impl Link {
    /// A link with `profile`'s latency and caps, in front of no server yet.
    pub fn new(profile: LinkProfile) -> Link {
        Link {
            profile,
            down: Arc::new(Budget::new(profile.total)),
            up: Arc::new(Budget::new(profile.total)),
            counters: Arc::new(Counters::default()),
        }
    }

    /// Its profile.
    pub fn profile(&self) -> LinkProfile {
        self.profile
    }

    /// Listens on a free loopback port and forwards every connection to `upstream` through
    /// the link; returns the port's address (`127.0.0.1:PORT`).
    ///
    /// # Panics
    ///
    /// When no loopback port can be had.
    pub fn front(&self, upstream: SocketAddr) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let (profile, down, up, counters) = (
            self.profile,
            Arc::clone(&self.down),
            Arc::clone(&self.up),
            Arc::clone(&self.counters),
        );
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let link = Carry {
                    profile,
                    down: Arc::clone(&down),
                    up: Arc::clone(&up),
                    counters: Arc::clone(&counters),
                };
                link.connection(client, server);
            }
        });
        addr
    }

    /// Bytes carried from the servers to their clients so far.
    pub fn bytes_down(&self) -> u64 {
        self.counters.down.load(Ordering::Relaxed)
    }

    /// Bytes carried from the clients to the servers so far.
    pub fn bytes_up(&self) -> u64 {
        self.counters.up.load(Ordering::Relaxed)
    }

    /// Connections opened so far.
    pub fn connections(&self) -> usize {
        self.counters.connections.load(Ordering::Relaxed)
    }

    /// The most connections open at once so far.
    pub fn peak_open(&self) -> usize {
        self.counters.peak_open.load(Ordering::Relaxed)
    }
}

/// What a connection's threads share.
#[derive(Clone)]
struct Carry {
    profile: LinkProfile,
    down: Arc<Budget>,
    up: Arc<Budget>,
    counters: Arc<Counters>,
}

impl Carry {
    /// Carries one connection both ways until either side closes it.
    fn connection(self, client: TcpStream, server: TcpStream) {
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (Ok(client_write), Ok(server_write)) = (client.try_clone(), server.try_clone()) else {
            return;
        };
        let counters = &self.counters;
        counters.connections.fetch_add(1, Ordering::Relaxed);
        let open = counters.open.fetch_add(1, Ordering::Relaxed) + 1;
        counters.peak_open.fetch_max(open, Ordering::Relaxed);
        // Requests: paced, then held for the latency.
        let up = self.clone();
        std::thread::spawn(move || {
            let (send, held) = mpsc::sync_channel::<(Instant, Vec<u8>)>(64);
            let latency = up.profile.latency;
            let deliver = std::thread::spawn(move || {
                let mut server = server_write;
                for (due, bytes) in held {
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    if server.write_all(&bytes).is_err() {
                        break;
                    }
                }
                let _ = server.shutdown(Shutdown::Write);
            });
            let stream = Budget::new(up.profile.per_stream);
            up.pump(client, &stream, &up.up, &up.counters.up, |bytes| {
                send.send((Instant::now() + latency, bytes.to_vec()))
                    .is_ok()
            });
            drop(send);
            let _ = deliver.join();
        });
        // Responses: paced.
        std::thread::spawn(move || {
            let mut client = client_write;
            let stream = Budget::new(self.profile.per_stream);
            self.pump(server, &stream, &self.down, &self.counters.down, |bytes| {
                client.write_all(bytes).is_ok()
            });
            let _ = client.shutdown(Shutdown::Both);
            self.counters.open.fetch_sub(1, Ordering::Relaxed);
        });
    }

    /// Reads `from` until it ends, each chunk paced by the connection's budget and then the
    /// link's, and handed to `forward` (which returns `false` when the other side is gone).
    fn pump(
        &self,
        mut from: TcpStream,
        stream: &Budget,
        link: &Budget,
        carried: &AtomicU64,
        mut forward: impl FnMut(&[u8]) -> bool,
    ) {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // Acknowledged at once (Linux clears the flag as it acknowledges): a sender that
            // does not set TCP_NODELAY (s3s-fs) would otherwise hold a response's first body
            // bytes behind its headers until our delayed ACK, 40 ms, a stall no cloud link adds.
            let _ = rustix::net::sockopt::set_tcp_quickack(&from, true);
            stream.pace(n);
            link.pace(n);
            let Some(bytes) = buf.get(..n) else { break };
            // Counted before they are handed on: once the other side has them, so does the
            // count.
            carried.fetch_add(n as u64, Ordering::Relaxed);
            if !forward(bytes) {
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Read);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_print() {
        let profile: LinkProfile = "40ms,10MB/s,160MB/s".parse().unwrap();
        assert_eq!(profile, LinkProfile::CLOUD);
        assert_eq!(profile.to_string(), "40ms,10MB/s,160MB/s");
        assert_eq!("cloud".parse::<LinkProfile>().unwrap(), LinkProfile::CLOUD);
        let slow: LinkProfile = "0.5s,500KB/s,2GB/s".parse().unwrap();
        assert_eq!(slow.latency, Duration::from_millis(500));
        assert_eq!((slow.per_stream, slow.total), (5e5, 2e9));
        for bad in [
            "",
            "40ms,10MB/s",
            "40,10MB/s,1GB/s",
            "40ms,10MB,1GB/s",
            "40ms,2GB/s,1GB/s",
            "-1ms,1MB/s,1GB/s",
            "40ms,0MB/s,1GB/s",
            "40ms,10TB/s,1GB/s",
        ] {
            assert!(bad.parse::<LinkProfile>().is_err(), "{bad:?} is refused");
        }
    }

    /// A loopback server (TCP_NODELAY not set) answering each request of `N` bytes on a
    /// connection with `answer`, until it returns `false`; its address.
    fn serve<const N: usize>(
        answer: impl Fn([u8; N], &mut TcpStream) -> bool + Copy + Send + 'static,
    ) -> SocketAddr {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut conn in server.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut ask = [0u8; N];
                    while conn.read_exact(&mut ask).is_ok() && answer(ask, &mut conn) {}
                });
            }
        });
        addr
    }

    /// A server that does not set TCP_NODELAY (as s3s-fs does not) and answers each request
    /// with a small head and then its body, in two writes, on one connection: its bodies are
    /// not held back behind their heads until a delayed ACK (40 ms each, once a connection
    /// has left Linux's quick-ACK start), as no cloud link would hold them.
    #[test]
    fn a_sender_without_nodelay_is_not_stalled_by_the_link() {
        let upstream = serve(|_: [u8; 1], conn| {
            conn.write_all(b"HTTP/1.1 200 OK\r\n\r\n").is_ok()
                && conn.write_all(&[7u8; 16 << 10]).is_ok()
        });
        let link = Link::new("0ms,1GB/s,1GB/s".parse().unwrap());
        let mut conn = TcpStream::connect(link.front(upstream)).unwrap();
        // The median answer: a stall holds back most answers, a busy machine a few.
        let mut answers: Vec<Duration> = (0..40)
            .map(|_| {
                let started = Instant::now();
                conn.write_all(b"?").unwrap();
                let mut answer = vec![0u8; 19 + (16 << 10)];
                conn.read_exact(&mut answer).unwrap();
                started.elapsed()
            })
            .collect();
        answers.sort();
        let median = answers[answers.len() / 2];
        assert!(
            median < Duration::from_millis(15),
            "{median:?} the median answer: held back behind delayed ACKs"
        );
    }

    /// An echo server behind the link: a request's answer comes a latency late, one
    /// connection carries about its cap, and several together about the link's.
    #[test]
    fn the_link_delays_requests_and_caps_streams_and_the_total() {
        // Serves, for each 8-byte request naming a length, that many bytes.
        let upstream = serve(|ask: [u8; 8], conn| {
            conn.write_all(&vec![7u8; u64::from_le_bytes(ask) as usize])
                .is_ok()
        });
        let link = Link::new("50ms,4MB/s,10MB/s".parse().unwrap());
        let front = link.front(upstream);
        let fetch = |conn: &mut TcpStream, len: u64| {
            conn.write_all(&len.to_le_bytes()).unwrap();
            let mut body = vec![0u8; len as usize];
            conn.read_exact(&mut body).unwrap();
        };

        let mut conn = TcpStream::connect(front).unwrap();
        let started = Instant::now();
        fetch(&mut conn, 1);
        let first_byte = started.elapsed();
        assert!(
            first_byte >= Duration::from_millis(50) && first_byte < Duration::from_millis(500),
            "a request's answer comes the latency late: {first_byte:?}"
        );

        // 2 MB on one connection at 4 MB/s (less the burst): about 0.44 s.
        let started = Instant::now();
        fetch(&mut conn, 2_000_000);
        let one = started.elapsed().as_secs_f64();
        assert!(
            (0.35..2.0).contains(&one),
            "one connection carries about its cap: 2 MB in {one:.2} s"
        );

        // Six connections of 2 MB: 12 MB, capped by the link at 10 MB/s, not 24 MB/s.
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..6 {
                scope.spawn(|| fetch(&mut TcpStream::connect(front).unwrap(), 2_000_000));
            }
        });
        let six = started.elapsed().as_secs_f64();
        assert!(
            (1.1..5.0).contains(&six),
            "six connections together carry about the link's cap: 12 MB in {six:.2} s"
        );
        assert!(link.bytes_down() >= 14_000_001);
        assert_eq!(link.connections(), 7);
        assert!(link.peak_open() >= 6, "{}", link.peak_open());
    }
}
