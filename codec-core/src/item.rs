//! The items a container holds: keys (proving, verifying) and KZG parameters, borrowed for
//! encoding and owned once decoded, and the sealed [`HaloKey`] that names the two key types.

use halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use halo2_proofs::poly::kzg::commitment::ParamsKZG;
use halo2curves::bn256::{Bn256, G1Affine};

use crate::error::{Error, Result};
use crate::ids::ArtifactKind;

/// KZG parameters over BN254, as halo2-axiom's provers use them (halo2's `ParamsKZG<Bn256>`;
/// named apart from halo2's `Params` trait, which files using both import as `_`).
pub type KzgParams = ParamsKZG<Bn256>;

/// A borrowed key to encode.
#[derive(Clone, Copy, Debug)]
pub enum KeyRef<'a> {
    /// A proving key (its verifying key included).
    Proving(&'a ProvingKey<G1Affine>),
    /// A verifying key alone.
    Verifying(&'a VerifyingKey<G1Affine>),
}

impl KeyRef<'_> {
    /// Which kind of key this is.
    pub fn kind(&self) -> ArtifactKind {
        match self {
            KeyRef::Proving(_) => ArtifactKind::Proving,
            KeyRef::Verifying(_) => ArtifactKind::Verifying,
        }
    }

    /// The key's `k`.
    pub fn k(&self) -> u32 {
        self.vk().get_domain().k()
    }

    /// The verifying key (a proving key's own, or this one).
    pub fn vk(&self) -> &VerifyingKey<G1Affine> {
        match self {
            KeyRef::Proving(pk) => pk.get_vk(),
            KeyRef::Verifying(vk) => vk,
        }
    }
}

/// A decoded key.
// The proving key is moved once, from decoder to caller: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Key {
    /// A proving key.
    Proving(ProvingKey<G1Affine>),
    /// A verifying key.
    Verifying(VerifyingKey<G1Affine>),
}

impl Key {
    /// Which kind of key this is.
    pub fn kind(&self) -> ArtifactKind {
        match self {
            Key::Proving(_) => ArtifactKind::Proving,
            Key::Verifying(_) => ArtifactKind::Verifying,
        }
    }
}

/// What a container holds, borrowed for saving.
#[derive(Clone, Copy)]
pub enum ItemRef<'a> {
    /// A proving or verifying key.
    Key(KeyRef<'a>),
    /// KZG parameters.
    Params(&'a KzgParams),
}

impl ItemRef<'_> {
    pub(crate) fn kind(&self) -> ArtifactKind {
        match self {
            ItemRef::Key(key) => key.kind(),
            ItemRef::Params(_) => ArtifactKind::Params,
        }
    }

    pub(crate) fn k(&self) -> u32 {
        match self {
            ItemRef::Key(key) => key.k(),
            ItemRef::Params(params) => halo2_proofs::poly::commitment::Params::k(*params),
        }
    }
}

/// What a container holds, decoded.
// Moved once, from decoder to caller, as `Key` is.
#[allow(clippy::large_enum_variant)]
pub enum Item {
    /// A proving or verifying key.
    Key(Key),
    /// KZG parameters.
    Params(KzgParams),
}

impl Item {
    pub(crate) fn kind(&self) -> ArtifactKind {
        match self {
            Item::Key(key) => key.kind(),
            Item::Params(_) => ArtifactKind::Params,
        }
    }
}

/// A halo2 key type that a [`KeyCodec`](crate::KeyCodec) can store: `ProvingKey<G1Affine>` or
/// `VerifyingKey<G1Affine>`. Sealed.
pub trait HaloKey: Sized + sealed::Sealed {
    /// The kind recorded in the header.
    const KIND: ArtifactKind;

    /// Borrows the key for encoding.
    fn as_key_ref(&self) -> KeyRef<'_>;

    /// Takes the key of this kind out of a decoded [`Key`].
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] if `key` is of the other kind (a decoder's bug: the container
    /// asked it for this kind).
    fn from_key(key: Key) -> Result<Self>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for halo2_proofs::plonk::ProvingKey<halo2curves::bn256::G1Affine> {}
    impl Sealed for halo2_proofs::plonk::VerifyingKey<halo2curves::bn256::G1Affine> {}
}

fn wrong_kind(expected: ArtifactKind, found: ArtifactKind) -> Error {
    Error::Internal(format!(
        "a decoder returned a {found} for a {expected} request"
    ))
}

impl HaloKey for ProvingKey<G1Affine> {
    const KIND: ArtifactKind = ArtifactKind::Proving;

    fn as_key_ref(&self) -> KeyRef<'_> {
        KeyRef::Proving(self)
    }

    fn from_key(key: Key) -> Result<Self> {
        match key {
            Key::Proving(pk) => Ok(pk),
            other => Err(wrong_kind(Self::KIND, other.kind())),
        }
    }
}

impl HaloKey for VerifyingKey<G1Affine> {
    const KIND: ArtifactKind = ArtifactKind::Verifying;

    fn as_key_ref(&self) -> KeyRef<'_> {
        KeyRef::Verifying(self)
    }

    fn from_key(key: Key) -> Result<Self> {
        match key {
            Key::Verifying(vk) => Ok(vk),
            other => Err(wrong_kind(Self::KIND, other.kind())),
        }
    }
}
