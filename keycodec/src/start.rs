//! A prover's cold start in one call: the KZG parameters and the proving key, each loaded
//! when it is there and is the right one (the pinned one, when pinned), and the key generated
//! with halo2's keygen and saved atomically when it is not (the `gen_pk` pattern of
//! snark-verifier-sdk, without its torn files and its trust in whatever file is there).
//!
//! Each artifact is at a [`Location`] and has the options of its kind: the key's
//! ([`KeyOptions`]) and the parameters' ([`ParamsOptions`]); how a missing key is made is
//! [`Keygen`]'s. The rule a key is replaced under is [`load_or_generate`]'s.

use keycodec_core::record::RecordableParams;
use std::time::Duration;

use keycodec_core::halo2_proofs::plonk::{keygen_pk, keygen_vk_custom, Circuit, ProvingKey};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{lock_beside, Error, KeyCodecExt, KzgParams, Result, SaveOptions};

use crate::location::Location;
use crate::options::{Key, KeyOptions};
use crate::params::{open_params, ParamsOptions};
use crate::replace::{file_kind, judge, judge_file, refuse_vk_over_pk, Found};

/// Where a key came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its file was there, and was the right key.
    Loaded,
    /// Its file was missing, damaged or another key: it was generated and saved.
    Generated,
}

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

/// How a start makes a key that is missing or provably not this key (the backend it is
/// saved with is [`KeyOptions::backend`]'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keygen {
    /// Whether keygen compresses selectors (halo2-axiom's `keygen_vk` does not: the default).
    pub selectors: Selectors,
    /// How long to wait for another process generating the same key before reporting it
    /// (an [`Error::Io`] of kind `TimedOut` naming the lock and its holder, and whether it is
    /// stopped). Default three hours (longer than keygen takes at `k = 24` on two cores);
    /// `Duration::MAX` waits as long as it takes. (A load through an object's cache waits on
    /// the cache's lock as `RemoteOptions::lock_timeout` says.)
    pub lock_timeout: Duration,
}

impl Default for Keygen {
    fn default() -> Self {
        Keygen {
            selectors: Selectors::Separate,
            lock_timeout: keycodec_core::DEFAULT_LOCK_TIMEOUT,
        }
    }
}

/// Loads the key (proving or verifying) at `at` if it is there and is this circuit's key for
/// `params`'s `k` (and the pinned one, if [`KeyOptions::pin`] pins one); when it is missing
/// or provably not this key, generates it with halo2's keygen as `keygen` says, checks it
/// against the pin, saves it atomically with [`KeyOptions::backend`] (for an object: uploads
/// it, then keeps a copy in the cache if it can) and returns it; returns the load's error
/// otherwise. A verifying key loads from a proving key's container too.
///
/// **The rule.** A key is generated (and saved over its file or object) only when it is
/// missing or one complete read of one version of it proves it is not this key
/// ([`Error::disproves_artifact`]): a file damaged; a file or object of another circuit, `k`,
/// kind or digest. Any other failure is the error and the artifact stays as it is: an I/O
/// error, a transport's (an object that reads as damaged is not replaced), the caller's own
/// limits, budget or backend, a file a newer keycodec wrote, a file that changed while it was
/// read or while the key was generated ([`Error::FileChanged`]: a deploy copying a key over
/// it). A verifying key is never written over a proving key's container.
///
/// Two processes (or threads) starting at once are safe: the first that finds no usable key
/// takes a lock (`.{name}.keycodec.lock` beside the key, or in the cache directory) and
/// generates; the others wait for the lock (up to [`Keygen::lock_timeout`]), then load what
/// it saved. No one ever reads a torn file: saves are atomic, and an object appears only
/// once its upload is complete. (Two machines sharing an object may both generate: keygen is
/// deterministic, so the object holds the same key either way.)
///
/// # Errors
///
/// A load's error that does not disprove the file (the rule above); [`Error::KMismatch`]
/// when [`KeyOptions::k`] is not `params`'s; halo2's keygen errors (as [`Error::Internal`]);
/// a generated key that is not the pinned one ([`Error::DigestMismatch`],
/// [`Error::TranscriptMismatch`], naming the key's file: nothing is saved); a lock held past
/// the timeout; [`Error::FileChanged`] for a key file that changed while it was read or while
/// the key was generated (nothing is saved over it); the upload's and the save's errors.
pub fn load_or_generate<C: Circuit<Fr>, K: Key + Generated>(
    at: impl Into<Location>,
    params: &KzgParams,
    circuit: &C,
    options: &KeyOptions,
    keygen: &Keygen,
) -> Result<(K, Origin)>
where
    C::Params: RecordableParams,
{
    let k = params.k();
    if let Some(other) = options.k.filter(|&other| other != k) {
        return Err(Error::KMismatch {
            expected: k,
            found: other,
        });
    }
    let options = KeyOptions {
        k: Some(k),
        ..*options
    };
    let codec = options.save_backend()?;
    let generate = || K::generate(params, circuit, keygen.selectors);
    match at.into() {
        Location::File(path) => {
            let attempt = || {
                judge_file(
                    &path,
                    || crate::key::load_key::<C, K>(&path, circuit.params(), &options),
                    Error::disproves_artifact,
                )
            };
            if let (Found::Usable(key), _) = attempt()? {
                return Ok((key, Origin::Loaded));
            }
            let _lock = lock_beside(&path, keygen.lock_timeout)?;
            let (proof, witness) = match attempt()? {
                (Found::Usable(key), _) => return Ok((key, Origin::Loaded)),
                (Found::Replaceable(proof), witness) => (proof, witness),
            };
            refuse_vk_over_pk(K::KIND, file_kind(&path), proof)?;
            let key = generate()?;
            options.check_pin(&key, &path.display().to_string())?;
            witness.still(&path)?;
            codec.save::<C, _>(&path, &key, circuit.params(), &SaveOptions::default())?;
            Ok((key, Origin::Generated))
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => {
            let attempt = || {
                judge(
                    crate::key::load_key::<C, K>(
                        Location::Object(object.clone()),
                        circuit.params(),
                        &options,
                    ),
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
                &crate::remote::cache::key::generate_lock(&object),
                keygen.lock_timeout,
            )?;
            let proof = match attempt()? {
                Found::Usable(key) => return Ok((key, Origin::Loaded)),
                Found::Replaceable(proof) => proof,
            };
            if K::KIND == keycodec_core::ArtifactKind::Verifying {
                let kind = match object.remote.header(&object.path) {
                    Ok(header) => Some(header.kind),
                    Err(err) if err.is_missing() => None,
                    Err(err) => return Err(err),
                };
                refuse_vk_over_pk(K::KIND, kind, proof)?;
            }
            let key = generate()?;
            options.check_pin(&key, &object.name())?;
            object
                .remote
                .save::<C, K>(codec, &object.path, &key, circuit.params())?;
            if let Some(path) =
                crate::remote::cache::key::pinned_key_path(&object, codec, &options.load())
            {
                let _ = codec.save::<C, _>(&path, &key, circuit.params(), &SaveOptions::default());
            }
            Ok((key, Origin::Generated))
        }
    }
}

/// A key halo2's keygen makes: `ProvingKey<G1Affine>` or `VerifyingKey<G1Affine>`. Sealed.
pub trait Generated: Key + sealed::Sealed {
    /// Runs halo2's keygen for `circuit` with `params`.
    #[doc(hidden)]
    fn generate<C: Circuit<Fr>>(
        params: &KzgParams,
        circuit: &C,
        selectors: Selectors,
    ) -> Result<Self>;
}

mod sealed {
    use keycodec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
    use keycodec_core::halo2curves::bn256::G1Affine;

    pub trait Sealed {}
    impl Sealed for ProvingKey<G1Affine> {}
    impl Sealed for VerifyingKey<G1Affine> {}
}

impl Generated for ProvingKey<G1Affine> {
    fn generate<C: Circuit<Fr>>(
        params: &KzgParams,
        circuit: &C,
        selectors: Selectors,
    ) -> Result<Self> {
        let vk =
            <keycodec_core::halo2_proofs::plonk::VerifyingKey<G1Affine> as Generated>::generate(
                params, circuit, selectors,
            )?;
        keygen_pk(params, vk, circuit).map_err(keygen_failed)
    }
}

impl Generated for keycodec_core::halo2_proofs::plonk::VerifyingKey<G1Affine> {
    fn generate<C: Circuit<Fr>>(
        params: &KzgParams,
        circuit: &C,
        selectors: Selectors,
    ) -> Result<Self> {
        keygen_vk_custom(params, circuit, selectors == Selectors::Compressed).map_err(keygen_failed)
    }
}

/// What a prover starts from: its KZG parameters and its proving key, where each is and the
/// options of each, the circuit's `k`, and how a missing key is made. Built in code
/// ([`Start::new`]) or from a manifest ([`Manifest::start`](crate::manifest::Manifest::start)).
#[derive(Clone, Debug)]
pub struct Start {
    /// Where the parameters are.
    pub params: Location,
    /// How they are opened (their `k` is [`Start::k`]: leave it `None`).
    pub params_options: ParamsOptions,
    /// Where the proving key is.
    pub key: Location,
    /// How it is loaded, pinned and saved (its `k` is [`Start::k`]: leave it `None`).
    pub key_options: KeyOptions,
    /// How it is made when missing or provably not this key.
    pub keygen: Keygen,
    /// The circuit's `k` (`2^k` rows).
    pub k: u32,
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

impl Start {
    /// A prover whose parameters are at `params` and proving key at `key`, for a circuit of
    /// `2^k` rows, with default options (every value checked, nothing pinned: pin both).
    pub fn new(params: impl Into<Location>, key: impl Into<Location>, k: u32) -> Self {
        Start {
            params: params.into(),
            params_options: ParamsOptions::default(),
            key: key.into(),
            key_options: KeyOptions::default(),
            keygen: Keygen::default(),
            k,
        }
    }

    /// The prover's whole cold start: the parameters ([`open_params`], fitted to `k`) and the
    /// proving key ([`crate::load_key`]) are loaded at the same time, each with every core it
    /// can use, from files or objects; the key is generated (after the parameters, which
    /// keygen needs) only if it is missing or provably not this key
    /// ([`load_or_generate`]).
    ///
    /// # Errors
    ///
    /// Those of [`open_params`] and [`load_or_generate`], each naming its file or object;
    /// [`Error::KMismatch`] when the options set another `k` than [`Start::k`].
    pub fn run<C: Circuit<Fr>>(&self, circuit: &C) -> Result<ColdStart>
    where
        C::Params: RecordableParams,
    {
        let k = self.k;
        for other in [self.params_options.k, self.key_options.k]
            .into_iter()
            .flatten()
        {
            if other != k {
                return Err(Error::KMismatch {
                    expected: k,
                    found: other,
                });
            }
        }
        let params_options = ParamsOptions {
            k: Some(k),
            ..self.params_options
        };
        let key_options = KeyOptions {
            k: Some(k),
            ..self.key_options
        };
        let open = || open_params(self.params.clone(), &params_options);
        let load_key = || {
            crate::key::load_key::<C, ProvingKey<G1Affine>>(
                self.key.clone(),
                circuit.params(),
                &key_options,
            )
        };
        let (params, key) = std::thread::scope(|scope| {
            let params = std::thread::Builder::new()
                .name("keycodec-params".into())
                .spawn_scoped(scope, open);
            let key = load_key();
            let params = match params {
                Ok(thread) => thread.join().unwrap_or_else(|_| {
                    Err(Error::Internal("the parameters thread panicked".into()))
                }),
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
        let (pk, origin) = load_or_generate(
            self.key.clone(),
            &params,
            circuit,
            &key_options,
            &self.keygen,
        )?;
        Ok(ColdStart { params, pk, origin })
    }
}

fn keygen_failed(err: keycodec_core::halo2_proofs::plonk::Error) -> Error {
    Error::Internal(format!("halo2's keygen failed: {err:?}"))
}
