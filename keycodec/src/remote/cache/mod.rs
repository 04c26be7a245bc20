//! The one cache of objects on this machine: keys and KZG parameters from object storage, a
//! fleet's provers fetching each once per machine.
//!
//! **Names.** A cached file is named by what identifies its content: a key by its pinned
//! digest and the codec that stores it (`{digest}-{codec}.kc`, where a pinned load looks
//! first, and where `keycodec fetch --manifest` puts it), or unpinned by the object's name,
//! ETag (or version) and size (`object-{hash}.kc`: a replaced object is a new name);
//! parameters by their pin (`params-sha256-{hex}.kc`, `params-{digest}.kc`) or unpinned by the
//! object's version (`params-{hash}.kc`), their downsized copies beside them (`…-k{K}.kc`).
//!
//! **One lock.** Processes missing the same file at once take the lock beside it
//! ([`keycodec_core::lock_beside`]); one downloads, the others wait, then load its file. The wait
//! has a deadline, [`RemoteOptions::lock_timeout`](crate::remote::RemoteOptions::lock_timeout),
//! past which the error names the holder (and says when it is stopped); a killed holder's lock
//! is taken at once.
//!
//! **One rule.** A cached file is removed (and fetched again) only when a read of it proves it
//! is not what its name says: damaged, or (named by a digest) another key; that is decided
//! under the lock, after reading it again, so a file another process has just fetched is never
//! removed. Any other failure (the caller's codecs, limits or budget, an I/O error, out of
//! memory) is the caller's error and the file stays. A file takes its name only once complete
//! and checked; a killed download leaves a temporary file that the next one of that name
//! removes. Nothing is evicted: remove files when they are no longer wanted.
//!
//! The cache must be as trusted as the program: like a package cache, nothing checks who wrote
//! it.

pub(crate) mod key;
pub(crate) mod params;

use std::path::PathBuf;

use keycodec_core::header::HEADER_LEN;
use keycodec_core::{Error, Result};

use crate::location::Object;
use crate::remote::object_store::path::Path as ObjectPath;
use crate::remote::{ObjectInfo, Opened, Remote};

pub use params::{fetch_params, Fetched};

/// Where a cached load's key or parameters came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// From the cached file at this path.
    Hit(PathBuf),
    /// Downloaded from the store (and now cached at this path).
    Miss(PathBuf),
}

/// A name for what `location` holds now, for a file caching it: a hash (32 hex digits) of
/// the object's name, its ETag or version, and its size (as [`Remote::head`] gave them:
/// `info`), so that a replaced object gets a new name.
///
/// # Errors
///
/// [`Error::Internal`] when the store gives the object no ETag or version (a cached copy
/// could not be told from a stale one: pin it to cache it).
fn version_name(remote: &Remote, location: &ObjectPath, info: &ObjectInfo) -> Result<String> {
    if info.e_tag.is_none() && info.version.is_none() {
        return Err(Error::Internal(format!(
            "{}: the store gives this object no ETag or version, so a cached copy could \
             not be told from a stale one: pin it to cache it",
            remote.name(location)
        )));
    }
    let mut hasher = blake3::Hasher::new();
    for part in [
        remote.name(location).as_str(),
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
    Ok(keycodec_core::hex::encode(
        hash.as_bytes().get(..16).unwrap_or_default(),
    ))
}

/// The name of the cached file of the key pinned to `digest`, stored by the codec named
/// `codec` (`{digest}-{codec}.kc`): where a pinned load of an object looks, and where a
/// tool that fills a cache ahead of a start (`keycodec fetch --manifest`) puts it.
pub(crate) fn pinned_name(digest: keycodec_core::KeyDigest, codec: &str) -> String {
    format!("{digest}-{codec}.kc")
}

/// The object's first bytes (as many as the longest container header, or the whole object),
/// from those in hand when it was opened, else by a ranged GET: what it must be is read from
/// them before its size is believed.
fn first_bytes(object: &Object, opened: &Opened) -> Result<Vec<u8>> {
    let info = &opened.info;
    let len = usize::try_from(info.size.min(HEADER_LEN as u64)).unwrap_or(HEADER_LEN);
    if let Some(first) = opened.first(len).filter(|first| first.len() == len) {
        return Ok(first.to_vec());
    }
    let mut first = vec![0u8; len];
    object
        .remote
        .read_range(&object.path, info, &mut first, 0)?;
    Ok(first)
}

/// Removes a cached file a read proved damaged (under its lock: no one else is writing it);
/// one already gone is fine.
///
/// # Errors
///
/// [`Error::Io`] naming the file.
fn remove_damaged(path: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(Error::io("remove the damaged cached file", err).at_path(path)),
    }
}
