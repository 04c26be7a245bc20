//! A prover's artifacts declared once: one JSON file names the KZG parameters (a URL or a
//! path, the `k` the prover runs at, the SHA-256 of the file as published or its digest) and
//! the proving and verifying keys (location, backend, digest), as filecoin-proofs'
//! `parameters.json` names its parameter files with their digests. `docs/manifest.md`
//! describes the format.
//!
//! Everything loaded through a manifest is what it names and pins: an artifact it does not
//! name is refused ([`Error::Manifest`]), one that is missing or not the pinned one is an
//! [`Error::Artifact`] naming it. Artifacts at URLs must be pinned (so that a warm cache is
//! used with no request at all) and go through a cache directory; paths are files, relative to
//! the manifest's folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keycodec_core::{ArtifactKind, Error, KeyDigest, Result};
use serde::Deserialize;

use crate::backend::Backend;
use crate::location::Location;
use crate::options::{KeyOptions, KeyPin};
use crate::params::{ParamsOptions, ParamsPin};
use crate::start::{Keygen, Start};

/// The manifest format this build reads.
pub const MANIFEST_VERSION: u32 = 1;

/// Where an artifact is, as the manifest says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A file (resolved against the manifest's folder).
    Path(PathBuf),
    /// A URL (`s3://`, `https://`, `http://`), through the cache directory.
    Url(String),
}

/// The parameters a manifest names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParamsEntry {
    /// Where they are.
    pub source: Source,
    /// The `k` the prover runs at: larger parameters are downsized to it.
    pub k: u32,
    /// Their pin.
    pub pin: Option<ParamsPin>,
}

/// A key a manifest names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyEntry {
    /// Its name in the manifest.
    pub name: String,
    /// A proving or a verifying key.
    pub kind: ArtifactKind,
    /// Where it is.
    pub source: Source,
    /// The backend that stores it (the only one its load accepts).
    pub codec: Backend,
    /// Its digest.
    pub digest: Option<KeyDigest>,
}

/// What a manifest's check or fetch found for one artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArtifactState {
    /// A file the manifest names by path, checked where it is.
    Present(PathBuf),
    /// In the cache already, checked (no request was made).
    Cached(PathBuf),
    /// Downloaded into the cache now, checked.
    Downloaded(PathBuf),
}

/// A prover's artifacts (see the module docs).
#[derive(Clone, Debug)]
pub struct Manifest {
    path: PathBuf,
    params: ParamsEntry,
    keys: BTreeMap<String, KeyEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    manifest: u32,
    params: ParamsFile,
    #[serde(default)]
    keys: BTreeMap<String, KeyFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamsFile {
    url: Option<String>,
    path: Option<PathBuf>,
    k: u32,
    sha256: Option<String>,
    digest: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    kind: String,
    url: Option<String>,
    path: Option<PathBuf>,
    codec: String,
    digest: Option<String>,
}

impl Manifest {
    /// Reads the manifest at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file; [`Error::Manifest`] for a malformed manifest.
    pub fn open(path: impl AsRef<Path>) -> Result<Manifest> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|err| Error::io("read the manifest", err).at_path(path))?;
        Manifest::from_json(&text, path)
    }

    /// Parses a manifest's JSON text; `path` names it in errors, and its folder is what
    /// relative paths are relative to.
    ///
    /// # Errors
    ///
    /// [`Error::Manifest`]: malformed JSON, an unknown field, another format version, an
    /// artifact with neither or both of `url` and `path`, or at a URL without a pin, a `k`
    /// past what BN254 allows, an unknown backend or kind, malformed hex.
    pub fn from_json(json: &str, path: &Path) -> Result<Manifest> {
        let bad = |message: String| Error::Manifest {
            path: path.to_path_buf(),
            message,
        };
        let file: File = serde_json::from_str(json).map_err(|err| bad(err.to_string()))?;
        if file.manifest != MANIFEST_VERSION {
            return Err(bad(format!(
                "manifest format {} (this build reads {MANIFEST_VERSION})",
                file.manifest
            )));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let source = |what: &str, url: Option<String>, at: Option<PathBuf>| match (url, at) {
            (Some(url), None) => Ok(Source::Url(url)),
            (None, Some(at)) => Ok(Source::Path(base.join(at))),
            _ => Err(bad(format!("{what}: give exactly one of `url` and `path`"))),
        };
        let digest = |what: &str, hex: Option<String>| {
            hex.map(|hex| {
                hex.parse::<KeyDigest>()
                    .map_err(|err| bad(format!("{what}: {err}")))
            })
            .transpose()
        };
        let params = file.params;
        if params.k == 0 || params.k > keycodec_core::MAX_K {
            return Err(bad(format!(
                "params: k = {} (between 1 and {})",
                params.k,
                keycodec_core::MAX_K
            )));
        }
        let pin = match (params.sha256, digest("params", params.digest)?) {
            (Some(_), Some(_)) => {
                return Err(bad("params: give one of `sha256` and `digest`".into()))
            }
            (Some(hex), None) => {
                Some(ParamsPin::sha256(&hex).map_err(|err| bad(format!("params: {err}")))?)
            }
            (None, Some(digest)) => Some(ParamsPin::Digest(digest)),
            (None, None) => None,
        };
        let params = ParamsEntry {
            source: source("params", params.url, params.path)?,
            k: params.k,
            pin,
        };
        if matches!(params.source, Source::Url(_)) && params.pin.is_none() {
            return Err(bad(
                "params: parameters at a URL need a pin (`sha256` as published, or `digest`)"
                    .into(),
            ));
        }
        let mut keys = BTreeMap::new();
        for (name, key) in file.keys {
            let what = format!("key `{name}`");
            let kind = match key.kind.as_str() {
                "proving" => ArtifactKind::Proving,
                "verifying" => ArtifactKind::Verifying,
                other => {
                    return Err(bad(format!(
                        "{what}: kind `{other}` (`proving` or `verifying`)"
                    )))
                }
            };
            let codec: Backend = key
                .codec
                .parse()
                .map_err(|err| bad(format!("{what}: {err}")))?;
            let entry = KeyEntry {
                name: name.clone(),
                kind,
                source: source(&what, key.url, key.path)?,
                codec,
                digest: digest(&what, key.digest)?,
            };
            if matches!(entry.source, Source::Url(_)) && entry.digest.is_none() {
                return Err(bad(format!("{what}: a key at a URL needs its `digest`")));
            }
            keys.insert(name, entry);
        }
        Ok(Manifest {
            path: path.to_path_buf(),
            params,
            keys,
        })
    }

    /// The manifest's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the parameters are opened: pinned as the manifest says, at its `k`.
    fn params_options(&self) -> ParamsOptions {
        ParamsOptions {
            pin: self.params.pin,
            k: Some(self.params.k),
            ..ParamsOptions::default()
        }
    }

    /// The names of the keys it names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// The entry of the key named `name`.
    fn entry(&self, name: &str) -> Result<&KeyEntry> {
        self.keys.get(name).ok_or_else(|| Error::Manifest {
            path: self.path.clone(),
            message: format!(
                "names no key `{name}` (it names: {})",
                self.keys.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        })
    }

    /// Where the parameters are (through `cache` for a URL) and how they are opened: pinned
    /// as the manifest says, at its `k`. For [`open_params`](crate::open_params).
    ///
    /// # Errors
    ///
    /// [`Error::NotCompiled`] for a URL without the `remote` feature; a URL's errors.
    pub fn params(&self, cache: &Path) -> Result<(Location, ParamsOptions)> {
        Ok((location(&self.params.source, cache)?, self.params_options()))
    }

    /// Where the key named `name` is (through `cache` for a URL) and how it is loaded: its
    /// backend only, pinned to its digest, at the manifest's `k`. For
    /// [`load_key`](crate::load_key) and [`load_or_generate`](crate::load_or_generate) (a
    /// verifying key, from a verifying key's container or a proving key's).
    ///
    /// # Errors
    ///
    /// [`Error::Manifest`] for a key it does not name; as [`Manifest::params`].
    pub fn key(&self, name: &str, cache: &Path) -> Result<(Location, KeyOptions)> {
        let key = self.entry(name)?;
        let options = KeyOptions {
            pin: key.digest.map(KeyPin::Digest),
            backend: Some(key.codec),
            k: Some(self.params.k),
            ..KeyOptions::default()
        };
        Ok((location(&key.source, cache)?, options))
    }

    /// The start of a prover from the manifest's parameters and the proving key named
    /// `key`, each as the manifest pins it, through `cache` for URLs: call
    /// [`Start::run`](crate::Start::run) (and set its [`crate::Keygen`] first
    /// for compressed selectors or another lock timeout).
    ///
    /// # Errors
    ///
    /// [`Error::Manifest`] for a key it does not name or that is not a proving key; as
    /// [`Manifest::params`].
    pub fn start(&self, key: &str, cache: &Path) -> Result<Start> {
        let entry = self.entry(key)?;
        if entry.kind != ArtifactKind::Proving {
            return Err(Error::Manifest {
                path: self.path.clone(),
                message: format!("key `{key}` is a {}, not a proving key", entry.kind),
            });
        }
        let (params, params_options) = self.params(cache)?;
        let (key, key_options) = self.key(key, cache)?;
        Ok(Start {
            params,
            params_options: ParamsOptions {
                k: None,
                ..params_options
            },
            key,
            key_options: KeyOptions {
                k: None,
                ..key_options
            },
            keygen: Keygen::default(),
            k: self.params.k,
        })
    }

    /// Checks every artifact without fetching anything: files named by path where they are
    /// (parameters opened with their pin and every point checked; keys' containers, their
    /// backend and recorded digest), artifacts at URLs in `cache` (as a start would find
    /// them). One result per artifact, `params` first, then the keys by name.
    pub fn verify(&self, cache: &Path) -> Vec<(String, Result<ArtifactState>)> {
        let mut results = vec![("params".to_owned(), self.verify_params(cache))];
        for key in self.keys.values() {
            let state = verify_key(key, cache).map_err(|err| artifact(&key.name, err));
            results.push((key.name.clone(), state));
        }
        results
    }

    fn verify_params(&self, cache: &Path) -> Result<ArtifactState> {
        let check = || match &self.params.source {
            Source::Path(path) => crate::params::open_params(path, &self.params_options())
                .map(|_| ArtifactState::Present(path.clone())),
            #[cfg(feature = "remote")]
            Source::Url(url) => {
                let Location::Object(object) = Location::url(url, cache)? else {
                    return Err(Error::Internal("a URL that is no object".into()));
                };
                match crate::remote::cache::params::cached_params(&object, &self.params_options())?
                {
                    Some(fetched) => Ok(ArtifactState::Cached(match fetched.outcome {
                        crate::remote::cache::CacheOutcome::Hit(path)
                        | crate::remote::cache::CacheOutcome::Miss(path) => path,
                    })),
                    None => Err(not_cached(cache)),
                }
            }
            #[cfg(not(feature = "remote"))]
            Source::Url(_) => {
                let _ = cache;
                Err(no_remote())
            }
        };
        check().map_err(|err| artifact("params", err))
    }

    /// Fetches every artifact named by URL into `cache`, verified, at once (each on its own
    /// thread), and checks those named by path; `progress` is told each artifact's bytes as
    /// they arrive. A warm cache makes no request. One result per artifact, as
    /// [`Manifest::verify`].
    #[cfg(feature = "remote")]
    pub fn fetch(
        &self,
        cache: &Path,
        progress: &(dyn Fn(&str, u64) + Sync),
    ) -> Vec<(String, Result<ArtifactState>)> {
        let params = || -> Result<ArtifactState> {
            match &self.params.source {
                Source::Path(_) => self.verify_params(cache),
                Source::Url(url) => {
                    let fetch = || {
                        let Location::Object(object) = Location::url(url, cache)? else {
                            return Err(Error::Internal("a URL that is no object".into()));
                        };
                        let fetched = crate::remote::cache::fetch_params(
                            &object,
                            &self.params_options(),
                            &|n| progress("params", n),
                        )?;
                        Ok(state_of(fetched.outcome))
                    };
                    fetch().map_err(|err| artifact("params", err))
                }
            }
        };
        let key = |key: &KeyEntry| -> Result<ArtifactState> {
            let fetch = || match (&key.source, key.digest) {
                (Source::Url(url), Some(digest)) => {
                    let Location::Object(object) = Location::url(url, cache)? else {
                        return Err(Error::Internal("a URL that is no object".into()));
                    };
                    crate::remote::cache::key::fetch_key(
                        &object,
                        key.codec,
                        key.kind,
                        digest,
                        &|n| {
                            progress(&key.name, n);
                        },
                    )
                    .map(state_of)
                }
                _ => verify_key(key, cache),
            };
            fetch().map_err(|err| artifact(&key.name, err))
        };
        std::thread::scope(|scope| {
            let keys: Vec<_> = self
                .keys
                .values()
                .map(|entry| (entry.name.clone(), scope.spawn(move || key(entry))))
                .collect();
            let mut results = vec![("params".to_owned(), params())];
            for (name, thread) in keys {
                let result = thread
                    .join()
                    .unwrap_or_else(|_| Err(Error::Internal("a fetch thread panicked".into())));
                results.push((name, result));
            }
            results
        })
    }
}

#[cfg(feature = "remote")]
fn state_of(outcome: crate::remote::cache::CacheOutcome) -> ArtifactState {
    match outcome {
        crate::remote::cache::CacheOutcome::Hit(path) => ArtifactState::Cached(path),
        crate::remote::cache::CacheOutcome::Miss(path) => ArtifactState::Downloaded(path),
    }
}

/// The location of `source`, through `cache` for a URL.
fn location(source: &Source, cache: &Path) -> Result<Location> {
    match source {
        Source::Path(path) => Ok(Location::File(path.clone())),
        #[cfg(feature = "remote")]
        Source::Url(url) => Location::url(url, cache),
        #[cfg(not(feature = "remote"))]
        Source::Url(_) => {
            let _ = cache;
            Err(no_remote())
        }
    }
}

/// A key's container, checked where a start would find it (its file, or its cached copy).
fn verify_key(key: &KeyEntry, cache: &Path) -> Result<ArtifactState> {
    let (path, state): (PathBuf, fn(PathBuf) -> ArtifactState) = match (&key.source, key.digest) {
        (Source::Path(path), _) => (path.clone(), ArtifactState::Present),
        #[cfg(feature = "remote")]
        (Source::Url(_), Some(digest)) => (
            cache.join(crate::remote::cache::pinned_name(digest, key.codec.name())),
            ArtifactState::Cached,
        ),
        #[cfg(not(feature = "remote"))]
        (Source::Url(_), Some(_)) => {
            let _ = cache;
            return Err(no_remote());
        }
        (Source::Url(_), None) => return Err(Error::Internal("an unpinned key at a URL".into())),
    };
    let check = || {
        let file = std::fs::File::open(&path).map_err(|err| Error::io("open", err))?;
        let header = keycodec_core::header::verify_file(&file)?;
        crate::backend::expect_key(&header, key.codec, key.kind, key.digest)?;
        Ok(state(path.clone()))
    };
    check().map_err(|err: Error| err.at_path(&path))
}

fn artifact(name: &str, err: Error) -> Error {
    match err {
        err @ (Error::Artifact { .. } | Error::Manifest { .. }) => err,
        other => Error::Artifact {
            name: name.to_owned(),
            source: Box::new(other),
        },
    }
}

/// An artifact at a URL that the cache does not hold (yet).
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
fn not_cached(cache: &Path) -> Error {
    Error::io(
        "find the artifact in the cache",
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "not fetched yet (keycodec fetch --manifest)",
        ),
    )
    .at_path(cache)
}

#[cfg(not(feature = "remote"))]
fn no_remote() -> Error {
    Error::NotCompiled {
        what: "artifacts at URLs".into(),
        feature: "remote",
    }
}
