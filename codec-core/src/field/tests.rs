use super::*;

use halo2_proofs::halo2curves::group::{prime::PrimeCurveAffine, Curve};
use halo2curves::bn256::G1;

#[test]
fn the_fast_range_check_agrees_with_halo2curves() {
    let modulus = modulus_limbs();
    // BN254's scalar modulus, written out independently of the code under test.
    let hex = "30644e72e131a029b85045b68181585d2833e84879b9709143e1f593f0000001";
    let mut p = [0u8; 32];
    for (i, byte) in p.iter_mut().rev().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    assert_eq!(
        modulus,
        std::array::from_fn(|i| u64::from_le_bytes(p[8 * i..8 * i + 8].try_into().unwrap()))
    );
    let mut cases: Vec<[u8; 32]> = vec![[0; 32], [0xff; 32], p];
    for delta in [1u8, 2] {
        let mut above = p;
        above[0] += delta; // p's low byte is 0x01: no carry
        cases.push(above);
        let mut below = p;
        below[0] -= 1; // p - 1
        cases.push(below);
    }
    // Top limb equal to p's, lower limbs above and below.
    let mut high_equal = p;
    high_equal[8] = high_equal[8].wrapping_add(1);
    cases.push(high_equal);
    let mut high_equal_below = p;
    high_equal_below[9] = 0;
    cases.push(high_equal_below);
    let mut rng = rand::thread_rng();
    cases.extend((0..1000).map(|_| encode_fr(&Fr::random(&mut rng), FieldEncoding::Raw)));
    cases.extend((0..1000).map(|_| {
        let mut bytes = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rng, &mut bytes);
        bytes
    }));
    for case in cases {
        assert_eq!(
            raw_below_modulus(&case, &modulus),
            Fr::from_raw_bytes(&case).is_some(),
            "{case:02x?}"
        );
    }
}

#[test]
fn scalars_round_trip_in_both_encodings() {
    let values = [Fr::ZERO, Fr::ONE, -Fr::ONE, Fr::from(123_456_789u64)];
    for encoding in [FieldEncoding::Raw, FieldEncoding::Canonical] {
        for value in values {
            let bytes = encode_fr(&value, encoding);
            let back = decode_fr(&bytes, encoding, Validation::Checked, "test");
            assert_eq!(back.ok(), Some(value));
        }
    }
}

#[test]
fn raw_encoding_matches_halo2curves() {
    let value = Fr::from(987_654_321u64);
    assert_eq!(
        encode_fr(&value, FieldEncoding::Raw).to_vec(),
        value.to_raw_bytes()
    );
}

#[test]
fn out_of_range_scalars_are_rejected_when_checked() {
    // The all-ones pattern is above the modulus in every encoding.
    let bytes = [0xffu8; FR_BYTES];
    for encoding in [FieldEncoding::Raw, FieldEncoding::Canonical] {
        assert!(matches!(
            decode_fr(&bytes, encoding, Validation::Checked, "test"),
            Err(Error::InvalidFieldElement { .. })
        ));
    }
}

#[test]
fn points_round_trip_and_identity_is_accepted() {
    let generator = G1Affine::generator();
    let other = (G1::generator() * Fr::from(7u64)).to_affine();
    for encoding in [FieldEncoding::Raw, FieldEncoding::Canonical] {
        for point in [generator, other, G1Affine::identity()] {
            let bytes = encode_g1(&point, encoding);
            let back = decode_g1(&bytes, encoding, Validation::Checked, "test");
            assert_eq!(back.ok(), Some(point));
        }
    }
}

#[test]
fn off_curve_points_are_rejected() {
    let mut bytes = encode_g1(&G1Affine::generator(), FieldEncoding::Raw);
    // Use x = 0, y = 1 (Montgomery form of 1 is not the byte 1, but any small value
    // other than a curve point will do): (0, y) is on the curve only for y^2 = 3.
    bytes.iter_mut().for_each(|byte| *byte = 0);
    if let Some(byte) = bytes.get_mut(32) {
        *byte = 1;
    }
    assert!(matches!(
        decode_g1(&bytes, FieldEncoding::Raw, Validation::Checked, "test"),
        Err(Error::InvalidPoint { .. })
    ));
}
