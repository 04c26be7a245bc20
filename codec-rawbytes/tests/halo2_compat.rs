//! The payload is halo2's own format: both directions, in every `SerdeFormat`.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use keycodec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_core::{Error, KeyCodecExt, LoadOptions, Validation};
use keycodec_rawbytes::RawBytesCodec;
use keycodec_testkit::{lookup, pk_bytes, standard_plonk, vk_bytes, LookupCircuit, StandardPlonk};

const FORMATS: [SerdeFormat; 3] = [
    SerdeFormat::RawBytes,
    SerdeFormat::RawBytesUnchecked,
    SerdeFormat::Processed,
];

#[test]
fn export_is_byte_identical_to_halo2_write() {
    for format in FORMATS {
        let codec = RawBytesCodec::new(format);
        for pk in [&standard_plonk().pk, &lookup().pk] {
            let mut ours = Vec::new();
            codec.export(pk, &mut ours).unwrap();
            assert_eq!(ours, pk.to_bytes(format), "{format:?} pk");
            let mut ours = Vec::new();
            codec.export(pk.get_vk(), &mut ours).unwrap();
            assert_eq!(ours, pk.get_vk().to_bytes(format), "{format:?} vk");
        }
    }
}

#[test]
fn container_payload_is_the_halo2_payload() {
    let codec = RawBytesCodec::default();
    let pk = &lookup().pk;
    let file = codec.to_vec::<LookupCircuit, _>(pk, ()).unwrap();
    let header = keycodec_core::header::Header::from_bytes(&file).unwrap();
    let start = keycodec_core::header::HEADER_LEN;
    let end = start + header.payload_len as usize;
    assert_eq!(&file[start..end], pk.to_bytes(SerdeFormat::RawBytes));
}

#[test]
fn halo2_reads_what_we_export() {
    for format in FORMATS {
        let codec = RawBytesCodec::new(format);
        let fixture = lookup();
        let mut bytes = Vec::new();
        codec.export(&fixture.pk, &mut bytes).unwrap();
        let read =
            ProvingKey::<G1Affine>::read::<_, LookupCircuit>(&mut bytes.as_slice(), format, ())
                .unwrap();
        assert_eq!(pk_bytes(&read), pk_bytes(&fixture.pk), "{format:?}");
    }
}

#[test]
fn we_import_what_halo2_writes() {
    for format in FORMATS {
        let codec = RawBytesCodec::new(format);
        let fixture = standard_plonk();
        let bytes = fixture.pk.to_bytes(format);
        let pk: ProvingKey<G1Affine> = codec
            .import::<StandardPlonk, _>(&mut bytes.as_slice(), (), &LoadOptions::default())
            .unwrap();
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk), "{format:?}");
        let vk_bytes_halo2 = fixture.vk().to_bytes(format);
        let vk: VerifyingKey<G1Affine> = codec
            .import::<StandardPlonk, _>(&mut vk_bytes_halo2.as_slice(), (), &LoadOptions::default())
            .unwrap();
        assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()), "{format:?}");
    }
}

#[test]
fn import_file_checks_length_and_trailing_bytes() {
    let codec = RawBytesCodec::default();
    let fixture = lookup();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("halo2.pk");
    let mut bytes = fixture.pk.to_bytes(SerdeFormat::RawBytes);
    std::fs::write(&path, &bytes).unwrap();
    let pk: ProvingKey<G1Affine> = codec
        .import_file::<LookupCircuit, _>(&path, (), &LoadOptions::default())
        .unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));

    bytes.push(7);
    std::fs::write(&path, &bytes).unwrap();
    let result = codec.import_file::<LookupCircuit, ProvingKey<G1Affine>>(
        &path,
        (),
        &LoadOptions::default(),
    );
    assert!(
        matches!(result, Err(Error::TrailingBytes { count: 1 })),
        "{:?}",
        result.err()
    );
}

/// halo2's reader panics on a truncated key; ours returns `Truncated` for every prefix.
#[test]
fn truncated_halo2_file_is_an_error_not_a_panic() {
    let codec = RawBytesCodec::default();
    let bytes = standard_plonk().pk.to_bytes(SerdeFormat::RawBytes);
    let cut = &bytes[..bytes.len() - 100];
    let halo2 = catch_unwind(AssertUnwindSafe(|| {
        ProvingKey::<G1Affine>::read::<_, StandardPlonk>(&mut &cut[..], SerdeFormat::RawBytes, ())
    }));
    assert!(
        halo2.is_err(),
        "halo2-axiom's own reader is expected to panic here"
    );
    for end in 0..bytes.len() {
        let result = codec.import::<StandardPlonk, ProvingKey<G1Affine>>(
            &mut &bytes[..end],
            (),
            &LoadOptions::default(),
        );
        assert!(
            matches!(result, Err(Error::Truncated { .. })),
            "prefix {end}: {:?}",
            result.err()
        );
    }
}

/// A scalar equal to p, p + 1 or 2^256 - 1 (in Montgomery form, as raw bytes hold it) is
/// refused in checked mode.
#[test]
fn non_canonical_scalars_are_refused_when_checked() {
    let codec = RawBytesCodec::default();
    let bytes = standard_plonk().pk.to_bytes(SerdeFormat::RawBytes);
    // The first element of l0 sits right after the vk and l0's length prefix.
    let vk_len = standard_plonk()
        .pk
        .get_vk()
        .to_bytes(SerdeFormat::RawBytes)
        .len();
    let offset = vk_len + 4;
    let modulus = keycodec_testkit::scalar_modulus_le();
    let mut plus_one = modulus;
    plus_one[0] += 1;
    for value in [modulus, plus_one, [0xff; 32]] {
        let mut forged = bytes.clone();
        forged[offset..offset + 32].copy_from_slice(&value);
        let result = codec.import::<StandardPlonk, ProvingKey<G1Affine>>(
            &mut forged.as_slice(),
            (),
            &LoadOptions::default(),
        );
        assert!(
            matches!(result, Err(Error::InvalidFieldElement { .. })),
            "{:?}",
            result.err()
        );
        let trusted = LoadOptions {
            validation: Validation::Trusted,
            ..LoadOptions::default()
        };
        let result = codec.import::<StandardPlonk, ProvingKey<G1Affine>>(
            &mut forged.as_slice(),
            (),
            &trusted,
        );
        assert!(
            result.is_ok(),
            "trusted mode skips value checks: {:?}",
            result.err()
        );
    }
}

/// Points off the curve, and a malformed point at infinity, are refused.
#[test]
fn off_curve_commitments_are_refused() {
    let codec = RawBytesCodec::default();
    let bytes = standard_plonk().pk.get_vk().to_bytes(SerdeFormat::RawBytes);
    // Header: version (1) + k (4) + flag (1) + count (4); then the first commitment (64 bytes).
    let first = 10;
    for y_byte in [1u8, 0x42] {
        let mut forged = bytes.clone();
        forged[first..first + 64].fill(0);
        forged[first + 32] = y_byte; // x = 0, y != 0: not the identity, not on the curve
        let result = codec.import::<StandardPlonk, VerifyingKey<G1Affine>>(
            &mut forged.as_slice(),
            (),
            &LoadOptions::default(),
        );
        assert!(
            matches!(result, Err(Error::InvalidPoint { .. })),
            "{:?}",
            result.err()
        );
    }
}

/// Counts and lengths that disagree with the circuit are `Structure` or `LimitExceeded`
/// errors, found before allocation.
#[test]
fn forged_counts_are_refused_before_allocating() {
    let codec = RawBytesCodec::default();
    let bytes = standard_plonk().pk.to_bytes(SerdeFormat::RawBytes);
    let vk_len = standard_plonk()
        .pk
        .get_vk()
        .to_bytes(SerdeFormat::RawBytes)
        .len();
    // l0's length prefix (big-endian u32) claims u32::MAX elements.
    let mut forged = bytes.clone();
    forged[vk_len..vk_len + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    let result = codec.import::<StandardPlonk, ProvingKey<G1Affine>>(
        &mut forged.as_slice(),
        (),
        &LoadOptions::default(),
    );
    assert!(
        matches!(result, Err(Error::Structure { .. })),
        "{:?}",
        result.err()
    );
    // The fixed commitment count claims u32::MAX points in a tiny file.
    let mut forged = bytes.clone();
    forged[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forged.pk");
    std::fs::write(&path, &forged).unwrap();
    let result = codec.import_file::<StandardPlonk, ProvingKey<G1Affine>>(
        &path,
        (),
        &LoadOptions::default(),
    );
    assert!(
        matches!(result, Err(Error::LimitExceeded { .. })),
        "{:?}",
        result.err()
    );
    // A k above BN254's two-adicity.
    let mut forged = bytes;
    forged[1..5].copy_from_slice(&40u32.to_le_bytes());
    let result = codec.import::<StandardPlonk, ProvingKey<G1Affine>>(
        &mut forged.as_slice(),
        (),
        &LoadOptions::default(),
    );
    assert!(
        matches!(result, Err(Error::KOutOfRange { k: 40, .. })),
        "{:?}",
        result.err()
    );
}
