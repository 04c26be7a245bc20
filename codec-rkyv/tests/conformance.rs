//! The core's conformance kit, plus rkyv-specific adversarial cases.

// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use keycodec_rkyv::RkyvCodec;

keycodec_testkit::conformance_tests!(RkyvCodec);

use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_core::header::HEADER_LEN;
use keycodec_core::{Error, KeyCodecExt, LoadOptions};
use keycodec_testkit::conformance::{refresh_checksums, small_pk_file};
use keycodec_testkit::{pk_bytes, standard_plonk, StandardPlonk};

type Pk = ProvingKey<G1Affine>;

/// (frame start, archive length) of each section, walking the frames.
fn sections(file: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while at < file.len() {
        let len = u64::from_le_bytes(file[at..at + 8].try_into().unwrap()) as usize;
        out.push((at, len));
        at += 16 + len.div_ceil(16) * 16;
    }
    assert_eq!(at, file.len(), "frames tile the payload");
    out
}

fn load(file: &[u8]) -> keycodec_core::Result<Pk> {
    RkyvCodec.read_slice::<StandardPlonk, Pk>(file, (), &LoadOptions::default())
}

/// A file in a buffer that is not 16-byte aligned still loads (sections are copied into
/// aligned memory when they cannot be borrowed in place).
#[test]
fn misaligned_buffer_still_loads() {
    let file = small_pk_file(&RkyvCodec);
    for shift in [1, 3, 8] {
        let mut storage = vec![0u8; file.len() + 16];
        let base = storage.as_ptr() as usize;
        let start = (16 - base % 16) % 16 + shift;
        storage[start..start + file.len()].copy_from_slice(&file);
        let pk = load(&storage[start..start + file.len()]).unwrap();
        assert_eq!(pk_bytes(&pk), pk_bytes(&standard_plonk().pk));
    }
}

/// A section archive cut short (its declared length reduced, so rkyv looks for the root in
/// the wrong place) is a validation error, not a crash.
#[test]
fn archive_truncated_at_the_root_is_refused() {
    let file = small_pk_file(&RkyvCodec);
    let (start, len) = sections(&file)[1];
    let mut forged = file.clone();
    forged[start..start + 8].copy_from_slice(&((len - 16) as u64).to_le_bytes());
    refresh_checksums(&mut forged);
    let result = load(&forged);
    assert!(
        matches!(result, Err(Error::Backend { codec: "rkyv", .. })),
        "{:?}",
        result.err()
    );
}

/// The relative pointer in a section's root pointing out of the archive is refused by
/// bytecheck.
#[test]
fn corrupted_relative_pointer_is_refused() {
    let file = small_pk_file(&RkyvCodec);
    let (start, len) = sections(&file)[1];
    // The root (an ArchivedVec: 8-byte relative pointer, 8-byte length) ends the archive.
    let root = start + 16 + len - 16;
    for pointer in [i64::MIN, -1, 1 << 40, i64::MAX] {
        let mut forged = file.clone();
        forged[root..root + 8].copy_from_slice(&pointer.to_le_bytes());
        refresh_checksums(&mut forged);
        let result = load(&forged);
        assert!(
            matches!(result, Err(Error::Backend { codec: "rkyv", .. })),
            "pointer {pointer}: {:?}",
            result.err()
        );
    }
}

/// A polynomial section whose archived length is not 2^k is a structure error.
#[test]
fn wrong_polynomial_length_is_refused() {
    let file = small_pk_file(&RkyvCodec);
    let (start, len) = sections(&file)[1];
    let root_len = start + 16 + len - 8;
    let mut forged = file.clone();
    forged[root_len..root_len + 8].copy_from_slice(&1u64.to_le_bytes());
    refresh_checksums(&mut forged);
    let result = load(&forged);
    assert!(
        matches!(result, Err(Error::Structure { .. })),
        "{:?}",
        result.err()
    );
}

/// Padding between sections must be zero.
#[test]
fn non_zero_padding_is_refused() {
    let file = small_pk_file(&RkyvCodec);
    let (start, _) = sections(&file)[1];
    let mut forged = file.clone();
    forged[start + 8] = 1;
    refresh_checksums(&mut forged);
    let result = load(&forged);
    assert!(
        matches!(result, Err(Error::Malformed(_))),
        "{:?}",
        result.err()
    );
}

/// Scalars equal to p, p + 1 and 2^256 - 1 (raw Montgomery bytes) are refused when checked,
/// and loaded as they are when trusted.
#[test]
fn non_canonical_scalars_are_refused_when_checked() {
    let file = small_pk_file(&RkyvCodec);
    let (start, _) = sections(&file)[1];
    // The first element of the first polynomial section opens its archive.
    let first = start + 16;
    let modulus_le = keycodec_testkit::scalar_modulus_le();
    let mut plus_one = modulus_le;
    plus_one[0] += 1;
    for value in [modulus_le, plus_one, [0xff; 32]] {
        let mut forged = file.clone();
        forged[first..first + 32].copy_from_slice(&value);
        refresh_checksums(&mut forged);
        let result = load(&forged);
        assert!(
            matches!(result, Err(Error::InvalidFieldElement { .. })),
            "{:?}",
            result.err()
        );
        let trusted = LoadOptions {
            validation: keycodec_core::Validation::Trusted,
            ..LoadOptions::default()
        };
        assert!(RkyvCodec
            .read_slice::<StandardPlonk, Pk>(&forged, (), &trusted)
            .is_ok());
    }
}
