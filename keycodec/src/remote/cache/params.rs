//! KZG parameters through the cache: fetched from S3 or any HTTP(S) server
//! (`kzg_bn254_22.srs` as a project publishes it, pinned by its SHA-256).
//!
//! The cache holds the checked container of the parameters and, for a smaller `k`, their
//! downsized container, named by the pin (`params-sha256-{hex}`, `params-{digest}`) or,
//! unpinned (`https://` and `s3://` only), by the object's name, ETag and size. A hit is a
//! local load of that container with the cache's own options (its own codec, values trusted:
//! they were checked when it was made; the payload checksum is still verified), with no
//! request when the parameters are pinned. A miss downloads the object once per machine: the
//! object's size is checked against what its first bytes say the parameters hold (their `k`
//! within [`Limits::max_k`](keycodec_core::Limits::max_k), the layout's length) before any disk
//! is spent on it; the download goes into a temporary file of the cache, its SHA-256 is
//! checked on that open file before anything is read from it, it is imported with every point
//! checked, a digest pin is checked, and only then is the container saved: a tampered,
//! truncated, oversized or substituted download is refused and never left in the cache.
//! Downsizing happens under the same lock: once per machine. Parameters checked and in memory
//! are returned even when the cache cannot keep them (a full disk).

use std::path::{Path, PathBuf};

use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::{
    downsize, lock_beside, Error, KeyCodec, KeyCodecExt, KzgParams, LoadOptions, Result,
    SaveOptions, Validation,
};

use super::{first_bytes, remove_damaged, version_name, CacheOutcome};

use crate::backend::Backend;
use crate::location::Object;
use crate::params::{expected_length, read_pinned_file, ParamsOptions, ParamsPin, Shared};
use crate::remote::Opened;

/// Parameters fetched through the cache, and where they are cached.
#[derive(Debug)]
pub struct Fetched {
    /// The parameters (downsized to the `k` asked for).
    pub params: KzgParams,
    /// Whether the cache had them (and the container they were loaded from) or they were
    /// downloaded (and the container now caching them).
    pub outcome: CacheOutcome,
}

/// Opens the parameters of `object` through its cache directory (see the module docs), as
/// `options` asks: pinned by `options.pin`, fitted to `options.k` (downsized once per machine
/// when larger; smaller ones refused before they are downloaded); `progress` is told the
/// bytes of a download as they arrive.
///
/// # Errors
///
/// [`Error::FileHashMismatch`] or [`Error::DigestMismatch`] for parameters that are not the
/// pinned ones, [`Error::KMismatch`] for parameters smaller than `options.k`,
/// [`Error::KOutOfRange`] or [`Error::Malformed`] for an object whose size or first bytes are
/// no parameters within the limits, the store's errors, decode errors of the download (each
/// [`Error::Remote`] naming the object), [`Error::Io`] naming the cache's files,
/// [`Error::NotCompiled`] without the rawbytes backend (the cache's format).
pub fn fetch_params(
    object: &Object,
    options: &ParamsOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Fetched> {
    let name = object.name();
    let cache = &object.cache;
    std::fs::create_dir_all(cache)
        .map_err(|err| Error::io("create the cache directory", err).at_path(cache))?;
    // Unpinned, the name needs the object's version: asked for once, and a download is of
    // that version.
    let mut info = None;
    let base = match options.pin {
        Some(ParamsPin::Sha256(hash)) => {
            format!("params-sha256-{}", keycodec_core::hex::encode(&hash))
        }
        Some(ParamsPin::Digest(digest)) => format!("params-{digest}"),
        None => {
            if object.remote.is_plain_http() {
                return Err(Error::UnpinnedOverHttp { url: name });
            }
            let head = object.remote.head(&object.path)?;
            let version = version_name(&object.remote, &object.path, &head)?;
            info = Some(head);
            format!("params-{version}")
        }
    };
    let entries = Entries {
        full: cache.join(format!("{base}.kc")),
        base,
        cache,
        k: options.k,
        test_setup: options.test_setup,
    };
    let k_of = |params: &KzgParams| params.k();
    let too_small = |params: &KzgParams, k: u32| {
        Error::KMismatch {
            expected: k,
            found: k_of(params),
        }
        .in_object(&name)
    };
    // Without the lock: the common case, a warm cache.
    if let Some(fetched) = entries.ready(false)? {
        return entries.within_limits(fetched, options);
    }
    if let (Some(k), Some(full)) = (options.k, entries.load(&entries.full, false)?) {
        if k > full.k() {
            return Err(too_small(&full, k));
        }
    }
    let _lock = lock_beside(&entries.full, object.remote.options().lock_timeout)?;
    // Another process may have fetched or downsized them while this one waited.
    if let Some(fetched) = entries.ready(true)? {
        return entries.within_limits(fetched, options);
    }
    if let Some(full) = entries.load(&entries.full, true)? {
        let (k, full_k) = (options.k.unwrap_or(full.k()), full.k());
        if k > full_k {
            return Err(too_small(&full, k));
        }
        let params = entries.downsized(full, k)?;
        return entries.within_limits(
            Fetched {
                params,
                outcome: CacheOutcome::Hit(entries.path_for(k, full_k)),
            },
            options,
        );
    }
    // To be downloaded: its version and first bytes by one request where no HEAD named it.
    let opened = match info {
        Some(info) => Opened::of(info),
        None => object.remote.open_header(&object.path)?,
    };
    let params = download(object, &opened, &entries.full, options, progress)?;
    // The cache is a copy: parameters checked and in memory are returned even when it cannot
    // be written (a full or read-only disk); the next start downloads them again.
    let _ = save_params(&entries.full, &params);
    let (k, full_k) = (options.k.unwrap_or(params.k()), params.k());
    let params = entries.downsized(params, k)?;
    Ok(Fetched {
        params,
        outcome: CacheOutcome::Miss(entries.path_for(k, full_k)),
    })
}

/// The parameters of `object` if its cache holds them for `options.k` already, pinned (an
/// unpinned entry is named by the object's version, which only the store can tell): no
/// request is made. `None` when they are not cached (or unpinned).
///
/// # Errors
///
/// As loading the cached container ([`Error::Io`] other than a missing file), and
/// [`Error::KOutOfRange`] past the caller's limits.
pub(crate) fn cached_params(object: &Object, options: &ParamsOptions) -> Result<Option<Fetched>> {
    let base = match options.pin {
        Some(ParamsPin::Sha256(hash)) => {
            format!("params-sha256-{}", keycodec_core::hex::encode(&hash))
        }
        Some(ParamsPin::Digest(digest)) => format!("params-{digest}"),
        None => return Ok(None),
    };
    let entries = Entries {
        full: object.cache.join(format!("{base}.kc")),
        base,
        cache: &object.cache,
        k: options.k,
        test_setup: options.test_setup,
    };
    match entries.ready(false)? {
        Some(fetched) => entries.within_limits(fetched, options).map(Some),
        None => Ok(None),
    }
}

/// The cache files of one set of parameters.
struct Entries<'a> {
    cache: &'a Path,
    base: String,
    /// The parameters as published.
    full: PathBuf,
    /// The `k` asked for.
    k: Option<u32>,
    /// Whether the caller accepts a known test setup.
    test_setup: keycodec_core::TestSetup,
}

impl Entries<'_> {
    /// Where the parameters for `k` are cached: the full ones, or a downsized copy.
    fn path_for(&self, k: u32, full_k: u32) -> PathBuf {
        if k == full_k {
            self.full.clone()
        } else {
            self.small(k)
        }
    }

    /// Where the parameters downsized to `k` are cached.
    fn small(&self, k: u32) -> PathBuf {
        self.cache.join(format!("{}-k{k}.kc", self.base))
    }

    /// The parameters for the `k` asked for, if cached already (downsized, or the full ones
    /// when they are that `k`).
    fn ready(&self, locked: bool) -> Result<Option<Fetched>> {
        if let Some(k) = self.k {
            let small = self.small(k);
            if let Some(params) = self.load(&small, locked)? {
                if params.k() == k {
                    return Ok(Some(Fetched {
                        params,
                        outcome: CacheOutcome::Hit(small),
                    }));
                }
            }
        }
        let Some(params) = self.load(&self.full, locked)? else {
            return Ok(None);
        };
        match self.k {
            Some(k) if k != params.k() => Ok(None),
            _ => Ok(Some(Fetched {
                params,
                outcome: CacheOutcome::Hit(self.full.clone()),
            })),
        }
    }

    /// The cached container at `path`, loaded with the cache's own options; `None` when it is
    /// missing or damaged (removed, when `locked`: no one else is writing it then).
    fn load(&self, path: &Path, locked: bool) -> Result<Option<KzgParams>> {
        let options = LoadOptions {
            validation: Validation::Trusted,
            test_setup: self.test_setup,
            ..LoadOptions::default()
        };
        match rawbytes()?.load_params(path, &options) {
            Ok(params) => Ok(Some(params)),
            Err(err) if err.is_missing() => Ok(None),
            Err(err) if err.is_damage() => {
                if locked {
                    remove_damaged(path)?;
                }
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// `params` downsized to `k` and cached, when `k` is smaller than theirs.
    fn downsized(&self, params: KzgParams, k: u32) -> Result<KzgParams> {
        if k >= params.k() {
            return Ok(params);
        }
        let params = downsize(params, k).map_err(|err| err.at_path(&self.full))?;
        // Kept when the cache cannot be written: the next start downsizes again.
        let _ = save_params(&self.small(k), &params);
        Ok(params)
    }

    /// `fetched`, unless the caller's limits refuse their `k` (the cache itself is not
    /// bounded by one caller's limits; the caller is).
    fn within_limits(&self, fetched: Fetched, options: &ParamsOptions) -> Result<Fetched> {
        let k = fetched.params.k();
        if k > options.limits.max_k {
            return Err(Error::KOutOfRange {
                k,
                max: options.limits.max_k,
            });
        }
        Ok(fetched)
    }
}

/// Downloads the parameters of `object` (as it was `opened`) into a temporary file of the
/// cache named for `full`, after checking the size against their first bytes, and reads them
/// from that open file, pinned.
fn download(
    object: &Object,
    opened: &Opened,
    full: &Path,
    options: &ParamsOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<KzgParams> {
    let name = object.name();
    let remote = &object.remote;
    // The first bytes say what the object must be before its size is believed.
    let info = &opened.info;
    let first = first_bytes(object, opened)?;
    let (file_k, lengths) =
        expected_length(&first, &options.limits).map_err(|err| err.in_object(&name))?;
    if let Some(k) = options.k.filter(|&k| k > file_k) {
        return Err(Error::KMismatch {
            expected: k,
            found: file_k,
        }
        .in_object(&name));
    }
    if !lengths.contains(&info.size) {
        return Err(Error::Malformed(format!(
            "the server says the object has {} bytes; parameters for k = {file_k} have {}",
            info.size,
            lengths
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" or ")
        ))
        .in_object(&name));
    }
    let download = keycodec_core::temp_beside(full)?;
    remote.download_to(&object.path, info, download.as_file(), progress)?;
    let as_object = |err: Error| match err {
        Error::FileHashMismatch {
            expected, found, ..
        } => Error::FileHashMismatch {
            file: name.clone(),
            expected,
            found,
        },
        Error::DigestMismatch {
            kind,
            expected,
            found,
            ..
        } => Error::DigestMismatch {
            kind,
            path: Some(PathBuf::from(&name)),
            expected,
            found,
        },
        other => other.in_object(&name),
    };
    let checked = ParamsOptions {
        validation: Validation::Checked,
        ..*options
    };
    read_pinned_file(download.as_file(), download.path(), &checked, Shared::No).map_err(as_object)
}

/// The cache's own codec.
fn rawbytes() -> Result<&'static dyn KeyCodec> {
    Backend::all()
        .find(|backend| backend.name() == "rawbytes")
        .ok_or_else(|| Error::Internal("the rawbytes backend is not in the list".into()))?
        .codec()
}

/// Saves parameters into the cache (atomically).
fn save_params(path: &Path, params: &KzgParams) -> Result<()> {
    rawbytes()?
        .save_params(path, params, &SaveOptions::default())
        .map(drop)
}
