//! A loopback HTTP/1.1 proxy in front of the test S3 server that can be told to fail
//! requests as misbehaving servers and networks do: answer with an error status, cut a
//! response off mid-body (a connection reset), send a short or a long body, answer a ranged
//! GET with the whole object (200), announce another `Content-Range`, stall, trickle the body, or run a hook
//! before forwarding (to replace the object between two requests). It counts what it
//! forwarded, so a test can check that its fault was met and that nothing was uploaded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// What to do to a matching request.
pub enum Fault {
    /// Answer with this status (and an empty body) without forwarding.
    Status(u16),
    /// Forward, then send the client the response's head and half its body, and close.
    ResetMidBody,
    /// Run this, then forward as usual.
    Hook(Box<dyn FnMut() + Send>),
    /// Forward, then send the first half of the body as if it were all of it (its
    /// `Content-Length` says so; `Content-Range` still names the range asked for).
    ShortBody,
    /// Forward, then send the body with this many more bytes (its `Content-Length` says so).
    ExtraBytes(usize),
    /// Forward without the `Range` header: the whole object, with status 200.
    WholeObject,
    /// Forward, then announce a `Content-Range` this many bytes further on (the same bytes).
    ShiftContentRange(u64),
    /// Wait this long, then forward as usual.
    Stall(std::time::Duration),
    /// Forward, then send the body 1 KiB at a time, this long apart.
    Trickle(std::time::Duration),
}

/// Which requests a fault applies to.
pub struct Rule {
    /// The HTTP method (`GET`, `PUT`...).
    pub method: &'static str,
    /// Only requests whose target (path and query) contains this.
    pub target_contains: &'static str,
    /// Only requests carrying a `Range` header (the ranged GETs of a load).
    pub ranged: bool,
    /// Only requests conditional on no version (without `If-Match`): a load's opening GET
    /// and its first round's, not the ranges it fetches once it knows the object.
    pub unconditional: bool,
    /// Matching requests let through before the fault applies.
    pub skip: usize,
    /// Matching requests the fault applies to after that (then the rule is spent).
    pub times: usize,
    /// The fault.
    pub fault: Fault,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    injected: usize,
    /// Every request seen.
    seen: Vec<Seen>,
}

/// What a request was.
struct Seen {
    method: String,
    target: String,
    /// It carried a `Range` header.
    ranged: bool,
    /// It carried an `If-Match` header.
    conditional: bool,
}

/// The proxy; it runs until the process ends.
pub struct FaultyProxy {
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl FaultyProxy {
    /// Listens on a free loopback port, forwarding to `upstream`.
    pub fn start(upstream: SocketAddr) -> FaultyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                std::thread::spawn(move || {
                    // A broken connection ends this client; the client retries.
                    let _ = serve(client, upstream, &state);
                });
            }
        });
        FaultyProxy { addr, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds a rule (rules are tried in order; the first that matches applies).
    pub fn inject(&self, rule: Rule) {
        self.state.lock().unwrap().rules.push(rule);
    }

    /// How many faults were applied.
    pub fn injected(&self) -> usize {
        self.state.lock().unwrap().injected
    }

    /// Requests seen with this method (and a `Range` header, if `ranged`).
    pub fn count(&self, method: &str, ranged: bool) -> usize {
        self.count_seen(|seen| seen.method == method && (seen.ranged || !ranged))
    }

    /// Requests seen with this method and an `If-Match` header.
    pub fn count_conditional(&self, method: &str) -> usize {
        self.count_seen(|seen| seen.method == method && seen.conditional)
    }

    /// Requests seen whose target contains `text`, with this method.
    pub fn count_target(&self, method: &str, text: &str) -> usize {
        self.count_seen(|seen| seen.method == method && seen.target.contains(text))
    }

    /// Requests seen that `keep` accepts.
    fn count_seen(&self, keep: impl Fn(&Seen) -> bool) -> usize {
        self.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|seen| keep(seen))
            .count()
    }

    /// Forgets the requests seen so far.
    pub fn reset_counts(&self) {
        self.state.lock().unwrap().seen.clear();
    }
}

/// One HTTP message: its head (with the final blank line) and body.
struct Message {
    head: Vec<u8>,
    body: Vec<u8>,
}

fn serve(client: TcpStream, upstream: SocketAddr, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    let mut server = TcpStream::connect(upstream)?;
    let mut server_reader = BufReader::new(server.try_clone()?);
    loop {
        let Some(request) = read_message(&mut reader, None)? else {
            return Ok(());
        };
        let head = String::from_utf8_lossy(&request.head).to_string();
        let mut words = head.split_whitespace();
        let (method, target) = (
            words.next().unwrap_or_default().to_owned(),
            words.next().unwrap_or_default().to_owned(),
        );
        let ranged = header(&head, "range").is_some();
        let conditional = header(&head, "if-match").is_some();
        let fault = {
            let mut state = state.lock().unwrap();
            state.seen.push(Seen {
                method: method.clone(),
                target: target.clone(),
                ranged,
                conditional,
            });
            let rule = state.rules.iter_mut().find(|rule| {
                rule.times > 0
                    && rule.method == method
                    && target.contains(rule.target_contains)
                    && (ranged || !rule.ranged)
                    && (!conditional || !rule.unconditional)
            });
            match rule {
                Some(rule) if rule.skip > 0 => {
                    rule.skip -= 1;
                    None
                }
                Some(rule) => {
                    rule.times -= 1;
                    let fault = match &mut rule.fault {
                        Fault::Status(code) => Some(Fault::Status(*code)),
                        Fault::ResetMidBody => Some(Fault::ResetMidBody),
                        Fault::Hook(hook) => {
                            hook();
                            None
                        }
                        Fault::ShortBody => Some(Fault::ShortBody),
                        Fault::ExtraBytes(n) => Some(Fault::ExtraBytes(*n)),
                        Fault::WholeObject => Some(Fault::WholeObject),
                        Fault::ShiftContentRange(n) => Some(Fault::ShiftContentRange(*n)),
                        Fault::Stall(pause) => Some(Fault::Stall(*pause)),
                        Fault::Trickle(pause) => Some(Fault::Trickle(*pause)),
                    };
                    state.injected += 1;
                    fault
                }
                None => None,
            }
        };
        if let Some(Fault::Status(code)) = fault {
            // Answered here; the request's body was read, so the connection stays usable.
            write!(
                client,
                "HTTP/1.1 {code} Injected\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"
            )?;
            continue;
        }
        if let Some(Fault::Stall(pause)) = fault {
            std::thread::sleep(pause);
        }
        match fault {
            Some(Fault::WholeObject) => {
                server.write_all(&without_header(&request.head, "range"))?
            }
            _ => server.write_all(&request.head)?,
        }
        server.write_all(&request.body)?;
        let mut response = read_message(&mut server_reader, Some(&method))?
            .ok_or_else(|| std::io::Error::other("the server closed the connection"))?;
        match fault {
            Some(Fault::ShortBody) => {
                response.body.truncate(response.body.len() / 2);
                response.head = with_header(
                    &response.head,
                    "content-length",
                    &response.body.len().to_string(),
                );
            }
            Some(Fault::ExtraBytes(n)) => {
                response.body.extend(std::iter::repeat_n(0x5a, n));
                response.head = with_header(
                    &response.head,
                    "content-length",
                    &response.body.len().to_string(),
                );
            }
            Some(Fault::ShiftContentRange(shift)) => {
                let text = String::from_utf8_lossy(&response.head).to_string();
                if let Some(range) = header(&text, "content-range") {
                    let shifted = shift_content_range(range, shift);
                    response.head = with_header(&response.head, "content-range", &shifted);
                }
            }
            _ => {}
        }
        client.write_all(&response.head)?;
        if let Some(Fault::Trickle(pause)) = fault {
            for chunk in response.body.chunks(1024) {
                client.write_all(chunk)?;
                client.flush()?;
                std::thread::sleep(pause);
            }
            continue;
        }
        if let Some(Fault::ResetMidBody) = fault {
            let half = response
                .body
                .get(..response.body.len() / 2)
                .unwrap_or_default();
            client.write_all(half)?;
            client.flush()?;
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        client.write_all(&response.body)?;
    }
}

/// Reads one message; `None` at a clean end of the connection. `request_method` is given
/// for responses (a response to HEAD has no body).
fn read_message(
    reader: &mut BufReader<TcpStream>,
    request_method: Option<&str>,
) -> std::io::Result<Option<Message>> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        if reader.read_until(b'\n', &mut head)? == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
        if head.get(before..) == Some(b"\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok());
    let no_body = request_method == Some("HEAD")
        || (request_method.is_some() && matches!(status, Some(204 | 304)));
    let mut body = Vec::new();
    if no_body {
        // Nothing follows the head.
    } else if let Some(length) = header(&text, "content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| std::io::Error::other("bad content-length"))?;
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else if header(&text, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        // Forwarded as it came, chunk framing included.
        loop {
            let mut size_line = Vec::new();
            reader.read_until(b'\n', &mut size_line)?;
            body.extend_from_slice(&size_line);
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&size_line)
                    .trim()
                    .split(';')
                    .next()
                    .unwrap_or_default(),
                16,
            )
            .map_err(|_| std::io::Error::other("bad chunk size"))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
            if size == 0 {
                break;
            }
        }
    }
    Ok(Some(Message { head, body }))
}

/// `head` without the header `name`.
fn without_header(head: &[u8], name: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let kept: Vec<&str> = text
        .split_inclusive("\r\n")
        .filter(|line| {
            line.split_once(':')
                .is_none_or(|(key, _)| !key.trim().eq_ignore_ascii_case(name))
        })
        .collect();
    kept.concat().into_bytes()
}

/// `head` with the header `name` set to `value` (replaced, or added before the blank line).
fn with_header(head: &[u8], name: &str, value: &str) -> Vec<u8> {
    let mut out = without_header(head, name);
    let end = out.len().saturating_sub(2);
    let line = format!("{name}: {value}\r\n");
    out.splice(end..end, line.into_bytes());
    out
}

/// `bytes A-B/N` moved `shift` bytes on.
fn shift_content_range(range: &str, shift: u64) -> String {
    let parsed = range
        .strip_prefix("bytes ")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(span, total)| {
            let (a, b) = span.split_once('-')?;
            Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?, total))
        });
    match parsed {
        Some((a, b, total)) => format!("bytes {}-{}/{total}", a + shift, b + shift),
        None => range.to_owned(),
    }
}

/// A header's value (names compared case-insensitively).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}
