//! Pinning against substitution: two circuits with one `configure` (and so one fingerprint)
//! and different constants. Unpinned, the other circuit's key loads (the checksum and the
//! fingerprint cannot tell them apart); pinned by digest or by `transcript_repr`, it is
//! refused. The digest is the same whatever backend stored the key.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::{load_key, save_key, Backend, Error, KeyDigest, KeyOptions, KeyPin};
use keycodec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_testkit::{generate, pk_bytes, DenseCircuit, Fixture};

type Pk = ProvingKey<G1Affine>;
type Vk = VerifyingKey<G1Affine>;

/// One circuit type, two instances with different fixed constants, at `k`.
fn dense(rows: usize, k: u32) -> Fixture<DenseCircuit> {
    generate(k, DenseCircuit { rows }, vec![], false)
}

#[test]
fn another_circuits_key_with_the_same_configure_is_refused_only_when_pinned() {
    let (a, b) = (dense(100, 8), dense(60, 8));
    let b_other_k = dense(60, 9);
    let digest_a = KeyDigest::of_pk(&a.pk).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for backend in Backend::compiled() {
        let options = KeyOptions {
            backend: Some(backend),
            ..KeyOptions::default()
        };
        let path_a = dir.path().join(format!("{backend}-a.pk"));
        let path_b = dir.path().join(format!("{backend}-b.pk"));
        let path_b9 = dir.path().join(format!("{backend}-b9.pk"));
        assert_eq!(
            save_key::<DenseCircuit, _>(&path_a, &a.pk, (), &options).unwrap(),
            digest_a,
            "{backend}: the digest depends on the backend"
        );
        let digest_b = save_key::<DenseCircuit, _>(&path_b, &b.pk, (), &options).unwrap();
        save_key::<DenseCircuit, _>(&path_b9, &b_other_k.pk, (), &options).unwrap();
        assert_ne!(digest_a, digest_b);

        // Unpinned, the substitute loads: the hazard pinning exists for.
        let substitute: Pk = load_key::<DenseCircuit, _>(&path_b, (), &options).unwrap();
        assert_eq!(pk_bytes(&substitute), pk_bytes(&b.pk));
        let other_k: Pk = load_key::<DenseCircuit, _>(&path_b9, (), &options).unwrap();
        assert_eq!(other_k.get_vk().get_domain().k(), 9);

        let pinned = KeyOptions {
            pin: Some(KeyPin::Digest(digest_a)),
            ..options
        };
        let loaded: Pk = load_key::<DenseCircuit, _>(&path_a, (), &pinned).unwrap();
        assert_eq!(pk_bytes(&loaded), pk_bytes(&a.pk));
        for path in [&path_b, &path_b9] {
            let refused = load_key::<DenseCircuit, Pk>(path, (), &pinned);
            assert!(
                matches!(refused, Err(Error::DigestMismatch { .. })),
                "{backend} {}: {:?}",
                path.display(),
                refused.err()
            );
        }

        // The transcript pin a verifier carries refuses the other verifying key.
        let by_transcript = KeyOptions {
            pin: Some(KeyPin::Transcript(a.vk().transcript_repr())),
            ..options
        };
        let refused = load_key::<DenseCircuit, Pk>(&path_b, (), &by_transcript);
        assert!(
            matches!(refused, Err(Error::TranscriptMismatch { .. })),
            "{backend}: {:?}",
            refused.err()
        );
        load_key::<DenseCircuit, Pk>(&path_a, (), &by_transcript).unwrap();
    }
}

#[test]
fn verifying_keys_have_their_own_digest_and_pin() {
    let (a, b) = (dense(100, 8), dense(60, 8));
    let dir = tempfile::tempdir().unwrap();
    let vk_digest = KeyDigest::of_vk(a.vk()).unwrap();
    assert_ne!(vk_digest, KeyDigest::of_pk(&a.pk).unwrap());
    for backend in Backend::compiled() {
        let options = KeyOptions {
            backend: Some(backend),
            ..KeyOptions::default()
        };
        let path = dir.path().join(format!("{backend}.vk"));
        let other = dir.path().join(format!("{backend}-other.vk"));
        assert_eq!(
            save_key::<DenseCircuit, _>(&path, a.vk(), (), &options).unwrap(),
            vk_digest
        );
        save_key::<DenseCircuit, _>(&other, b.vk(), (), &options).unwrap();
        let pinned = KeyOptions {
            pin: Some(KeyPin::Digest(vk_digest)),
            ..options
        };
        load_key::<DenseCircuit, Vk>(&path, (), &pinned).unwrap();
        let refused = load_key::<DenseCircuit, Vk>(&other, (), &pinned);
        assert!(
            matches!(refused, Err(Error::DigestMismatch { .. })),
            "{backend}: {:?}",
            refused.err()
        );
    }
}
