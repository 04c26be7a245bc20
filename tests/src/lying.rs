//! A loopback HTTP/1.1 server of the tests' own that serves one file and lies about it as it
//! is told: a size other than the file's, bytes of another range than the one asked for, a
//! weak ETag (answering `If-Match` as RFC 9110 says: a weak tag never matches). It
//! counts requests by method, so a test can check what was (not) fetched. It runs until its
//! test process ends; every connection is served by its own thread and closed after one
//! response.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// How the server lies.
#[derive(Clone, Debug, Default)]
pub struct Lies {
    /// The size HEAD (and every `Content-Range`) claims, instead of the file's.
    pub size: Option<u64>,
    /// Answer every ranged GET with the bytes this many bytes further on (announced as the
    /// range asked for).
    pub shift_ranges: u64,
    /// The ETag, quotes included (`"v1"`, `W/"v1"`); `"v1"` if unset.
    pub e_tag: Option<String>,
}

#[derive(Default)]
struct Counts {
    /// (method, range header) of every request.
    seen: Vec<(String, Option<String>)>,
}

/// The server.
pub struct LyingServer {
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    counts: Arc<Mutex<Counts>>,
}

impl LyingServer {
    /// Serves `body` at every path, lying as `lies` says.
    pub fn start(body: Vec<u8>, lies: Lies) -> LyingServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let counts = Arc::new(Mutex::new(Counts::default()));
        let shared = Arc::clone(&counts);
        let body = Arc::new(body);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (counts, body, lies) = (Arc::clone(&shared), Arc::clone(&body), lies.clone());
                std::thread::spawn(move || {
                    let _ = serve(client, &body, &lies, &counts);
                });
            }
        });
        LyingServer { addr, counts }
    }

    /// `http://127.0.0.1:PORT/{name}`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.addr)
    }

    /// Requests of `method` seen so far.
    pub fn count(&self, method: &str) -> usize {
        let counts = self.counts.lock().unwrap();
        counts.seen.iter().filter(|(m, _)| m == method).count()
    }

    /// Bytes asked for by ranged GETs so far.
    pub fn bytes_asked(&self) -> u64 {
        let counts = self.counts.lock().unwrap();
        counts
            .seen
            .iter()
            .filter_map(|(_, range)| range.as_deref().and_then(parse_range))
            .map(|(start, end)| end + 1 - start)
            .sum()
    }
}

/// `bytes=A-B` (inclusive).
fn parse_range(header: &str) -> Option<(u64, u64)> {
    let (start, end) = header.trim().strip_prefix("bytes=")?.split_once('-')?;
    Some((start.parse().ok()?, end.parse().ok()?))
}

fn serve(
    client: TcpStream,
    body: &[u8],
    lies: &Lies,
    counts: &Mutex<Counts>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let method = request.split_whitespace().next().unwrap_or("").to_owned();
    let (mut range, mut if_match) = (None, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(value.trim().to_owned()),
                "if-match" => if_match = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
    counts
        .lock()
        .unwrap()
        .seen
        .push((method.clone(), range.clone()));
    let e_tag = lies.e_tag.clone().unwrap_or_else(|| "\"v1\"".to_owned());
    let size = lies.size.unwrap_or(body.len() as u64);
    let mut out = client;
    let head = |status: &str, extra: String, len: u64| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Length: {len}\r\nETag: {e_tag}\r\nAccept-Ranges: bytes\r\n\
             Last-Modified: Tue, 01 Dec 2026 00:00:00 GMT\r\nConnection: close\r\n{extra}\r\n"
        )
    };
    if let Some(condition) = if_match {
        // A strong comparison: a weak tag matches nothing.
        if e_tag.starts_with("W/") || condition != e_tag {
            out.write_all(head("412 Precondition Failed", String::new(), 0).as_bytes())?;
            return Ok(());
        }
    }
    match (method.as_str(), range.as_deref().and_then(parse_range)) {
        ("HEAD", _) => out.write_all(head("200 OK", String::new(), size).as_bytes()),
        ("GET", Some((start, end))) => {
            let (from, to) = (start + lies.shift_ranges, end + lies.shift_ranges);
            let slice = body
                .get(from as usize..body.len().min(to as usize + 1))
                .unwrap_or_default();
            let announced = slice.len() as u64;
            let extra = format!(
                "Content-Range: bytes {start}-{}/{size}\r\n",
                start + announced.max(1) - 1
            );
            out.write_all(head("206 Partial Content", extra, announced).as_bytes())?;
            out.write_all(slice)
        }
        ("GET", None) => {
            out.write_all(head("200 OK", String::new(), body.len() as u64).as_bytes())?;
            out.write_all(body)
        }
        _ => out.write_all(head("405 Method Not Allowed", String::new(), 0).as_bytes()),
    }
}
