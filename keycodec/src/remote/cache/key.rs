//! Keys through the cache: a load ([`load_cached`], which a start uses) and a fetch without the
//! circuit ([`fetch_key`], which `keycodec fetch --manifest` uses), under the names and the
//! lock of [`crate::remote::cache`].

use std::path::{Path, PathBuf};

use keycodec_core::backend_api::circuit::configure;
use keycodec_core::halo2_proofs::plonk::Circuit;
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_core::transport::{read_file, save_atomic, Request};
use keycodec_core::{lock_beside, Error, HaloKey, KeyCodec, LoadOptions, Result, Size};

use super::{first_bytes, pinned_name, remove_damaged, version_name, CacheOutcome};
use crate::backend::Backend;
use crate::location::Object;
use crate::remote::object_store::path::Path as ObjectPath;
use crate::remote::{Opened, Remote};

/// Loads a key from `location` through the cache directory `cache` (created if missing): a
/// hit is a file load with every check a file load makes, the pin among them; a miss asks the
/// store for the object's version once and loads that version while it is written into a
/// temporary file of the cache (each range as it arrives, each request conditional on the
/// version), which takes its name only once the key has loaded and every byte of the object
/// is in it. With a digest pin a hit needs no request to the
/// store at all. A verifying key may come from a proving key's container. `opened`: the
/// object as [`backend_of`] found it (its version, and the first bytes its header came from).
///
/// # Errors
///
/// As [`Remote::load`], and [`Error::Io`] naming the cache's files (a lock held past
/// [`RemoteOptions::lock_timeout`](crate::remote::RemoteOptions::lock_timeout) among them).
pub(crate) fn load_cached<C: Circuit<Fr>, K: HaloKey>(
    remote: &Remote,
    codec: &dyn KeyCodec,
    location: &ObjectPath,
    cache: &Path,
    circuit_params: C::Params,
    options: &LoadOptions,
    opened: Option<Opened>,
) -> Result<(K, CacheOutcome)> {
    std::fs::create_dir_all(cache)
        .map_err(|err| Error::io("create the cache directory", err).at_path(cache))?;
    // Unpinned, the name needs the object's version: asked for once (or given: `opened`, the
    // version whose header chose the codec), and the download (on a miss) is of that version.
    let opened = match (options.expected_digest, opened) {
        (_, Some(opened)) => Some(opened),
        (Some(_), None) => None,
        // A hit needs the version alone.
        (None, None) => Some(remote.open_head(location)?),
    };
    let path = cache.join(match (options.expected_digest, &opened) {
        (Some(digest), _) => pinned_name(digest, codec.name()),
        (None, Some(opened)) => format!(
            "object-{}.kc",
            version_name(remote, location, &opened.info)?
        ),
        (None, None) => return Err(Error::Internal("no version of the object".into())),
    });
    let cs = configure::<C>(circuit_params);
    let cached = || -> Result<Option<K>> {
        let loaded = read_file(
            codec,
            &path,
            Request::for_key(K::KIND),
            Some(cs.clone()),
            options,
        )
        .and_then(keycodec_core::transport::into_key::<K>);
        match loaded {
            Ok(key) => Ok(Some(key)),
            Err(err) if err.is_missing() => Ok(None),
            // Not what its name says: fetched again (removed under the lock, below).
            Err(err) if is_wrong_entry(&err) => Ok(None),
            Err(err) => Err(err),
        }
    };
    if let Some(key) = cached()? {
        return Ok((key, CacheOutcome::Hit(path)));
    }
    let _lock = lock_beside(&path, remote.options().lock_timeout)?;
    // Another process may have downloaded it while this one waited; a file that is still not
    // what its name says is removed, under the lock, so no fresh fetch is lost.
    if let Some(key) = cached()? {
        return Ok((key, CacheOutcome::Hit(path)));
    }
    remove_damaged(&path)?;
    let opened = match opened {
        Some(opened) => opened,
        // Pinned, and not in the cache: downloaded, its first round with its first request.
        None => {
            let proving = K::KIND == keycodec_core::ArtifactKind::Proving;
            remote.open(location, proving && !codec.reads_in_order())?
        }
    };
    // Positioned writes: the writer's buffer stays empty.
    let key = save_atomic(&path, Size::kib(4), |writer| {
        remote.load_opened_into::<K>(
            codec,
            location,
            opened,
            writer.get_ref().file(),
            cs.clone(),
            options,
        )
    })
    .map_err(|err| err.at_path(&path))?;
    Ok((key, CacheOutcome::Miss(path)))
}

/// Whether a cached file's load failed because the file is not what its name says: damaged,
/// or (named by a digest) holding another key. Another circuit's or `k`'s key is a faithful
/// copy of what the object holds: fetching it again would change nothing.
fn is_wrong_entry(err: &Error) -> bool {
    err.is_damage() || matches!(err.cause(), Error::DigestMismatch { .. })
}

/// Fetches the key container at `object` into its cache as a pinned load would find it
/// (`{digest}-{codec}.kc`), without the circuit: the header (its codec `codec`, its kind, the
/// recorded digest when the container is of that kind, its length against the server's
/// size) is checked before the download, the payload checksum after; only then does the file
/// take its name. A cached file already intact is a hit, with no request.
///
/// # Errors
///
/// [`Error::CodecMismatch`], [`Error::KindMismatch`], [`Error::DigestMismatch`],
/// [`Error::LengthMismatch`], [`Error::PayloadChecksum`] naming the object; the store's and the
/// cache's errors.
pub(crate) fn fetch_key(
    object: &Object,
    backend: Backend,
    kind: keycodec_core::ArtifactKind,
    digest: keycodec_core::KeyDigest,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<CacheOutcome> {
    let name = object.name();
    std::fs::create_dir_all(&object.cache)
        .map_err(|err| Error::io("create the cache directory", err).at_path(&object.cache))?;
    let path = object.cache.join(pinned_name(digest, backend.name()));
    let expect = |header: &keycodec_core::header::Header| {
        crate::backend::expect_key(header, backend, kind, Some(digest))
    };
    let cached = |locked: bool| -> Result<bool> {
        let checked = std::fs::File::open(&path)
            .map_err(|err| Error::io("open", err))
            .and_then(|file| keycodec_core::header::verify_file(&file))
            .and_then(|header| expect(&header));
        match checked {
            Ok(()) => Ok(true),
            Err(err) if err.is_missing() => Ok(false),
            Err(err) if err.disproves_artifact() => {
                if locked {
                    // The download that follows replaces it anyway.
                    let _ = remove_damaged(&path);
                }
                Ok(false)
            }
            Err(err) => Err(err.at_path(&path)),
        }
    };
    if cached(false)? {
        return Ok(CacheOutcome::Hit(path));
    }
    let _lock = lock_beside(&path, object.remote.options().lock_timeout)?;
    if cached(true)? {
        return Ok(CacheOutcome::Hit(path));
    }
    let remote = &object.remote;
    // To be downloaded: its version and first bytes by one request.
    let opened = remote.open_header(&object.path)?;
    let info = &opened.info;
    let first = first_bytes(object, &opened)?;
    let first = first.as_slice();
    let check = || {
        let header = keycodec_core::header::Header::from_bytes(first)?;
        expect(&header)?;
        let header_len = keycodec_core::header::Header::len_of(first)?;
        let max_payload = keycodec_core::Limits::default().max_payload_bytes;
        if header.payload_len > max_payload {
            return Err(Error::LimitExceeded {
                what: "the key's payload",
                requested: header.payload_len,
                limit: max_payload,
            });
        }
        if header.container_len(header_len) != info.size {
            return Err(Error::LengthMismatch {
                declared: header.payload_len,
                available: info
                    .size
                    .saturating_sub(header_len as u64)
                    .saturating_sub(header.record_section_len()),
            });
        }
        Ok(())
    };
    check().map_err(|err| err.in_object(&name))?;
    keycodec_core::replace_atomically(&path, |file| {
        remote.download_to(&object.path, info, file, progress)?;
        keycodec_core::header::verify_file(file)
            .and_then(|header| expect(&header))
            .map_err(|err| err.in_object(&name))
    })
    .map_err(|err| err.at_path(&path))?;
    Ok(CacheOutcome::Miss(path))
}

/// Where a generated key is cached when its load is pinned (where a pinned load looks first:
/// the next start needs no request).
pub(crate) fn pinned_key_path(
    object: &Object,
    codec: &dyn KeyCodec,
    load: &LoadOptions,
) -> Option<PathBuf> {
    load.expected_digest
        .map(|digest| object.cache.join(pinned_name(digest, codec.name())))
}

/// The lock a machine's generators of `object` take.
pub(crate) fn generate_lock(object: &Object) -> PathBuf {
    object.cache.join(format!(
        "generate-{}",
        blake3::hash(object.name().as_bytes()).to_hex()
    ))
}

/// The backend an object's key is loaded with: the options', else the one whose pinned
/// entry the cache holds (no request), else the one the object's header names (one ranged
/// GET of its first bytes, which also says its version), with the object as it was opened
/// (for the load to download that version, its first bytes in hand), if the options allow
/// it. A proving key pinned by a digest that no entry of the cache holds will be downloaded:
/// its first round goes with that first request.
pub(crate) fn backend_of(
    object: &Object,
    options: &crate::options::KeyOptions,
    kind: keycodec_core::ArtifactKind,
) -> Result<(Backend, Option<Opened>)> {
    if let Some(backend) = options.backend {
        return Ok((backend, None));
    }
    if let Some(crate::options::KeyPin::Digest(digest)) = options.pin {
        let cached = Backend::compiled().find(|backend| {
            object
                .cache
                .join(pinned_name(digest, backend.name()))
                .is_file()
        });
        if let Some(backend) = cached {
            return Ok((backend, None));
        }
    }
    let missing = matches!(options.pin, Some(crate::options::KeyPin::Digest(_)));
    let first_round = missing && kind == keycodec_core::ArtifactKind::Proving;
    let opened = object.remote.open(&object.path, first_round)?;
    let header = object.remote.header_opened(&object.path, &opened)?;
    let backend = Backend::of_id(header.codec).ok_or_else(|| {
        Error::UnknownCodec {
            found: header.codec,
        }
        .in_object(&object.name())
    })?;
    Ok((backend, Some(opened)))
}
