//! Object storage (feature `remote`): S3 and compatible stores, and public files by HTTP(S)
//! URL. An artifact there is a [`crate::Location::Object`] (made by
//! [`Location::url`](crate::Location::url), or from a [`Remote`] configured in code), loaded
//! with [`crate::load_key`] and [`crate::open_params`] through the machine's one cache.
//! [`fetch_params`] fills the cache ahead of a start and says whether it was warm; a
//! manifest's artifacts are fetched together with
//! [`Manifest::fetch`](crate::manifest::Manifest::fetch).
//!
//! # The transport
//!
//! Keys and parameters in object storage (S3 and compatible stores), through the
//! [`object_store`] crate: saved by a multipart upload streamed from the key's memory, loaded
//! by ranged GETs decoded as they arrive (the cache, in `cache`, keeps what they fetched).
//!
//! A load is the file load with another source of bytes: one ranged GET of the object's first
//! bytes, whose answer also says its size and ETag, sent with the load's first round (a proving
//! key's or parameters' next megabytes, see [`RemoteOptions::first_round`]); then the small
//! fields from ranges fetched ahead of the decoder, and the polynomials by ranges fetched
//! straight into the key's memory, as many at once as the link rewards (see
//! [`RemoteOptions::concurrency`]). Every range is requested on the condition that the
//! object is still the version the load started with (`If-Match`), but for the first request
//! and a first round sent with it, before any version is known, whose answers must each
//! describe the object as the first answer did; so a key is never assembled from two
//! versions ([`Error::ObjectChanged`]);
//! the payload checksum and any digest pin are verified on exactly the bytes decoded, as
//! for files. Failed requests and connections broken mid-body are retried by `object_store`
//! (its [`RetryConfig`](object_store::RetryConfig), with exponential backoff), resuming a
//! range where it broke.
//!
//! A save encodes the container twice, first to learn its header (length, checksum, digest),
//! then into a multipart upload of parts sized from that length (see
//! [`RemoteOptions::part_size`]), [`RemoteOptions::upload_concurrency`] in flight at the
//! start and more while the upload's throughput grows with them: memory stays within
//! [`RemoteOptions::memory`], whatever the key's size. The object appears only when the upload completes; a failed save aborts
//! the upload, and a process that dies mid-save leaves no object either (an incomplete
//! multipart upload is never visible). Its parts stay stored, and billed, until the upload is
//! aborted: S3 keeps the parts of an upload that was neither completed nor aborted until a
//! lifecycle rule (`AbortIncompleteMultipartUpload`) removes them, or `aws s3api
//! list-multipart-uploads` and `abort-multipart-upload` do.
//!
//! [`Remote`] is a blocking API, like the rest of keycodec: it runs its own small runtime.
//! Call it from ordinary threads (in async code, from `spawn_blocking`); called from an
//! async task it returns [`Error::Internal`] rather than block the executor.

pub(crate) mod cache;
mod fetch;
mod flow;
mod held;
mod object;
mod options;
mod readahead;
mod transfer;
mod upload;

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// The `object_store` crate this module is built on, to build a store for [`Remote::new`].
#[doc(no_inline)]
pub use object_store;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::runtime::{Handle, Runtime};

use fetch::{Fetcher, Tee};
use flow::{Flow, Growth};
use held::{Held, HeldRanges};
use keycodec_core::backend_api::circuit::configure;
use keycodec_core::halo2_proofs::plonk::{Circuit, ConstraintSystem};
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::record::RecordableParams;
use keycodec_core::transport::{self, Decoded, Described, Input, ItemRef, Request};
use keycodec_core::{
    ArtifactKind, Error, HaloKey, KeyCodec, KeyDigest, KzgParams, LoadOptions, Result,
};
use object::ObjectSource;
use readahead::ReadAhead;
use upload::UploadWriter;

pub use cache::{fetch_params, CacheOutcome, Fetched};
pub use options::RemoteOptions;
pub(crate) use options::{range_piece, MAX_CONCURRENCY_CEILING};
pub(crate) use transfer::Opened;

/// What the store says about an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its size in bytes.
    pub size: u64,
    /// Its ETag, if the store gives one: every ranged read of a load is conditional on it.
    pub e_tag: Option<String>,
    /// Its version, in a versioned bucket.
    pub version: Option<String>,
}

impl From<object_store::ObjectMeta> for ObjectInfo {
    /// What a HEAD's or a GET's response says of the object.
    fn from(meta: object_store::ObjectMeta) -> Self {
        ObjectInfo {
            size: meta.size,
            e_tag: meta.e_tag,
            version: meta.version,
        }
    }
}

/// An object store and how keycodec uses it. Cheap to share by reference across threads.
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    /// Shut down without blocking on drop (see `Drop`), so always `Some` until then.
    runtime: Option<Runtime>,
    options: RemoteOptions,
    /// How objects are named in errors: the URL's scheme and bucket, or the store.
    base: String,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("store", &self.base)
            .field("options", &self.options)
            .finish()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is not allowed in async code; this never does.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// An error of the store doing `operation`.
pub(crate) fn store_error(operation: &'static str, err: object_store::Error) -> Error {
    Error::ObjectStore {
        operation,
        missing: matches!(err, object_store::Error::NotFound { .. }),
        source: Box::new(err),
    }
}

impl Remote {
    /// Uses `store` (any `object_store` implementation: S3, an in-memory store...).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the runtime's threads cannot be started, [`Error::Internal`] when
    /// called from an async task.
    pub fn new(store: Arc<dyn ObjectStore>) -> Result<Self> {
        let base = store.to_string();
        Self::build(store, base)
    }

    /// The store and object a URL names, by its scheme alone:
    ///
    /// - `s3://bucket/path/to/key.pk`: an S3 object, configured from the environment as the
    ///   AWS tools are (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    ///   `AWS_ENDPOINT` for S3-compatible servers, `AWS_ALLOW_HTTP=true` for a plain-HTTP
    ///   endpoint, `AWS_SKIP_SIGNATURE=true` for a public bucket, `AWS_TIMEOUT` for the
    ///   limit on each request, 30 s unless set: completing a multi-GB upload can take a
    ///   server longer, so for keys of many GB give it minutes, `AWS_TIMEOUT=5m`...);
    /// - `https://host/path` (or `http://`): a file any web server serves, fetched by plain
    ///   unsigned ranged GETs, whatever the host: `https://bucket.s3.amazonaws.com/file` is
    ///   a public file (no credentials are looked up or sent), not an S3 object (the server
    ///   must answer `Range` requests; uploads are not supported there);
    /// - `memory:///path`: an empty in-memory store.
    ///
    /// With `object_store`'s retries: up to 10 per request with exponential backoff, within 3
    /// minutes.
    ///
    /// # Errors
    ///
    /// [`Error::ObjectStore`] for a URL that does not parse, another scheme, a URL with a
    /// user name, password, query or fragment (a pre-signed URL: its query would be dropped),
    /// or a configuration the store refuses; and as [`Remote::new`].
    pub fn from_url(url: &str) -> Result<(Self, ObjectPath)> {
        let bad = |source: Box<dyn std::error::Error + Send + Sync>| Error::ObjectStore {
            operation: "use the URL",
            source,
            missing: false,
        };
        let parsed = url::Url::parse(url).map_err(|err| bad(Box::new(err)))?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(bad(format!(
                "{url}: a user name or password in the URL is not supported (S3 credentials \
                 come from AWS_* variables)"
            )
            .into()));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(bad(format!(
                "{url}: a query or fragment in the URL is not supported (pre-signed URLs are \
                 not: the object is named by its path alone)"
            )
            .into()));
        }
        let location =
            ObjectPath::from_url_path(parsed.path()).map_err(|err| bad(Box::new(err)))?;
        let host = parsed.host_str().filter(|host| !host.is_empty());
        let origin = match (host, parsed.port()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", parsed.scheme()),
            (Some(host), None) => format!("{}://{host}", parsed.scheme()),
            (None, _) => format!("{}://", parsed.scheme()),
        };
        let store: Arc<dyn ObjectStore> = match (parsed.scheme(), host) {
            ("s3", Some(_)) => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(|err| bad(Box::new(err)))?,
            ),
            ("http" | "https", Some(_)) => {
                // An `http://` URL asks for plain HTTP; `https://` is required otherwise.
                let client =
                    object_store::ClientOptions::new().with_allow_http(parsed.scheme() == "http");
                Arc::new(
                    object_store::http::HttpBuilder::new()
                        .with_url(origin.as_str())
                        .with_client_options(client)
                        .build()
                        .map_err(|err| bad(Box::new(err)))?,
                )
            }
            ("memory", None) => Arc::new(object_store::memory::InMemory::new()),
            _ => {
                return Err(bad(format!(
                    "{url}: not a URL keycodec reads (s3://bucket/path, https://host/path, \
                     http://host/path or memory:///path)"
                )
                .into()))
            }
        };
        Ok((Self::build(store, origin)?, location))
    }

    fn build(store: Arc<dyn ObjectStore>, base: String) -> Result<Self> {
        outside_async()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("keycodec-store")
            .enable_all()
            .build()
            .map_err(|err| Error::io("start the object storage client's threads", err))?;
        Ok(Remote {
            store,
            runtime: Some(runtime),
            options: RemoteOptions::default(),
            base,
        })
    }

    /// The same store with other transfer options.
    #[must_use]
    pub fn with_options(mut self, options: RemoteOptions) -> Self {
        self.options = options;
        self
    }

    /// Its transfer options.
    pub fn options(&self) -> &RemoteOptions {
        &self.options
    }

    /// Whether it fetches over plain `http://` (an `http://` URL): nothing authenticates
    /// what it hands over but a pin.
    pub fn is_plain_http(&self) -> bool {
        self.base.starts_with("http://")
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// How errors name `location`: `s3://bucket/path`.
    pub fn name(&self, location: &ObjectPath) -> String {
        format!("{}/{location}", self.base.trim_end_matches('/'))
    }

    fn handle(&self) -> Result<&Handle> {
        outside_async()?;
        self.runtime
            .as_ref()
            .map(Runtime::handle)
            .ok_or_else(|| Error::Internal("the object storage runtime is gone".into()))
    }
}

/// Refuses to block inside an async task (which would stall or panic the executor).
fn outside_async() -> Result<()> {
    match Handle::try_current() {
        Ok(_) => Err(Error::Internal(
            "keycodec's object storage calls block: call them from a thread that runs no \
             async task (tokio::task::spawn_blocking)"
                .into(),
        )),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Concurrencies past the ceiling, or a most below a least, are bounded, not a panic
    /// (`clamp` with its least over its most panicked for `concurrency` over 256).
    #[test]
    fn any_concurrency_is_bounded_without_a_panic() {
        for (concurrency, max_concurrency) in [
            (0, 0),
            (1000, 64),
            (64, 1000),
            (usize::MAX, usize::MAX),
            (300, 0),
        ] {
            let options = RemoteOptions {
                concurrency,
                max_concurrency,
                ..RemoteOptions::default()
            };
            let ceiling = options.ceiling();
            assert!((1..=MAX_CONCURRENCY_CEILING).contains(&ceiling));
            assert!((1..=ceiling).contains(&options.starting()));
        }
    }
}
