//! Loads through a local cache directory: a fleet's provers fetch a key once per machine.
//!
//! A cached file is named by what identifies its content and the codec that stores it: the
//! pinned digest when the load pins one (`{digest}-{codec}.kc`), otherwise the object's name,
//! ETag (or version) and size (`object-{hash}.kc`, so a replaced object is a new name). A hit
//! is a file load, with every check a file load makes, the pin among them. A cached file is
//! removed (and the object fetched again) only when it is proven not to be what its name
//! says: damaged, or another digest than the pinned one in its name; that is decided under
//! the lock, after loading it again, so a file another process has just fetched is never
//! removed. Any other failure (the load's own codecs, limits or budget, an I/O error, out of
//! memory) is the load's error and the file stays. A miss asks the store for the object's
//! version once, downloads that version into a temporary file of the cache while it is
//! decoded (each range written as it arrives, each request conditional on that version), and
//! the file takes its name only once the key has loaded and every byte of the object is in
//! it; processes missing at once take a lock, so one downloads and the others then load its
//! file.
//!
//! Nothing is evicted: remove files from the directory when they are no longer wanted (a
//! process loading one keeps reading it; the next load fetches it again).

use std::path::{Path, PathBuf};

use halo2_proofs::plonk::Circuit;
use halo2curves::bn256::Fr;
use object_store::path::Path as ObjectPath;

use crate::{into_key, ObjectInfo, Remote};
use codec_core::backend_api::circuit::configure;
use codec_core::transport::{read_file, save_atomic, Request};
use codec_core::{lock_beside, Error, HaloKey, KeyCodec, LoadOptions, Result, Size};

/// Where a cached load's key came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// From the cached file at this path.
    Hit(PathBuf),
    /// Downloaded from the store (and now cached at this path).
    Miss(PathBuf),
}

impl Remote {
    /// Loads a key from `location` through the cache directory `cache` (created if
    /// missing): see the module docs of `remote::cache`. With a pin
    /// ([`LoadOptions::expected_digest`]) a hit needs no request to the store at all.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`], and [`Error::Io`] naming the cache's files.
    pub fn load_cached<C: Circuit<Fr>, K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        cache: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<(K, CacheOutcome)> {
        std::fs::create_dir_all(cache)
            .map_err(|err| Error::io("create the cache directory", err).at_path(cache))?;
        // Unpinned, the name needs the object's version: asked for once, and the download
        // (on a miss) is of that version.
        let info = match options.expected_digest {
            Some(_) => None,
            None => Some(self.head(location)?),
        };
        let path = cache.join(match (options.expected_digest, &info) {
            (Some(digest), _) => pinned_name(digest, codec.name()),
            (None, Some(info)) => format!("object-{}.kc", self.version_name(location, info)?),
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
            .and_then(codec_core::transport::into_key::<K>);
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
        let _lock = lock_beside(&path, self.options.lock_timeout)?;
        // Another process may have downloaded it while this one waited; a file that is still
        // not what its name says is removed, under the lock, so no fresh fetch is lost.
        if let Some(key) = cached()? {
            return Ok((key, CacheOutcome::Hit(path)));
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(Error::io("remove the damaged cached file", err).at_path(&path)),
        }
        let info = match info {
            Some(info) => info,
            None => self.head(location)?,
        };
        let object = self.name(location);
        // Positioned writes: the writer's buffer stays empty.
        let key = save_atomic(&path, Size::kib(4), |writer| {
            let decoded = self.read(
                codec,
                location,
                Request::for_key(K::KIND),
                Some(cs.clone()),
                options,
                Some((writer.get_ref().file(), &info)),
            )?;
            into_key::<K>(decoded, &object)
        })
        .map_err(|err| err.at_path(&path))?;
        Ok((key, CacheOutcome::Miss(path)))
    }

    /// A name for what `location` holds now, for a file caching it: a hash (32 hex digits) of
    /// the object's name, its ETag or version, and its size (as [`Remote::head`] gave them:
    /// `info`), so that a replaced object gets a new name.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when the store gives the object no ETag or version (a cached copy
    /// could not be told from a stale one: pin it to cache it).
    pub fn version_name(&self, location: &ObjectPath, info: &ObjectInfo) -> Result<String> {
        if info.e_tag.is_none() && info.version.is_none() {
            return Err(Error::Internal(format!(
                "{}: the store gives this object no ETag or version, so a cached copy could \
                 not be told from a stale one: pin it to cache it",
                self.name(location)
            )));
        }
        let mut hasher = blake3::Hasher::new();
        for part in [
            self.name(location).as_str(),
            info.e_tag
                .as_deref()
                .map(|tag| tag.strip_prefix("W/").unwrap_or(tag))
                .unwrap_or(""),
            info.version.as_deref().unwrap_or(""),
        ] {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.update(&info.size.to_le_bytes());
        let hash = hasher.finalize();
        Ok(codec_core::hex::encode(
            hash.as_bytes().get(..16).unwrap_or_default(),
        ))
    }
}

/// The name of the cached file of the key pinned to `digest`, stored by the codec named
/// `codec` (`{digest}-{codec}.kc`): where a pinned [`Remote::load_cached`] looks, and where a
/// tool that fills a cache ahead of a start (`keycodec fetch --manifest`) puts it.
pub fn pinned_name(digest: codec_core::KeyDigest, codec: &str) -> String {
    format!("{digest}-{codec}.kc")
}

/// Whether a cached file's load failed because the file is not what its name says: damaged,
/// or (named by a digest) holding another key. Another circuit's or `k`'s key is a faithful
/// copy of what the object holds: fetching it again would change nothing.
pub(crate) fn is_wrong_entry(err: &Error) -> bool {
    err.is_damage() || matches!(err.cause(), Error::DigestMismatch { .. })
}
