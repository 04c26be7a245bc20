//! Where an artifact is: a file on this machine, or (feature `remote`) an object in object
//! storage with the local cache directory it is loaded through.

use std::fmt;
use std::path::{Path, PathBuf};

#[cfg(feature = "remote")]
use keycodec_core::Result;

/// Where a cold start finds an artifact.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Location {
    /// A file on this machine.
    File(PathBuf),
    /// An object in object storage, loaded through a local cache directory.
    #[cfg(feature = "remote")]
    Object(Object),
}

/// An object in object storage and the cache directory it is loaded through: a key in S3, or
/// parameters in S3 or at an HTTP(S) URL. Travels whole: every function that loads it takes
/// this one value.
#[cfg(feature = "remote")]
#[derive(Clone, Debug)]
pub struct Object {
    /// The store.
    pub remote: std::sync::Arc<crate::remote::Remote>,
    /// The object.
    pub path: crate::remote::object_store::path::Path,
    /// The local cache directory (created if missing).
    pub cache: PathBuf,
}

#[cfg(feature = "remote")]
impl Object {
    /// How errors name it: `s3://bucket/path`, `https://host:port/path`.
    pub fn name(&self) -> String {
        self.remote.name(&self.path)
    }
}

impl Location {
    /// The object a URL names (see [`Remote::from_url`](crate::remote::Remote::from_url):
    /// `s3://bucket/path` is S3, configured from the environment; `https://host/path` and
    /// `http://host/path` are files any web server serves, fetched unsigned whatever the
    /// host), loaded through the cache directory `cache`.
    ///
    /// # Errors
    ///
    /// As [`Remote::from_url`](crate::remote::Remote::from_url).
    #[cfg(feature = "remote")]
    pub fn url(url: &str, cache: impl Into<PathBuf>) -> Result<Self> {
        let (remote, path) = crate::remote::Remote::from_url(url)?;
        Ok(Location::Object(Object {
            remote: std::sync::Arc::new(remote),
            path,
            cache: cache.into(),
        }))
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Self {
        Location::File(path.to_path_buf())
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Self {
        Location::File(path)
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Self {
        Location::File(path.clone())
    }
}

#[cfg(feature = "remote")]
impl From<Object> for Location {
    fn from(object: Object) -> Self {
        Location::Object(object)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            #[cfg(feature = "remote")]
            Location::Object(object) => f.write_str(&object.name()),
        }
    }
}
