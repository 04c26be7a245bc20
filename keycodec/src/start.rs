//! A prover's cold start in one call: the KZG parameters and the proving key, each loaded
//! when it is there and is the right one (the pinned one, when pinned), and the key generated
//! with halo2's keygen and saved atomically when it is not (the `gen_pk` pattern of
//! snark-verifier-sdk, without its torn files and its trust in whatever file is there).
//!
//! Each artifact is at a [`Location`] and has options of its own: the key's
//! ([`KeyOptions`]: validation, its digest pin, the codecs and limits its load accepts) and
//! the parameters' ([`ParamsOptions`]: validation, their pin, the limits). A key is generated
//! (and saved over its file or object) only when it is missing or one complete read of one
//! version of it proves it is not this key ([`Error::disproves_artifact`], the one rule): a
//! file damaged; a file or object of another circuit, `k`, kind or digest. Any other failure
//! is the start's error and the artifact stays as it is: an I/O error, a transport's (an
//! object that reads as damaged is not replaced), the caller's own limits, budget or codecs, a
//! file a newer keycodec wrote, a file that changed while it was read or while the key was
//! generated ([`Error::FileChanged`]: a deploy copying a key over it). A verifying key is
//! never written over a proving key's container.

use std::path::Path;
use std::time::Duration;

use keycodec_core::halo2_proofs::plonk::{
    keygen_pk, keygen_vk_custom, Circuit, ProvingKey, VerifyingKey,
};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{
    lock_beside, CodecSet, Error, HaloKey, KeyCodec, KeyCodecExt, KeyDigest, KzgParams, Limits,
    LoadOptions, Result, SaveOptions, Validation,
};

use crate::replace::{file_kind, judge, judge_file, refuse_vk_over_pk, Found};

pub use crate::location::Location;
#[cfg(feature = "remote")]
pub use crate::location::Object;
pub use crate::params::{halo2_params_format, ParamsOptions, ParamsPin};

/// Opens KZG parameters at `location`: a keycodec container (any backend that stores them,
/// from its header) or halo2's headerless file in any `SerdeFormat` (the format follows from
/// the file's length), every point checked unless `options.validation` trusts them; an object
/// (feature `remote`) goes through its cache (see `remote::fetch_params`:
/// downloaded and checked once, then a local load). `options.pin` refuses other parameters;
/// `options.k` fits them to a circuit: larger ones are downsized to `2^k` points (halo2's
/// `downsize`: `g` truncated, `g_lagrange` recomputed, `2^(k-1) * k` scalar multiplications of
/// G1 points on every core, slow at large `k`: see `docs/performance.md`; an object's
/// downsized parameters are cached, and a prover that starts often from a file should downsize
/// once with `keycodec params downsize`), smaller ones refused.
///
/// # Errors
///
/// I/O and decode errors naming the file; [`Error::FileHashMismatch`] or
/// [`Error::DigestMismatch`] for parameters that are not the pinned ones; [`Error::KMismatch`]
/// when the file's `k` is smaller than `options.k`; [`Error::FileChanged`] for a file rewritten
/// while it was read; [`Error::NotCompiled`] for a halo2 file without the rawbytes backend, or
/// an object without the remote feature.
pub fn open_params(location: impl Into<Location>, options: &ParamsOptions) -> Result<KzgParams> {
    match location.into() {
        Location::File(path) => {
            let params = crate::params::read_pinned(&path, options)?;
            crate::params::fit(params, options.k, &path)
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => {
            crate::cache::fetch_params(&object, options, &|_| {}).map(|fetched| fetched.params)
        }
    }
}

/// Where a key came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its file was there, and was the right key.
    Loaded,
    /// Its file was missing, damaged or another key: it was generated and saved.
    Generated,
}

/// How a key is loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyOptions {
    /// Whether every value is checked (`Checked`, the default) or trusted.
    pub validation: Validation,
    /// The key's digest (what a save returns, `keycodec digest FILE` prints): a file holding
    /// another key is regenerated over, and a generated key with another digest is an error.
    pub pin: Option<KeyDigest>,
    /// The backends whose files the load accepts; a file of another is an error (never
    /// regenerated over).
    pub codecs: CodecSet,
    /// The largest `k` and payload, and the memory budget; a file over them is an error
    /// (never regenerated over).
    pub limits: Limits,
}

impl KeyOptions {
    /// The load options of the key of a circuit with `2^k` rows.
    pub(crate) fn load(&self, k: u32) -> LoadOptions {
        LoadOptions {
            validation: self.validation,
            expected_k: Some(k),
            expected_digest: self.pin,
            codecs: self.codecs,
            limits: self.limits,
            ..LoadOptions::default()
        }
    }
}

/// How long a start waits by default for another process that holds the lock on the same
/// key (one that is generating it): three hours, longer than keygen takes at `k = 24` on two
/// cores. The one default of every lock keycodec takes.
pub use keycodec_core::DEFAULT_LOCK_TIMEOUT;

/// Whether keygen compresses selectors into fixed columns (halo2's `keygen_vk_custom`): the
/// key of a circuit is another key with or without, so a start generates the one its
/// prover expects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Selectors {
    /// Each selector its own column, as halo2-axiom's `keygen_vk` makes them (the default).
    #[default]
    Separate,
    /// Selectors combined into fewer fixed columns, as `keygen_vk_custom(.., true)` makes
    /// them.
    Compressed,
}

/// How a cold start loads, pins, saves and generates.
#[derive(Clone, Copy, Debug)]
pub struct StartOptions {
    /// How the key is loaded and pinned.
    pub key: KeyOptions,
    /// How the parameters are opened and pinned. Their `k` is the start's own: leave it
    /// `None` (another `k` there is an error).
    pub params: ParamsOptions,
    /// How generated keys are saved.
    pub save: SaveOptions,
    /// Whether keygen compresses selectors (halo2-axiom's `keygen_vk` does not: the default).
    pub selectors: Selectors,
    /// How long to wait for another process generating the same key before reporting it
    /// (an [`Error::Io`] of kind `TimedOut` naming the lock and its holder, and whether it
    /// is stopped). Default [`DEFAULT_LOCK_TIMEOUT`]; `Duration::MAX` waits as long as it
    /// takes. (A load through an object's cache waits on the cache's lock as
    /// `RemoteOptions::lock_timeout` says.)
    pub lock_timeout: Duration,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            key: KeyOptions::default(),
            params: ParamsOptions::default(),
            save: SaveOptions::default(),
            selectors: Selectors::Separate,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }
}

/// Loads the proving key at `location` if it is there and is this circuit's key for
/// `params`'s `k` (and the pinned one, if [`KeyOptions::pin`] pins one); generates it with
/// halo2's keygen, saves it atomically with `codec` (for an object: uploads it, then keeps a
/// copy in the cache if it can) and returns it when it is missing or provably not this key;
/// returns the load's error otherwise (see the module docs).
///
/// Two processes (or threads) starting at once are safe: the first that finds no usable key
/// takes a lock (`.{name}.keycodec.lock` beside the key, or in the cache directory) and
/// generates; the others wait for the lock (up to [`StartOptions::lock_timeout`]), then load
/// what it saved. No one ever reads a torn file: saves are atomic, and an object appears only
/// once its upload is complete. (Two machines sharing an object may both generate: keygen is
/// deterministic, so the object holds the same key either way.)
///
/// # Errors
///
/// A load's error that does not disprove the file (see the module docs), halo2's keygen
/// errors (as [`Error::Internal`]), a generated key whose digest is not the pinned one
/// ([`Error::DigestMismatch`], naming the key's file: nothing is saved), a lock held past the
/// timeout, [`Error::FileChanged`] for a key file that changed while it was read or while the
/// key was generated (nothing is saved over it), the upload's errors, and the save's.
pub fn load_or_generate_pk<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    location: impl Into<Location>,
    params: &KzgParams,
    circuit: &C,
    options: &StartOptions,
) -> Result<(ProvingKey<G1Affine>, Origin)> {
    let generate = || {
        let vk = keygen_vk_custom(params, circuit, options.selectors == Selectors::Compressed)
            .map_err(keygen)?;
        keygen_pk(params, vk, circuit).map_err(keygen)
    };
    key_at(
        codec,
        &location.into(),
        params.k(),
        circuit,
        options,
        generate,
    )
}

/// Loads the verifying key at `location` (a verifying key's container, or a proving key's,
/// whose verifying key is read without its polynomials) if it is this circuit's for
/// `params`'s `k` (and the pinned one); otherwise, under the same rule as
/// [`load_or_generate_pk`], generates it, saves it with `codec`, and returns it.
///
/// # Errors
///
/// As [`load_or_generate_pk`].
pub fn load_or_generate_vk<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    location: impl Into<Location>,
    params: &KzgParams,
    circuit: &C,
    options: &StartOptions,
) -> Result<(VerifyingKey<G1Affine>, Origin)> {
    let generate = || {
        keygen_vk_custom(params, circuit, options.selectors == Selectors::Compressed)
            .map_err(keygen)
    };
    key_at(
        codec,
        &location.into(),
        params.k(),
        circuit,
        options,
        generate,
    )
}

/// A key of kind `K` at `location` for `2^k` rows: loaded when usable, otherwise generated,
/// checked against the pin and saved, under the rule of [`crate::replace`].
fn key_at<C: Circuit<Fr>, K: StartKey>(
    codec: &dyn KeyCodec,
    location: &Location,
    k: u32,
    circuit: &C,
    options: &StartOptions,
    generate: impl FnOnce() -> Result<K>,
) -> Result<(K, Origin)> {
    let load = options.key.load(k);
    match location {
        Location::File(path) => {
            let attempt = || {
                judge_file(
                    path,
                    || K::load_file::<C>(codec, path, circuit.params(), &load),
                    Error::disproves_artifact,
                )
            };
            if let (Found::Usable(key), _) = attempt()? {
                return Ok((key, Origin::Loaded));
            }
            let _lock = lock_beside(path, options.lock_timeout)?;
            // Another process may have generated it while this one waited.
            let (proof, witness) = match attempt()? {
                (Found::Usable(key), _) => return Ok((key, Origin::Loaded)),
                (Found::Replaceable(proof), witness) => (proof, witness),
            };
            refuse_vk_over_pk(K::KIND, file_kind(path), proof)?;
            let key = pinned(generate()?, &load, path)?;
            witness.still(path)?;
            codec.save::<C, _>(path, &key, circuit.params(), &options.save)?;
            Ok((key, Origin::Generated))
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => {
            let attempt = || {
                judge(
                    cached_key::<C, K>(codec, object, circuit, &load),
                    Error::disproves_artifact,
                )
            };
            if let Found::Usable(key) = attempt()? {
                return Ok((key, Origin::Loaded));
            }
            std::fs::create_dir_all(&object.cache).map_err(|err| {
                Error::io("create the cache directory", err).at_path(&object.cache)
            })?;
            let _lock = lock_beside(
                &crate::cache::key::generate_lock(object),
                options.lock_timeout,
            )?;
            let proof = match attempt()? {
                Found::Usable(key) => return Ok((key, Origin::Loaded)),
                Found::Replaceable(proof) => proof,
            };
            if K::KIND == keycodec_core::KeyKind::Verifying {
                let kind = match object.remote.header(&object.path) {
                    Ok(header) => Some(header.kind),
                    Err(err) if err.is_missing() => None,
                    // The object is there but its header cannot be read now: nothing is
                    // written over what may be a proving key.
                    Err(err) => return Err(err),
                };
                refuse_vk_over_pk(K::KIND, kind, proof)?;
            }
            let name = object.name();
            let key = pinned(generate()?, &load, Path::new(&name))?;
            // Uploaded first: the object is what other machines start from. The cache is a
            // copy of it, and a cache that cannot be written (a full or read-only disk) loses
            // nothing: the next start downloads the object.
            object
                .remote
                .save::<C, K>(codec, &object.path, &key, circuit.params())?;
            if let Some(path) = crate::cache::key::pinned_key_path(object, codec, &load) {
                let _ = codec.save::<C, _>(&path, &key, circuit.params(), &options.save);
            }
            Ok((key, Origin::Generated))
        }
    }
}

/// A key a cold start loads or generates: a proving key, or a verifying key (read from
/// either kind of container).
pub(crate) trait StartKey: HaloKey {
    /// Its digest, for the pin.
    fn digest(&self) -> Result<KeyDigest>;

    /// Loads it from a file.
    fn load_file<C: Circuit<Fr>>(
        codec: &dyn KeyCodec,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<Self>;
}

impl StartKey for ProvingKey<G1Affine> {
    fn digest(&self) -> Result<KeyDigest> {
        KeyDigest::of_pk(self)
    }

    fn load_file<C: Circuit<Fr>>(
        codec: &dyn KeyCodec,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<Self> {
        codec.load::<C, Self>(path, circuit_params, options)
    }
}

impl StartKey for VerifyingKey<G1Affine> {
    fn digest(&self) -> Result<KeyDigest> {
        KeyDigest::of_vk(self)
    }

    fn load_file<C: Circuit<Fr>>(
        codec: &dyn KeyCodec,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<Self> {
        codec.load_verifying_key::<C>(path, circuit_params, options)
    }
}

/// The key at `object`, through its cache (see `RemoteExt::load_cached`).
#[cfg(feature = "remote")]
fn cached_key<C: Circuit<Fr>, K: StartKey>(
    codec: &dyn KeyCodec,
    object: &Object,
    circuit: &C,
    load: &LoadOptions,
) -> Result<K> {
    crate::cache::key::load_cached::<C, K>(
        &object.remote,
        codec,
        &object.path,
        &object.cache,
        circuit.params(),
        load,
    )
    .map(|(key, _)| key)
}

/// `key`, unless the load pins another digest ([`Error::DigestMismatch`] naming `at`).
fn pinned<K: StartKey>(key: K, load: &LoadOptions, at: &Path) -> Result<K> {
    if let Some(expected) = load.expected_digest {
        let found = key.digest()?;
        if found != expected {
            return Err(Error::DigestMismatch {
                kind: K::KIND,
                path: Some(at.to_path_buf()),
                expected,
                found,
            });
        }
    }
    Ok(key)
}

/// What a prover needs to start: its parameters and its proving key.
#[derive(Debug)]
pub struct ColdStart {
    /// The KZG parameters, downsized to the key's `k`.
    pub params: KzgParams,
    /// The proving key.
    pub pk: ProvingKey<G1Affine>,
    /// Whether the key was loaded or generated.
    pub origin: Origin,
}

/// The whole cold start of a prover whose circuit has `2^k` rows: the parameters
/// ([`open_params`], fitted to `k`, as [`StartOptions::params`] asks) and the proving key
/// ([`load_or_generate_pk`], as [`StartOptions::key`] asks) are loaded at the same time, each
/// with every core it can use, from files or objects; the key is generated (after the
/// parameters, which keygen needs) only if it is missing or provably not this key.
///
/// # Errors
///
/// Those of [`open_params`] and [`load_or_generate_pk`], each naming its artifact and file;
/// [`Error::KMismatch`] when [`StartOptions::params`] sets another `k` than `k`.
pub fn cold_start<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    params: impl Into<Location>,
    key: impl Into<Location>,
    k: u32,
    circuit: &C,
    options: &StartOptions,
) -> Result<ColdStart> {
    if let Some(other) = options.params.k.filter(|&other| other != k) {
        return Err(Error::KMismatch {
            expected: k,
            found: other,
        });
    }
    let (params_at, key_at) = (params.into(), key.into());
    let params_options = ParamsOptions {
        k: Some(k),
        ..options.params
    };
    let open = || open_params(params_at.clone(), &params_options);
    let load = options.key.load(k);
    let load_key = || match &key_at {
        Location::File(path) => {
            codec.load::<C, ProvingKey<G1Affine>>(path, circuit.params(), &load)
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => {
            cached_key::<C, ProvingKey<G1Affine>>(codec, object, circuit, &load)
        }
    };
    let (params, key) = std::thread::scope(|scope| {
        let params = std::thread::Builder::new()
            .name("keycodec-params".into())
            .spawn_scoped(scope, open);
        let key = load_key();
        let params = match params {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the parameters thread panicked".into()))),
            // No thread to spare: one after the other.
            Err(_) => open(),
        };
        (params, key)
    });
    let params = params?;
    if let Found::Usable(pk) = judge(key, Error::disproves_artifact)? {
        return Ok(ColdStart {
            params,
            pk,
            origin: Origin::Loaded,
        });
    }
    let (pk, origin) = load_or_generate_pk(codec, key_at, &params, circuit, options)?;
    Ok(ColdStart { params, pk, origin })
}

fn keygen(err: keycodec_core::halo2_proofs::plonk::Error) -> Error {
    Error::Internal(format!("halo2's keygen failed: {err:?}"))
}
