//! Pins: a key's digest and a verifying key's transcript checked from every source, a
//! verifying key read from a proving key's file, a forged recorded digest refused.

use keycodec_core::{
    Checksum, Error, KeyCodec, KeyCodecExt, KeyDigest, LoadOptions, SaveOptions, Validation,
};

use super::files::{rewrite_header, small_pk_file};
use super::{Pk, Vk};
use crate::{lookup, pk_bytes, standard_plonk, vk_bytes, LookupCircuit, StandardPlonk};

/// Saving returns the key's digest (the same as [`KeyDigest::of_pk`] / [`KeyDigest::of_vk`]
/// compute in memory); a load pinned to it succeeds from a file, a slice and a stream, and
/// reports it; a load pinned to another key's digest, or to another verifying key's
/// `transcript_repr`, is refused.
pub fn pinned_loads_check_the_key_digest_from_every_source<K: KeyCodec + ?Sized>(codec: &K) {
    let fixture = lookup();
    let other = standard_plonk();
    let dir = tempfile::tempdir().expect("tempdir");
    let pk_path = dir.path().join("key.pk");
    let vk_path = dir.path().join("key.vk");
    let pk_digest = codec
        .save::<LookupCircuit, _>(&pk_path, &fixture.pk, (), &SaveOptions::default())
        .expect("save pk");
    let vk_digest = codec
        .save::<LookupCircuit, _>(&vk_path, fixture.vk(), (), &SaveOptions::default())
        .expect("save vk");
    assert_eq!(Some(pk_digest), KeyDigest::of_pk(&fixture.pk).ok());
    assert_eq!(Some(vk_digest), KeyDigest::of_vk(fixture.vk()).ok());
    assert_ne!(pk_digest, vk_digest, "a verifying key has its own digest");
    let wrong = KeyDigest::of_pk(&other.pk).expect("digest");

    let (loaded, reported) = codec
        .load_with_digest::<LookupCircuit, Pk>(&pk_path, (), &LoadOptions::default())
        .expect("load with digest");
    assert_eq!(reported, pk_digest);
    assert_eq!(pk_bytes(&loaded), pk_bytes(&fixture.pk));
    let (_, reported) = codec
        .load_with_digest::<LookupCircuit, Vk>(&vk_path, (), &LoadOptions::default())
        .expect("load vk with digest");
    assert_eq!(reported, vk_digest);

    let bytes = std::fs::read(&pk_path).expect("read");
    for validation in [Validation::Checked, Validation::Trusted] {
        let pinned = |digest| LoadOptions {
            expected_digest: Some(digest),
            validation,
            ..LoadOptions::default()
        };
        let loads = |options: &LoadOptions| {
            [
                codec.load::<LookupCircuit, Pk>(&pk_path, (), options),
                codec.read_slice::<LookupCircuit, Pk>(&bytes, (), options),
                codec.read::<LookupCircuit, Pk>(&mut bytes.as_slice(), (), options),
            ]
        };
        for (source, result) in ["file", "slice", "stream"]
            .iter()
            .zip(loads(&pinned(pk_digest)))
        {
            let pk = result.unwrap_or_else(|err| panic!("{source} {validation:?}: {err}"));
            assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk), "{source}");
        }
        for (source, result) in ["file", "slice", "stream"]
            .iter()
            .zip(loads(&pinned(wrong)))
        {
            assert!(
                matches!(result, Err(Error::DigestMismatch { expected, found, .. }) if expected == wrong && found == pk_digest),
                "{source} {validation:?}: {:?}",
                result.err()
            );
        }
    }
    let transcript = |vk: &Vk| vk.transcript_repr();
    let right = LoadOptions {
        expected_transcript: Some(transcript(fixture.vk())),
        ..LoadOptions::default()
    };
    codec
        .load::<LookupCircuit, Vk>(&vk_path, (), &right)
        .expect("transcript pin");
    codec
        .load::<LookupCircuit, Pk>(&pk_path, (), &right)
        .expect("transcript pin on a proving key");
    let wrong_transcript = LoadOptions {
        expected_transcript: Some(transcript(other.vk())),
        ..LoadOptions::default()
    };
    let refused = codec.load::<LookupCircuit, Vk>(&vk_path, (), &wrong_transcript);
    assert!(
        matches!(refused, Err(Error::TranscriptMismatch { .. })),
        "{:?}",
        refused.err()
    );
}

/// [`KeyCodecExt::load_verifying_key`] reads a verifying key from a proving key's container:
/// the verifying key equals the original, a damaged polynomial region is refused by the
/// checksum unless a pin authenticates the verifying key (then the polynomials are not
/// read) or integrity is skipped, and a damaged verifying key is refused either way.
pub fn a_verifying_key_loads_from_a_proving_keys_file<K: KeyCodec + ?Sized>(codec: &K) {
    let fixture = lookup();
    let dir = tempfile::tempdir().expect("tempdir");
    let pk_path = dir.path().join("key.pk");
    codec
        .save::<LookupCircuit, _>(&pk_path, &fixture.pk, (), &SaveOptions::default())
        .expect("save");
    let plain = LoadOptions::default();
    let vk = codec
        .load_verifying_key::<LookupCircuit>(&pk_path, (), &plain)
        .expect("vk of pk");
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    // A verifying key's own file loads the same way.
    let vk_path = dir.path().join("key.vk");
    codec
        .save::<LookupCircuit, _>(&vk_path, fixture.vk(), (), &SaveOptions::default())
        .expect("save vk");
    let again = codec
        .load_verifying_key::<LookupCircuit>(&vk_path, (), &plain)
        .expect("vk");
    assert_eq!(vk_bytes(&again), vk_bytes(fixture.vk()));

    // The last byte of the file lies after the verifying key in every layout.
    let mut damaged = std::fs::read(&pk_path).expect("read");
    let last = damaged.len() - 1;
    damaged[last] ^= 0x01;
    let damaged_path = dir.path().join("damaged.pk");
    std::fs::write(&damaged_path, &damaged).expect("write");
    let refused = codec.load_verifying_key::<LookupCircuit>(&damaged_path, (), &plain);
    assert!(
        matches!(refused, Err(Error::PayloadChecksum { .. })),
        "{:?}",
        refused.err()
    );
    let pinned = LoadOptions {
        expected_transcript: Some(fixture.vk().transcript_repr()),
        ..LoadOptions::default()
    };
    let vk = codec
        .load_verifying_key::<LookupCircuit>(&damaged_path, (), &pinned)
        .expect("a pinned verifying key needs no polynomials");
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    let skipped = LoadOptions {
        checksum: Checksum::Skip,
        ..LoadOptions::default()
    };
    codec
        .load_verifying_key::<LookupCircuit>(&damaged_path, (), &skipped)
        .expect("integrity skipped");
    // A proving key is still refused from a verifying key's file.
    let as_pk = codec.load::<LookupCircuit, Pk>(&vk_path, (), &plain);
    assert!(matches!(as_pk, Err(Error::KindMismatch { .. })));
}

/// A header whose recorded digest is not its key's (resealed, as a forger would) loads when
/// no digest is computed, and is refused with [`Error::RecordedDigestMismatch`] when one is.
pub fn a_forged_recorded_digest_is_refused_when_the_digest_is_computed<K: KeyCodec + ?Sized>(
    codec: &K,
) {
    let mut file = small_pk_file(codec);
    let forged = KeyDigest([0x42; 32]);
    rewrite_header(&mut file, |header| header.digest = Some(forged));
    let unpinned = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    assert!(unpinned.is_ok(), "{:?}", unpinned.err());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("forged.pk");
    std::fs::write(&path, &file).expect("write");
    let result = codec.load_with_digest::<StandardPlonk, Pk>(&path, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::RecordedDigestMismatch { recorded, .. }) if recorded == forged),
        "{:?}",
        result.err()
    );
}
