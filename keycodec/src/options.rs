//! How a key is loaded, saved and pinned: one options type, [`KeyOptions`], whichever entry
//! point takes it ([`crate::load_key`], [`crate::save_key`], [`crate::load_or_generate`], a
//! [`crate::Start`]'s run, a manifest's key).

use keycodec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{
    Checksum, CodecSet, Error, HaloKey, KeyDigest, Limits, LoadOptions, Result, Validation,
};

use crate::backend::Backend;

/// What pins a key: a key that is not this one is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPin {
    /// Its digest: what [`crate::save_key`] returns and `keycodec digest FILE` prints
    /// (BLAKE3 of the key, whichever backend stored it). A verifying key is pinned by its
    /// own digest, also when it loads from a proving key's container (whose polynomials are
    /// then not read at all).
    Digest(KeyDigest),
    /// Its verifying key's `transcript_repr()`, which a verifier (or a contract) already
    /// carries: pins a proving key too, by the verifying key inside it.
    Transcript(Fr),
}

impl From<KeyDigest> for KeyPin {
    fn from(digest: KeyDigest) -> Self {
        KeyPin::Digest(digest)
    }
}

/// How a key is loaded, saved and pinned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyOptions {
    /// Whether every value is checked (`Checked`, the default) or trusted (for files you
    /// wrote yourself: structure, lengths and checksums are still checked).
    pub validation: Validation,
    /// The key expected: another is refused ([`Error::DigestMismatch`],
    /// [`Error::TranscriptMismatch`]); a save or a keygen that made another is an error, and
    /// writes nothing. **Pin what you load**: without a pin, another circuit sharing this
    /// circuit's `configure` loads.
    pub pin: Option<KeyPin>,
    /// The key's `k`: a key for another is refused ([`Error::KMismatch`]). `None` accepts
    /// the file's. A start sets it to its parameters' `k`.
    pub k: Option<u32>,
    /// The backend: a load accepts only files it wrote ([`Error::CodecNotAllowed`]) and a
    /// save writes with it. `None`: a load accepts every compiled backend (the file's header
    /// names it), a save writes with rawbytes (in a build without it, the first backend
    /// compiled in).
    pub backend: Option<Backend>,
    /// Whether the payload's checksum is verified (the default) or skipped.
    pub checksum: Checksum,
    /// The largest `k` and payload a load accepts, and its memory budget.
    pub limits: Limits,
}

impl KeyOptions {
    /// The core's options for a load of this key.
    pub(crate) fn load(&self) -> LoadOptions {
        let (expected_digest, expected_transcript) = match self.pin {
            None => (None, None),
            Some(KeyPin::Digest(digest)) => (Some(digest), None),
            Some(KeyPin::Transcript(transcript)) => (None, Some(transcript)),
        };
        LoadOptions {
            validation: self.validation,
            limits: self.limits,
            expected_k: self.k,
            checksum: self.checksum,
            expected_digest,
            expected_transcript,
            codecs: self
                .backend
                .map_or(CodecSet::ALL, |backend| CodecSet::NONE.with(backend.id())),
            ..LoadOptions::default()
        }
    }

    /// The backend a save writes with.
    pub(crate) fn save_backend(&self) -> Result<&'static dyn keycodec_core::KeyCodec> {
        // rawbytes, first in the list when compiled in; else the first backend compiled.
        let default = || Backend::compiled().next().unwrap_or(Backend::RAWBYTES);
        self.backend.unwrap_or_else(default).codec()
    }

    /// `key`, if it is the pinned one (or nothing is pinned); `at` names it in the error.
    pub(crate) fn check_pin<K: Key>(&self, key: &K, at: &str) -> Result<()> {
        match self.pin {
            None => Ok(()),
            Some(KeyPin::Digest(expected)) => {
                let found = key.digest()?;
                if found == expected {
                    return Ok(());
                }
                Err(Error::DigestMismatch {
                    kind: K::KIND,
                    path: Some(at.into()),
                    expected,
                    found,
                })
            }
            Some(KeyPin::Transcript(expected)) => {
                let found = key.vk().transcript_repr();
                if found == expected {
                    return Ok(());
                }
                Err(Error::TranscriptMismatch { expected, found }.at_path(std::path::Path::new(at)))
            }
        }
    }
}

/// A key keycodec loads, saves and generates: `ProvingKey<G1Affine>` or
/// `VerifyingKey<G1Affine>`. Sealed (by [`HaloKey`]).
pub trait Key: HaloKey {
    /// Its digest (BLAKE3 of the key, whichever backend stores it).
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] for a key halo2 cannot serialize.
    fn digest(&self) -> Result<KeyDigest>;

    /// Its verifying key.
    fn vk(&self) -> &VerifyingKey<G1Affine>;
}

impl Key for ProvingKey<G1Affine> {
    fn digest(&self) -> Result<KeyDigest> {
        KeyDigest::of_pk(self)
    }

    fn vk(&self) -> &VerifyingKey<G1Affine> {
        self.get_vk()
    }
}

impl Key for VerifyingKey<G1Affine> {
    fn digest(&self) -> Result<KeyDigest> {
        KeyDigest::of_vk(self)
    }

    fn vk(&self) -> &VerifyingKey<G1Affine> {
        self
    }
}
