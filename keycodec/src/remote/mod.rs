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
//! A load is the file load with another source of bytes: the object's metadata first (its
//! size and ETag), then the header and the small fields from ranges fetched ahead of the
//! decoder, then the polynomials by ranges fetched straight into the key's memory, as many
//! at once as the link rewards (see [`RemoteOptions::concurrency`]). Every range is
//! requested on the condition that the object is still the version the load started with
//! (`If-Match`), so a key is never assembled from two versions ([`Error::ObjectChanged`]);
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
mod flow;
mod object;
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

use flow::{Flow, Growth};
use keycodec_core::backend_api::circuit::configure;
use keycodec_core::halo2_proofs::plonk::{Circuit, ConstraintSystem};
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::record::RecordableParams;
use keycodec_core::transport::{self, Decoded, Described, Input, ItemRef, Request};
use keycodec_core::{
    ArtifactKind, Error, HaloKey, KeyCodec, KeyDigest, KzgParams, LoadOptions, Result,
};
use object::{Fetcher, ObjectSource, ReadAhead, Tee};
use upload::UploadWriter;

pub use cache::{fetch_params, CacheOutcome, Fetched};

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
    /// The largest ranged GET of a load or a download; smaller objects are fetched in smaller
    /// ranges (a share of the object per request in flight, at least 1 MiB). Rounded to a
    /// power of two of at least 4 MiB. Default 16 MiB.
    pub range_size: usize,
    /// Ranged GETs in flight at the start of a load or a download. While the transfer's
    /// throughput, measured as it runs, grows by 15% or more with each step, half as many
    /// again are added, up to [`RemoteOptions::max_concurrency`]; when it stops growing, so
    /// do they. Default 32 (one S3 stream carries 50-100 MB/s: 16 fill about 10 Gbit/s, 32
    /// about 20 Gbit/s, with latency hidden behind the other requests).
    pub concurrency: usize,
    /// The most ranged GETs in flight (each on its own thread, where its bytes are checked
    /// as they land; at most 256). A load's requests land in the key's own memory, a
    /// download's in its file: neither holds more for more requests. Default 64.
    pub max_concurrency: usize,
    /// Bytes a transfer may hold beyond the key itself: an upload's parts in flight, a
    /// streamed decoder's reads ahead. Default 1 GiB.
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
            memory: 1 << 30,
            lock_timeout: keycodec_core::DEFAULT_LOCK_TIMEOUT,
        }
    }
}

/// The most bytes a streamed decoder's reads ahead hold (within [`RemoteOptions::memory`]):
/// 64 windows of 1 MiB, enough to keep the most requests in flight.
const READ_AHEAD: u64 = 64 << 20;

/// The most requests in flight any transfer keeps (a bound on [`RemoteOptions::max_concurrency`]).
pub(crate) const MAX_CONCURRENCY_CEILING: usize = 256;

impl RemoteOptions {
    /// The largest ranged GET, a power of two of at least the core's bulk step.
    fn largest_range(&self) -> usize {
        self.range_size
            .max(transport::BULK_STEP)
            .checked_next_power_of_two()
            .unwrap_or(transport::BULK_STEP)
    }

    /// An upload's part for `size` bytes, if known (see [`RemoteOptions::part_size`]).
    fn part_for(&self, size: Option<u64>) -> usize {
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
    fn ceiling(&self) -> usize {
        // Every bound within the ceiling first: `clamp` panics when its least is over its most.
        let least = self.concurrency.clamp(1, MAX_CONCURRENCY_CEILING);
        self.max_concurrency.clamp(least, MAX_CONCURRENCY_CEILING)
    }

    /// Ranged GETs in flight at the start, within [`RemoteOptions::ceiling`].
    fn starting(&self) -> usize {
        self.concurrency.clamp(1, self.ceiling())
    }

    /// A download's range for an object of `size` bytes (see [`range_piece`]).
    fn download_piece(&self, size: u64) -> u64 {
        range_piece(size, self.ceiling(), self.largest_range())
    }
}

/// The range each GET fetches of `len` bytes fetched at once: about two per request the flow
/// may keep in flight (`ceiling`), from 256 KiB to `largest` (larger pieces would leave a
/// small read's last ones alone on the link, each capped as one stream is).
pub(crate) fn range_piece(len: u64, ceiling: usize, largest: usize) -> u64 {
    (len / (2 * ceiling.max(1) as u64)).clamp(256 << 10, (largest as u64).max(256 << 10))
}

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
    ///   endpoint, `AWS_SKIP_SIGNATURE=true` for a public bucket...);
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
            .thread_name("keycodec-remote")
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

    /// The object's size, ETag and version.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around [`Error::ObjectStore`] (a missing object
    /// among others).
    pub fn head(&self, location: &ObjectPath) -> Result<ObjectInfo> {
        let head = || {
            let meta = self
                .handle()?
                .block_on(self.store.head(location))
                .map_err(|err| store_error("read the metadata of", err))?;
            Ok(ObjectInfo::from(meta))
        };
        head().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// The container header of the object at `location` (one ranged GET of its first bytes),
    /// checked: which codec, kind, `k` and circuit it holds, before anything else is read.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around the store's errors and the header's
    /// ([`Error::BadMagic`], [`Error::HeaderChecksum`], [`Error::Truncated`]...).
    pub fn header(&self, location: &ObjectPath) -> Result<Header> {
        let info = self.head(location)?;
        self.header_of(location, &info)
    }

    /// The container header of the object at `location` as [`Remote::head`] described it
    /// (`info`): its first bytes, by one ranged GET conditional on that version.
    ///
    /// # Errors
    ///
    /// As [`Remote::header`].
    pub fn header_of(&self, location: &ObjectPath, info: &ObjectInfo) -> Result<Header> {
        let read = || {
            let len = usize::try_from(info.size.min(HEADER_LEN as u64)).unwrap_or(HEADER_LEN);
            let mut bytes = [0u8; HEADER_LEN];
            let head = bytes.get_mut(..len).unwrap_or_default();
            self.read_range(location, info, head, 0)?;
            Header::from_bytes(bytes.get(..len).unwrap_or_default())
        };
        read().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// Fills `buf` with the object's bytes from `offset`, as [`Remote::head`] described it
    /// (`info`): ranged GETs conditional on that version.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around [`Error::Truncated`] for a range past its
    /// end, [`Error::ObjectChanged`] and the store's errors.
    pub fn read_range(
        &self,
        location: &ObjectPath,
        info: &ObjectInfo,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<()> {
        let mut read = || {
            let source = self.source(location, info, None)?;
            let read = transport::ReadAt::read_exact_at(&source, buf, offset);
            if let Some(failure) = source.take_failure() {
                return Err(failure);
            }
            read.map_err(|err| Error::from_read(err, "a range of the object"))
        };
        read().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// Saves a key to `location` (see the module docs: nothing appears under that name
    /// unless the whole upload succeeds); returns its digest, which the object records.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around the store's errors and the codec's.
    pub fn save<C: Circuit<Fr>, K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        key: &K,
        circuit_params: C::Params,
    ) -> Result<KeyDigest>
    where
        C::Params: RecordableParams,
    {
        let circuit = Described::of::<C>(circuit_params);
        let keep = self.kept_payload(codec);
        self.upload(location, None, &|_| {}, keep, |writer| {
            let item = ItemRef::Key(key.as_key_ref());
            transport::write_in_order(codec, item, &circuit, writer, keep)
        })
    }

    /// Saves KZG parameters to `location`, as [`Remote::save`] saves keys.
    ///
    /// # Errors
    ///
    /// As [`Remote::save`], and [`Error::KindNotSupported`] from codecs that do not store
    /// parameters.
    pub fn save_params(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        params: &KzgParams,
    ) -> Result<KeyDigest> {
        let keep = self.kept_payload(codec);
        self.upload(location, None, &|_| {}, keep, |writer| {
            let item = ItemRef::Params(params);
            transport::write_in_order(codec, item, &Described::none(), writer, keep)
        })
    }

    /// Bytes of a save's first encoding kept to be uploaded as they are: half of
    /// [`RemoteOptions::memory`] for a codec whose encoding is costly (the parts in flight
    /// get the other half), none for the rest, which are encoded twice.
    fn kept_payload(&self, codec: &dyn KeyCodec) -> usize {
        match codec.costly_encoding() {
            true => self.options.memory / 2,
            false => 0,
        }
    }

    /// Uploads the open `file` as it is (a container saved earlier: check it first, from the
    /// same open file), from its start whatever its cursor, to `location`, reporting bytes
    /// sent to `progress`; returns the bytes uploaded. `path` names it in errors. A file that
    /// changes while it is uploaded (its length, times or inode move) is not uploaded: the
    /// upload is aborted, and no object appears.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file, [`Error::FileChanged`], and as [`Remote::save`].
    pub fn upload_file(
        &self,
        file: &File,
        path: &Path,
        location: &ObjectPath,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64> {
        let before = keycodec_core::FileStamp::of(file).map_err(|err| err.at_path(path))?;
        let size = file
            .metadata()
            .map_err(|err| Error::io("read the size of", err).at_path(path))?
            .len();
        self.upload(location, Some(size), progress, 0, |writer| {
            let mut reader = PositionedReader { file, offset: 0 };
            let sent = std::io::copy(&mut reader, writer)
                .map_err(|err| Error::from_read(err, "the file").at_path(path))?;
            // Checked before the upload completes: a changed file aborts it.
            if sent != size || keycodec_core::FileStamp::of(file).ok().as_ref() != Some(&before) {
                return Err(Error::FileChanged {
                    path: path.to_path_buf(),
                });
            }
            Ok(sent)
        })
    }

    /// Uploads what `write` writes, in parts sized for `size` bytes when it is known (or
    /// for the container whose header the bytes begin with), the parts in flight within
    /// [`RemoteOptions::memory`] less the `held` bytes `write` may hold itself.
    fn upload<T>(
        &self,
        location: &ObjectPath,
        size: Option<u64>,
        progress: &(dyn Fn(u64) + Sync),
        held: usize,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<T>,
    ) -> Result<T> {
        let upload = || {
            let handle = self.handle()?;
            let (store, at) = (Arc::clone(&self.store), location.clone());
            let started = handle.spawn(async move { store.put_multipart(&at).await });
            let options = RemoteOptions {
                memory: self.options.memory.saturating_sub(held),
                ..self.options
            };
            let mut writer = UploadWriter::new(handle, started, size, options, progress);
            // Small writes (a verifying key's fields) are gathered before they reach the
            // part buffer.
            let written = {
                let mut buffered = std::io::BufWriter::with_capacity(1 << 20, &mut writer);
                write(&mut buffered).and_then(|written| {
                    std::io::Write::flush(&mut buffered)
                        .map_err(|err| Error::io("upload", err))
                        .map(|()| written)
                })
            };
            match written {
                Ok(written) => writer.finish().map(|()| written),
                Err(err) => Err(writer.abort(err)),
            }
        };
        upload().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// Loads a key from `location` (see the module docs), with every check a file load
    /// makes: the object's size stands for the file's length.
    ///
    /// # Errors
    ///
    /// [`Error::Remote`] naming the object, around what a file load reports (a truncated or
    /// corrupt object, a pin mismatch...), [`Error::ObjectStore`] and
    /// [`Error::ObjectChanged`].
    pub fn load<C: Circuit<Fr>, K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        self.load_key(
            codec,
            location,
            configure::<C>(circuit_params),
            options,
            None,
        )
    }

    /// Loads a key from `location` as [`Remote::load`] does, for the circuit whose constraint
    /// system `configure` built (`cs`, as `keycodec_core::backend_api::circuit::configure` gives
    /// it), from the version of the object `info` describes (as [`Remote::head`] gave it),
    /// writing every byte of that version into `file` too (sized to `info.size` first; ranges
    /// the load did not need are fetched after it): a cache's miss, whose file holds exactly
    /// the bytes the load checked. A verifying key may come from a proving key's container.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`], and [`Error::Io`] writing the file.
    pub fn load_into<K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        info: &ObjectInfo,
        file: &File,
        cs: ConstraintSystem<Fr>,
        options: &LoadOptions,
    ) -> Result<K> {
        self.load_key(codec, location, cs, options, Some((file, info)))
    }

    /// A key of kind `K` from any container that holds one ([`Request::for_key`]), written
    /// into `tee` too when given (see [`Remote::read`]).
    fn load_key<K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        cs: ConstraintSystem<Fr>,
        options: &LoadOptions,
        tee: Option<(&File, &ObjectInfo)>,
    ) -> Result<K> {
        let decoded = self.read(
            codec,
            location,
            Request::for_key(K::KIND),
            Some(cs),
            options,
            tee,
        )?;
        into_key(decoded, &self.name(location))
    }

    /// Loads KZG parameters from `location`, as [`Remote::load`] loads keys.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`].
    pub fn load_params(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        options: &LoadOptions,
    ) -> Result<KzgParams> {
        let decoded = self.read(
            codec,
            location,
            Request::of(ArtifactKind::Params),
            None,
            options,
            None,
        )?;
        transport::into_params(decoded)
    }

    /// Downloads the object, as [`Remote::head`] described it (`info`), into `file` (from
    /// its start, by ranged GETs at once, each conditional on that version), reporting bytes
    /// received to `progress`. The file is sized to `info.size` first: a size is the server's
    /// claim, so bound it by what the object should hold before calling this (a container's
    /// header, parameters' `k`). The bytes are not checked: load or verify the file before
    /// trusting it.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`] ([`Error::ObjectChanged`] when the object is no longer that
    /// version), and [`Error::Io`] writing the file.
    pub fn download_to(
        &self,
        location: &ObjectPath,
        info: &ObjectInfo,
        file: &File,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        let download = || {
            file.set_len(info.size)
                .map_err(|err| Error::io("size the download file", err))?;
            let source = self.source(location, info, Some(file))?;
            self.fill(&source, 0..info.size, progress)
        };
        download().map_err(|err: Error| err.in_object(&self.name(location)))
    }

    /// A source of the object's bytes, writing them to `tee` too, if given.
    fn source(
        &self,
        location: &ObjectPath,
        info: &ObjectInfo,
        tee: Option<&File>,
    ) -> Result<ObjectSource> {
        let tee = match tee {
            Some(file) => Some(Tee {
                file: file
                    .try_clone()
                    .map_err(|err| Error::io("open again the download file", err))?,
                written: Mutex::new(Vec::new()),
            }),
            None => None,
        };
        let ceiling = self.options.ceiling();
        Ok(ObjectSource {
            fetcher: Arc::new(Fetcher {
                store: Arc::clone(&self.store),
                location: location.clone(),
                info: info.clone(),
                tee,
                flow: Flow::new(Growth::new(self.options.starting(), ceiling)),
            }),
            handle: self.handle()?.clone(),
            range_size: self.options.largest_range(),
            threads: ceiling,
            pool: OnceLock::new(),
            readahead: Mutex::new(ReadAhead::default()),
            read_ahead: (self.options.memory as u64).min(READ_AHEAD),
            failure: Mutex::new(None),
        })
    }

    /// The object's size, ETag and version, with its first bytes when one ranged GET could
    /// bring both (see [`object::opening`]), else by [`Remote::head`] alone.
    fn describe(&self, location: &ObjectPath) -> Result<(ObjectInfo, Option<Vec<u8>>)> {
        let opened = self
            .handle()?
            .block_on(object::opening(&*self.store, location, object::OPENING))
            .map_err(|err| err.in_object(&self.name(location)))?;
        match opened {
            Some((info, bytes)) => Ok((info, Some(bytes))),
            None => Ok((self.head(location)?, None)),
        }
    }

    /// Fetches `range` of the object into `source`'s tee, in ranges sized for the object, as
    /// many in flight as its flow allows.
    fn fill(
        &self,
        source: &ObjectSource,
        range: std::ops::Range<u64>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<()> {
        let piece = self.options.download_piece(source.fetcher.info.size);
        let filled = source
            .handle
            .block_on(source.fetcher.download(range, piece, progress));
        match source.take_failure() {
            Some(failure) => Err(failure),
            None => filled,
        }
    }

    /// Reads one container from the object; with `tee`, every byte of the object (the version
    /// its info describes) ends up in that file too (ranges the load did not need are fetched
    /// after it); without, the object's version is asked for first.
    fn read(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        request: Request,
        cs: Option<ConstraintSystem<Fr>>,
        options: &LoadOptions,
        tee: Option<(&File, &ObjectInfo)>,
    ) -> Result<Decoded> {
        let described;
        let (tee, info, opening) = match tee {
            Some((file, info)) => (Some(file), info, None),
            None => {
                let (info, opening) = self.describe(location)?;
                described = info;
                (None, &described, opening)
            }
        };
        let read = || {
            if let Some(file) = tee {
                file.set_len(info.size)
                    .map_err(|err| Error::io("size the cache file", err))?;
            }
            let source = self.source(location, info, tee)?;
            if let Some(bytes) = opening {
                source.seed(bytes);
            }
            let decoded = transport::read(
                codec,
                request,
                cs,
                Input::At {
                    source: &source,
                    len: info.size,
                    buffer: options.buffers.file_read_capacity(),
                },
                options,
            );
            // The store's failure, not what it made the reader see (a short read...).
            let decoded = match source.take_failure() {
                Some(failure) => Err(failure),
                None => decoded,
            }?;
            if let Some(tee) = &source.fetcher.tee {
                for gap in tee.gaps(info.size) {
                    self.fill(&source, gap, &|_| {})?;
                }
            }
            Ok(decoded)
        };
        read().map_err(|err: Error| err.in_object(&self.name(location)))
    }
}

/// Reads a file from an offset by positioned reads (its cursor, shared with every clone of
/// the handle, is left alone).
struct PositionedReader<'f> {
    file: &'f File,
    offset: u64,
}

impl std::io::Read for PositionedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = keycodec_core::transport::ReadAt::read_at(self.file, buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// The key a load decoded, its errors naming `object`.
fn into_key<K: HaloKey>(decoded: Decoded, object: &str) -> Result<K> {
    transport::into_key(decoded).map_err(|err| err.in_object(object))
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
