//! Loads through a local cache directory: a fleet's provers fetch a key once per machine.
//!
//! A cached file is named by what identifies its content: the pinned digest when the load
//! pins one (`{digest}.kc`), otherwise the object's name, ETag (or version) and size
//! (`object-{hash}.kc`, so a replaced object is a new name). A hit is a file load, with every
//! check a file load makes, the pin among them: a cached file that fails any check is
//! removed and the object fetched again, so a pinned load never uses a file that does not
//! match its pin. A miss downloads the object into a temporary file of the cache while it is
//! decoded (each range written as it arrives), and the file takes its name only once the
//! key has loaded and every byte of the object is in it; processes missing at once take a
//! lock, so one downloads and the others then load its file.
//!
//! Nothing is evicted: remove files from the directory when they are no longer wanted (a
//! process loading one keeps reading it; the next load fetches it again).

use std::path::{Path, PathBuf};

use halo2_proofs::plonk::Circuit;
use halo2curves::bn256::Fr;
use object_store::path::Path as ObjectPath;

use super::{into_key, Remote};
use crate::circuit::configure;
use crate::codec::{HaloKey, KeyCodec};
use crate::container::Request;
use crate::error::{Error, Result};
use crate::file::{lock_beside, save_atomic};
use crate::ops::{self, read_file};
use crate::options::{LoadOptions, Size};

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
        let path = cache.join(match options.expected_digest {
            Some(digest) => format!("{digest}.kc"),
            None => format!("object-{}.kc", self.version_name(location)?),
        });
        let cs = configure::<C>(circuit_params);
        let cached = || -> Option<K> {
            if !path.exists() {
                return None;
            }
            let loaded = read_file(
                codec,
                &path,
                Request::of(K::KIND),
                Some(cs.clone()),
                options,
            )
            .and_then(ops::into_key::<K>);
            match loaded {
                Ok(key) => Some(key),
                Err(_) => {
                    // Not the file it should be (damaged, replaced, not this pin's): it is
                    // fetched again. Whoever removed it first, it is gone.
                    let _ = std::fs::remove_file(&path);
                    None
                }
            }
        };
        if let Some(key) = cached() {
            return Ok((key, CacheOutcome::Hit(path)));
        }
        let _lock = lock_beside(&path)?;
        // Another process may have downloaded it while this one waited.
        if let Some(key) = cached() {
            return Ok((key, CacheOutcome::Hit(path)));
        }
        let object = self.name(location);
        // Positioned writes: the writer's buffer stays empty.
        let key = save_atomic(&path, Size::kib(4), |writer| {
            let decoded = self.read(
                codec,
                location,
                Request::of(K::KIND),
                Some(cs.clone()),
                options,
                Some(writer.get_ref().file()),
            )?;
            into_key::<K>(decoded, &object)
        })
        .map_err(|err| err.at_path(&path))?;
        Ok((key, CacheOutcome::Miss(path)))
    }

    /// A name for what `location` holds now, for a file caching it: a hash (32 hex digits) of
    /// the object's name, its ETag or version, and its size, so that a replaced object gets a
    /// new name. Asks the store for the object's metadata.
    ///
    /// # Errors
    ///
    /// As [`Remote::head`], and [`Error::Internal`] when the store gives the object no ETag or
    /// version (a cached copy could not be told from a stale one: pin it to cache it).
    pub fn version_name(&self, location: &ObjectPath) -> Result<String> {
        let info = self.head(location)?;
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
            info.e_tag.as_deref().unwrap_or(""),
            info.version.as_deref().unwrap_or(""),
        ] {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.update(&info.size.to_le_bytes());
        let hash = hasher.finalize().to_hex();
        Ok(hash.get(..32).unwrap_or_default().to_owned())
    }
}
