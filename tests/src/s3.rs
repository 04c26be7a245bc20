//! A real S3 server on loopback: moto's (`moto_server`, PyPI `moto[server]` 5.2.x), started
//! once per test process on a free port and stopped when the process exits; or s3s-fs (a
//! file-backed server from crates.io), which the harness uses for large objects: moto
//! copies a whole object to serve each ranged GET.
//!
//! `KEYCODEC_TEST_S3_ENDPOINT=http://127.0.0.1:PORT` uses a moto server already running
//! instead. Credentials are test values.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use keycodec::remote::object_store::aws::AmazonS3Builder;
use keycodec::remote::object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

/// The running server.
pub struct S3Server {
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    /// The shell that runs the server and stops it when its stdin closes (this process
    /// ended, or the server was dropped).
    child: Option<Child>,
    /// s3s-fs's root directory (a bucket is a folder in it); `None` for moto.
    root: Option<PathBuf>,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Closing its stdin makes the shell stop the server.
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}

/// A free loopback port.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Runs `command` in the background of a shell that stops it, and removes its `log`, when
/// its stdin closes (when the `Child` is dropped or the test process exits, so a server in a
/// `static` stops too), and waits until `addr` answers HTTP.
fn spawn(command: &str, addr: SocketAddr, log: &Path, hint: &str) -> Child {
    let script = format!(
        "{command} >'{log}' 2>&1 & pid=$!; read _; kill $pid; wait $pid 2>/dev/null; rm -f '{log}'",
        log = log.display()
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("sh to start the S3 server");
    let started = Instant::now();
    while request(
        addr,
        "GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
    )
    .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the S3 server did not start on {addr} within 60 s ({hint}); its log: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

/// The test process's server, started on first use.
///
/// # Panics
///
/// When moto cannot be started (with how to install it).
pub fn server() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(S3Server::start)
}

impl S3Server {
    fn start() -> S3Server {
        if let Ok(endpoint) = std::env::var("KEYCODEC_TEST_S3_ENDPOINT") {
            let addr = endpoint
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .parse()
                .expect("KEYCODEC_TEST_S3_ENDPOINT is http://HOST:PORT");
            return S3Server {
                addr,
                child: None,
                root: None,
            };
        }
        let port = free_port();
        let log = std::env::temp_dir().join(format!("keycodec-moto-{port}.log"));
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let child = spawn(
            &format!("moto_server -H 127.0.0.1 -p {port}"),
            addr,
            &log,
            "is moto installed? python3 -m pip install 'moto[server]>=5.2,<5.3'",
        );
        S3Server {
            addr,
            child: Some(child),
            root: None,
        }
    }

    /// Starts s3s-fs (`binary`) on a free port, storing objects under `root`; stopped when
    /// dropped.
    pub fn start_s3s_fs(binary: &Path, root: &Path) -> S3Server {
        Self::s3s_fs(binary, root, true)
    }

    /// Starts s3s-fs without credentials on `root` (another server's root, say): it serves
    /// every object there to anyone, ranged GETs included, at
    /// `http://ADDR/bucket/key` ([`S3Server::public_url`]), as a project's web server serves
    /// its published `kzg_bn254_22.srs`.
    pub fn start_s3s_fs_public(binary: &Path, root: &Path) -> S3Server {
        Self::s3s_fs(binary, root, false)
    }

    fn s3s_fs(binary: &Path, root: &Path, credentials: bool) -> S3Server {
        std::fs::create_dir_all(root).expect("the server's root directory");
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let log = root.with_extension(format!("{port}.log"));
        let keys = match credentials {
            true => "--access-key keycodec-test --secret-key keycodec-test",
            false => "",
        };
        let child = spawn(
            &format!(
                "'{}' --host 127.0.0.1 --port {port} {keys} '{}'",
                binary.display(),
                root.display()
            ),
            addr,
            &log,
            "s3s-fs",
        );
        S3Server {
            addr,
            child: Some(child),
            root: Some(root.to_path_buf()),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A new, empty bucket (named after `prefix`, unique in this process).
    pub fn bucket(&self, prefix: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        if let Some(root) = &self.root {
            // s3s-fs: a bucket is a folder of its root.
            std::fs::create_dir_all(root.join(&name)).expect("the bucket's folder");
            return name;
        }
        let response = request(
            self.addr,
            &format!("PUT /{name} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"),
        )
        .expect("moto answers");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        name
    }
}

impl S3Server {
    /// Puts `body` at `bucket/key` readable by anyone (moto's `public-read` ACL): a file any
    /// HTTP client fetches at [`S3Server::public_url`], answering ranged GETs, as a project's
    /// published `kzg_bn254_22.srs` is.
    ///
    /// # Panics
    ///
    /// When the server refuses (not moto).
    pub fn put_public(&self, bucket: &str, key: &str, body: &[u8]) {
        let head = format!(
            "PUT /{bucket}/{key} HTTP/1.1\r\nHost: localhost\r\nx-amz-acl: public-read\r\n\
             Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let response = request_with_body(self.addr, &head, body).expect("moto answers");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }

    /// `http://ADDR/bucket/key`: where anyone reads what [`S3Server::put_public`] put, here
    /// or through a proxy at `addr`.
    pub fn public_url(addr: SocketAddr, bucket: &str, key: &str) -> String {
        format!("http://{addr}/{bucket}/{key}")
    }
}

/// An S3 client of `bucket` at `endpoint` with test credentials and quick retries (a few,
/// milliseconds apart), so that fault tests run fast.
pub fn store(endpoint: &str, bucket: &str) -> Arc<dyn ObjectStore> {
    store_timing_out(endpoint, bucket, Duration::from_secs(30))
}

/// [`store`], its requests timing out after `timeout` (a stalled or trickling server's
/// request fails, and is retried, sooner).
pub fn store_timing_out(endpoint: &str, bucket: &str, timeout: Duration) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_client_options(ClientOptions::new().with_timeout(timeout))
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("keycodec-test")
            .with_secret_access_key("keycodec-test")
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(5),
                    max_backoff: Duration::from_millis(50),
                    base: 2.0,
                },
                max_retries: 4,
                retry_timeout: Duration::from_secs(30),
            })
            .build()
            .expect("an S3 client"),
    )
}

/// Sends one raw HTTP request with a body and returns the response as text.
fn request_with_body(addr: SocketAddr, head: &str, body: &[u8]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(
        head.replace("HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n")
            .as_bytes(),
    )?;
    stream.write_all(body)?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

/// Sends one raw HTTP request and returns the response's head and body as text.
fn request(addr: SocketAddr, text: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(
        text.replace("HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n")
            .as_bytes(),
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}
