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

use crate::error::Result;
use crate::field::{write_fr_slice, FieldEncoding};
use crate::ids::KeyDigest;
use crate::item::KzgParams;
use crate::item::{ItemRef, Key, KeyRef};
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

    /// The digest of KZG parameters, as [`KeyCodecExt::save_params`](crate::KeyCodecExt::save_params)
    /// records it.
    ///
    /// # Errors
    ///
    /// As [`KeyDigest::of_vk`].
    pub fn of_params(params: &KzgParams) -> Result<Self> {
        of_params(params, None)
    }
}

/// BLAKE3 derive-key context of parameters' digests.
pub(crate) const PARAMS_CONTEXT: &str = "keycodec 2026-11 parameters digest v1";

/// The digest of what is about to be saved.
pub(crate) fn of_item_ref(item: ItemRef<'_>) -> Result<KeyDigest> {
    match item {
        ItemRef::Key(KeyRef::Proving(pk)) => KeyDigest::of_pk(pk),
        ItemRef::Key(KeyRef::Verifying(vk)) => KeyDigest::of_vk(vk),
        ItemRef::Params(params) => of_params(params, None),
    }
}

/// The digest of parameters: BLAKE3 in derive-key mode ([`PARAMS_CONTEXT`]) of `k` (u32 LE),
/// the hashes of `g` and `g_lagrange` (each BLAKE3 of its points' raw encodings, 64 bytes
/// per point), and the raw encodings of `g2` and `s_g2`. The vectors' hashes come from
/// `recorded` (hashed while they were read) when there are both, and are computed from the
/// parameters otherwise (through halo2's own writer: the parameters expose no `g_lagrange`).
pub(crate) fn of_params(params: &KzgParams, recorded: Option<Vec<[u8; 32]>>) -> Result<KeyDigest> {
    use halo2_proofs::poly::commitment::Params as _;
    use halo2curves::serde::SerdeObject;
    let (g, g_lagrange) = match recorded.as_deref() {
        Some([g, g_lagrange]) => (*g, *g_lagrange),
        _ => vector_hashes(params, true)?,
    };
    let mut hasher = blake3::Hasher::new_derive_key(PARAMS_CONTEXT);
    hasher.update(&params.k().to_le_bytes());
    hasher.update(&g);
    hasher.update(&g_lagrange);
    hasher.update(&params.g2().to_raw_bytes());
    hasher.update(&params.s_g2().to_raw_bytes());
    Ok(KeyDigest(*hasher.finalize().as_bytes()))
}

/// The hashes of `g` and `g_lagrange`: re-encoded through halo2's writer (halo2-axiom does
/// not expose `g_lagrange`), and, where `g_from_memory` and its memory is its raw encoding,
/// `g` hashed from memory on a second thread meanwhile (a save waits for this digest).
fn vector_hashes(params: &KzgParams, g_from_memory: bool) -> Result<([u8; 32], [u8; 32])> {
    use halo2_proofs::poly::commitment::{Params as _, ParamsProver as _};
    let in_memory = crate::memory::raw_bytes_of(params.get_g()).filter(|_| g_from_memory);
    std::thread::scope(|scope| {
        let g_thread = in_memory.and_then(|bytes| {
            std::thread::Builder::new()
                .name("keycodec-digest-g".into())
                .spawn_scoped(scope, move || *blake3::hash(bytes).as_bytes())
                .ok()
        });
        let mut buffered = std::io::BufWriter::with_capacity(
            1 << 20,
            VectorHashes::new(params.n(), g_thread.is_none()),
        );
        let hashed = params
            .write_custom(&mut buffered, halo2_proofs::SerdeFormat::RawBytes)
            .and_then(|()| buffered.into_inner().map_err(|err| err.into_error()));
        let (g, g_lagrange) = hashed
            .map_err(|err| crate::error::Error::Internal(format!("hashing parameters: {err}")))?
            .finish();
        let g = match (g, g_thread) {
            (Some(g), _) => g,
            (None, Some(thread)) => thread.join().map_err(|_| {
                crate::error::Error::Internal("the digest thread of g panicked".into())
            })?,
            (None, None) => {
                return Err(crate::error::Error::Internal(
                    "parameters' g was hashed neither way".into(),
                ))
            }
        };
        Ok((g, g_lagrange))
    })
}

/// Hashes `g` (unless told not to) and `g_lagrange` out of halo2's `RawBytes` layout of
/// parameters as it is written: `k` (4 bytes), then `n` points of each (64 bytes each), then
/// the G2 points.
struct VectorHashes {
    position: u64,
    vector_bytes: u64,
    g: Option<blake3::Hasher>,
    g_lagrange: blake3::Hasher,
}

impl VectorHashes {
    fn new(n: u64, hash_g: bool) -> Self {
        VectorHashes {
            position: 0,
            vector_bytes: n.saturating_mul(64),
            g: hash_g.then(blake3::Hasher::new),
            g_lagrange: blake3::Hasher::new(),
        }
    }

    /// The two hashes (`g`'s when it was hashed).
    fn finish(self) -> (Option<[u8; 32]>, [u8; 32]) {
        (
            self.g.map(|hasher| *hasher.finalize().as_bytes()),
            *self.g_lagrange.finalize().as_bytes(),
        )
    }
}

impl std::io::Write for VectorHashes {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let g_start = 4;
        let g_lagrange_start = g_start + self.vector_bytes;
        let end = g_lagrange_start + self.vector_bytes;
        let mut rest = buf;
        while !rest.is_empty() {
            let (target, limit) = if self.position < g_start {
                (None, g_start)
            } else if self.position < g_lagrange_start {
                (self.g.as_mut(), g_lagrange_start)
            } else if self.position < end {
                (Some(&mut self.g_lagrange), end)
            } else {
                (None, u64::MAX)
            };
            let take = rest
                .len()
                .min(usize::try_from(limit - self.position).unwrap_or(usize::MAX));
            let (head, tail) = rest.split_at(take);
            if let Some(hasher) = target {
                hasher.update(head);
            }
            self.position += take as u64;
            rest = tail;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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
    crate::vk_parts::write(&VkParts::of(vk)?, FieldEncoding::Raw, &mut bytes)?;
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
    match crate::memory::as_raw_bytes(values) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_hashed_from_memory_is_g_hashed_as_written() {
        use rand::SeedableRng;
        let params = KzgParams::setup(6, rand::rngs::StdRng::seed_from_u64(9));
        let from_memory = vector_hashes(&params, true).unwrap();
        let as_written = vector_hashes(&params, false).unwrap();
        assert_eq!(from_memory, as_written);
        // And both are the hashes of the vectors' raw encodings.
        let mut written = Vec::new();
        params
            .write_custom(&mut written, halo2_proofs::SerdeFormat::RawBytes)
            .unwrap();
        let n = 1 << 6;
        assert_eq!(
            as_written.0,
            *blake3::hash(&written[4..4 + 64 * n]).as_bytes()
        );
        assert_eq!(
            as_written.1,
            *blake3::hash(&written[4 + 64 * n..4 + 128 * n]).as_bytes()
        );
    }
}
