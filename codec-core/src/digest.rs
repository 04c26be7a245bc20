//! The key digest: a BLAKE3 hash of a key's content, the same whatever backend stored it.
//!
//! A polynomial's hash is BLAKE3 of its elements' raw encoding (32 bytes each, Montgomery
//! limbs, little-endian: what halo2's `RawBytes` stores). The verifying key's digest is
//! BLAKE3 in derive-key mode (context [`VK_CONTEXT`]) of its data in halo2's layout (`k`, the
//! selector-compression flag, the commitments as raw points, the packed selectors). A proving
//! key's digest is BLAKE3 in derive-key mode (context [`PK_CONTEXT`]) of its verifying key's
//! digest, the number of polynomials (u32 LE) and each polynomial's hash, in halo2's order.
//! `docs/format.md` has the definition with an example.
//!
//! Polynomials are hashed while they are read: BLAKE3 is a tree of 1 KiB chunks, so each
//! power-of-two piece a bulk read checks (while it is in cache, on whichever thread read it)
//! yields the chaining value of one subtree, and the pieces are merged into the polynomial's
//! hash afterwards.

use halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use halo2curves::bn256::{Fr, G1Affine};
use rayon::prelude::*;

use crate::codec::{Key, KeyRef};
use crate::error::Result;
use crate::field::{write_fr_slice, FieldEncoding};
use crate::ids::KeyDigest;
use crate::pk_parts::polynomials;
use crate::vk_parts::VkParts;

/// BLAKE3 derive-key context of verifying-key digests.
pub(crate) const VK_CONTEXT: &str = "keycodec 2026-11 verifying key digest v1";
/// BLAKE3 derive-key context of proving-key digests.
pub(crate) const PK_CONTEXT: &str = "keycodec 2026-11 proving key digest v1";

impl KeyDigest {
    /// The digest of a verifying key.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`](crate::Error::Internal) if halo2's own serialization of the key is inconsistent.
    pub fn of_vk(vk: &VerifyingKey<G1Affine>) -> Result<Self> {
        vk_digest(vk)
    }

    /// The digest of a proving key (its polynomials hashed in parallel).
    ///
    /// # Errors
    ///
    /// As [`KeyDigest::of_vk`].
    pub fn of_pk(pk: &ProvingKey<G1Affine>) -> Result<Self> {
        let hashes: Vec<[u8; 32]> = polynomials(pk)
            .collect::<Vec<_>>()
            .par_iter()
            .map(|values| hash_values(values))
            .collect();
        Ok(pk_digest(vk_digest(pk.get_vk())?, &hashes))
    }
}

/// The digest of a key to be saved.
pub(crate) fn of_key_ref(key: KeyRef<'_>) -> Result<KeyDigest> {
    match key {
        KeyRef::Proving(pk) => KeyDigest::of_pk(pk),
        KeyRef::Verifying(vk) => KeyDigest::of_vk(vk),
    }
}

/// The digest of a decoded key, using the polynomial hashes recorded while it was read when
/// there is one for every polynomial (and hashing the polynomials in memory otherwise).
pub(crate) fn of_decoded(key: &Key, recorded: Option<Vec<[u8; 32]>>) -> Result<KeyDigest> {
    match key {
        Key::Verifying(vk) => vk_digest(vk),
        Key::Proving(pk) => {
            let count = polynomials(pk).count();
            match recorded {
                Some(hashes) if hashes.len() == count => {
                    Ok(pk_digest(vk_digest(pk.get_vk())?, &hashes))
                }
                _ => KeyDigest::of_pk(pk),
            }
        }
    }
}

/// The verifying key's digest.
pub(crate) fn vk_digest(vk: &VerifyingKey<G1Affine>) -> Result<KeyDigest> {
    let mut bytes = Vec::new();
    crate::vk_layout::write(&VkParts::of(vk)?, FieldEncoding::Raw, &mut bytes)?;
    Ok(KeyDigest(blake3::derive_key(VK_CONTEXT, &bytes)))
}

/// A proving key's digest from its verifying key's and its polynomials' hashes.
pub(crate) fn pk_digest(vk: KeyDigest, polys: &[[u8; 32]]) -> KeyDigest {
    let mut hasher = blake3::Hasher::new_derive_key(PK_CONTEXT);
    hasher.update(&vk.0);
    hasher.update(&(polys.len() as u32).to_le_bytes());
    for hash in polys {
        hasher.update(hash);
    }
    KeyDigest(*hasher.finalize().as_bytes())
}

/// The hash of one polynomial from its values in memory (hashed in parallel).
pub(crate) fn hash_values(values: &[Fr]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    match crate::raw_view::as_raw_bytes(values) {
        Some(bytes) => {
            hasher.update_rayon(bytes);
        }
        None => {
            // Writing into a hasher cannot fail.
            let _ = write_fr_slice(&mut hasher, values, FieldEncoding::Raw);
        }
    }
    *hasher.finalize().as_bytes()
}
