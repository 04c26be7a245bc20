//! A cold start's artifacts in object storage, through a local cache: KZG parameters fetched
//! from S3 or any HTTP(S) server (`kzg_bn254_22.srs` as a project publishes it, pinned by its
//! SHA-256), and proving keys in S3.
//!
//! Parameters: the cache holds the checked container of the parameters (and, for a smaller
//! `k`, their downsized container, computed once), named by the pin (`params-sha256-{hex}`,
//! `params-{digest}`) or, unpinned, by the object's name, ETag and size. A hit is a local
//! load of that container, values trusted (they were checked when it was made; the payload
//! checksum is still verified), with no request when the parameters are pinned. A miss
//! downloads the object once per machine (a lock beside the cached file: a second process
//! waits, then loads what the first cached) into a temporary file of the cache, checks its
//! SHA-256 before reading anything from it, imports it with every point checked, checks a
//! digest pin, and only then saves the container: a tampered, truncated or substituted
//! download is refused and never left in the cache. The cache must be as trusted as the
//! program: like a package cache, nothing checks who wrote it.

use std::path::{Path, PathBuf};

use codec_core::halo2_proofs::plonk::Circuit;
use codec_core::halo2_proofs::poly::commitment::Params as _;
use codec_core::halo2curves::bn256::Fr;
use codec_core::remote::object_store::path::Path as ObjectPath;
use codec_core::remote::{CacheOutcome, Remote};
use codec_core::{
    downsize, lock_beside, Error, KeyCodecExt, LoadOptions, Params, Result, SaveOptions, Validation,
};

use crate::start::{
    check_params_digest, check_sha256, hex, read_params_file, usable, Origin, ParamsPin, StartKey,
};

/// Parameters fetched through the cache, and where they are cached.
#[derive(Debug)]
pub struct Fetched {
    /// The parameters (downsized to the `k` asked for).
    pub params: Params,
    /// Whether the cache had them (and the container they were loaded from) or they were
    /// downloaded (and the container now caching them).
    pub outcome: CacheOutcome,
}

/// Opens the parameters of the object `object` through the cache directory `cache` (see the
/// module docs), downsized to `k` if it is smaller than theirs, pinned by `pin`; `progress`
/// is told the bytes of a download as they arrive.
///
/// # Errors
///
/// [`Error::FileHashMismatch`] or [`Error::DigestMismatch`] for parameters that are not the
/// pinned ones, the store's errors ([`Error::Remote`] naming the object), decode errors of
/// the download, [`Error::KMismatch`] for a `k` larger than theirs, [`Error::Io`] naming the
/// cache's files, [`Error::NotCompiled`] without the rawbytes backend (the cache's format).
pub fn fetch_params(
    remote: &Remote,
    object: &ObjectPath,
    cache: &Path,
    k: Option<u32>,
    pin: Option<ParamsPin>,
    options: &LoadOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Fetched> {
    std::fs::create_dir_all(cache)
        .map_err(|err| Error::io("create the cache directory", err).at_path(cache))?;
    let base = match pin {
        Some(ParamsPin::Sha256(hash)) => format!("params-sha256-{}", hex(&hash)),
        Some(ParamsPin::Digest(digest)) => format!("params-{digest}"),
        None => format!("params-{}", remote.version_name(object)?),
    };
    let full = cache.join(format!("{base}.kc"));
    let smaller = |params_k: u32| k.filter(|&k| k < params_k);
    let small = |k: u32| cache.join(format!("{base}-k{k}.kc"));
    let trusted = LoadOptions {
        validation: Validation::Trusted,
        expected_digest: None,
        expected_k: None,
        ..*options
    };
    let cached = || -> Result<Option<Fetched>> {
        if let Some(k) = k {
            if let Some(params) = load_cached(&small(k), &trusted, Some(k)) {
                return Ok(Some(Fetched {
                    params,
                    outcome: CacheOutcome::Hit(small(k)),
                }));
            }
        }
        let Some(params) = load_cached(&full, &trusted, None) else {
            return Ok(None);
        };
        Ok(Some(match smaller(params.k()) {
            Some(k) => Fetched {
                params: downsize_and_cache(params, k, &small(k), &full)?,
                outcome: CacheOutcome::Hit(full.clone()),
            },
            None => Fetched {
                params,
                outcome: CacheOutcome::Hit(full.clone()),
            },
        }))
    };
    if let Some(fetched) = cached()? {
        return Ok(fetched);
    }
    let _lock = lock_beside(&full)?;
    // Another process may have fetched them while this one waited.
    if let Some(fetched) = cached()? {
        return Ok(fetched);
    }
    let name = remote.name(object);
    let download = tempfile::Builder::new()
        .prefix(".params-download.")
        .suffix(".tmp")
        .tempfile_in(cache)
        .map_err(|err| Error::io("create a file in", err).at_path(cache))?;
    remote.download_to(object, download.as_file(), progress)?;
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
    if let Some(ParamsPin::Sha256(expected)) = pin {
        check_sha256(download.path(), &expected).map_err(as_object)?;
    }
    let params = read_params_file(download.path(), options).map_err(as_object)?;
    if let Some(ParamsPin::Digest(expected)) = pin {
        check_params_digest(&params, expected, download.path()).map_err(as_object)?;
    }
    save_params(&full, &params)?;
    drop(download);
    Ok(match smaller(params.k()) {
        Some(k) => Fetched {
            params: downsize_and_cache(params, k, &small(k), &full)?,
            outcome: CacheOutcome::Miss(small(k)),
        },
        None => Fetched {
            params,
            outcome: CacheOutcome::Miss(full),
        },
    })
}

/// The cached container at `path`, if it is there and loads (for `k`, when given); a file
/// that does not load is removed (it will be fetched again).
fn load_cached(path: &Path, options: &LoadOptions, k: Option<u32>) -> Option<Params> {
    if !path.exists() {
        return None;
    }
    let options = LoadOptions {
        expected_k: k,
        ..*options
    };
    let loaded = crate::Backend::of_file(path)
        .and_then(|backend| backend.codec())
        .and_then(|codec| codec.load_params(path, &options));
    match loaded {
        Ok(params) => Some(params),
        Err(_) => {
            // Damaged, or another format: fetched again. Whoever removed it first, it is gone.
            let _ = std::fs::remove_file(path);
            None
        }
    }
}

/// `params` downsized to `k`, cached at `path` (the full parameters' being `full`).
fn downsize_and_cache(params: Params, k: u32, path: &Path, full: &Path) -> Result<Params> {
    let params = downsize(params, k).map_err(|err| err.at_path(full))?;
    save_params(path, &params)?;
    Ok(params)
}

/// Saves parameters into the cache (atomically).
fn save_params(path: &Path, params: &Params) -> Result<()> {
    crate::Backend::of_id(codec_core::CodecId::new(1))
        .ok_or_else(|| Error::Internal("the rawbytes backend is not in the list".into()))?
        .codec()?
        .save_params(path, params, &SaveOptions::default())
        .map(drop)
}

/// The key at `object`, through the cache (see `Remote::load_cached`).
pub(crate) fn cached_key<C: Circuit<Fr>, K: StartKey>(
    codec: &dyn codec_core::KeyCodec,
    remote: &Remote,
    object: &ObjectPath,
    cache: &Path,
    circuit: &C,
    load: &LoadOptions,
) -> Result<K> {
    remote
        .load_cached::<C, K>(codec, object, cache, circuit.params(), load)
        .map(|(key, _)| key)
}

/// The key at `object` if it is usable; otherwise generated (by `generate`, which is told
/// what to name in a pin's error), cached when pinned, and uploaded. One process per machine
/// generates (a lock in the cache directory); see `load_or_generate_pk`.
pub(crate) fn key_object<C: Circuit<Fr>, K: StartKey>(
    codec: &dyn codec_core::KeyCodec,
    remote: &Remote,
    object: &ObjectPath,
    cache: &Path,
    circuit: &C,
    load: &LoadOptions,
    generate: impl FnOnce(&Path) -> Result<K>,
) -> Result<(K, Origin)> {
    let attempt = || cached_key::<C, K>(codec, remote, object, cache, circuit, load);
    if let Some(key) = usable(attempt())? {
        return Ok((key, Origin::Loaded));
    }
    std::fs::create_dir_all(cache)
        .map_err(|err| Error::io("create the cache directory", err).at_path(cache))?;
    let name = remote.name(object);
    let _lock = lock_beside(&cache.join(format!(
        "generate-{}",
        blake3::hash(name.as_bytes()).to_hex()
    )))?;
    if let Some(key) = usable(attempt())? {
        return Ok((key, Origin::Loaded));
    }
    let key = generate(Path::new(&name))?;
    if let Some(digest) = load.expected_digest {
        // Where a pinned load looks first: the next start needs no request.
        codec.save::<C, _>(
            &cache.join(format!("{digest}.kc")),
            &key,
            circuit.params(),
            &SaveOptions::default(),
        )?;
    }
    remote.save::<C, K>(codec, object, &key, circuit.params())?;
    Ok((key, Origin::Generated))
}
