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

#[test]
fn the_fast_point_check_answers_as_halo2curves() {
    // BN254's base modulus, written out independently of the code under test.
    let hex = "30644e72e131a029b85045b68181585d97816a916871ca8d3c208c16d87cfd47";
    let mut q = [0u8; 32];
    for (i, byte) in q.iter_mut().rev().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    let modulus = base_modulus_limbs();
    assert_eq!(
        modulus,
        std::array::from_fn(|i| u64::from_le_bytes(q[8 * i..8 * i + 8].try_into().unwrap()))
    );
    let mut rng = rand::thread_rng();
    let point = |p: G1Affine| -> [u8; 64] { p.to_raw_bytes().try_into().unwrap() };
    let mut cases: Vec<[u8; 64]> = vec![
        [0; 64],
        [0xff; 64],
        point(G1Affine::identity()),
        point(G1Affine::generator()),
    ];
    for _ in 0..300 {
        let on = point((G1::generator() * Fr::random(&mut rng)).to_affine());
        cases.push(on);
        // One coordinate moved: off the curve.
        let mut off = on;
        off[7] ^= 1;
        cases.push(off);
        let mut off_y = on;
        off_y[40] ^= 0x10;
        cases.push(off_y);
        // A coordinate replaced by its value plus the modulus, where that fits in 256 bits:
        // the same point, encoded out of range.
        for half in [0, 32] {
            let mut limbs = [0u64; 4];
            let mut carry = false;
            for i in 0..4 {
                let v = u64::from_le_bytes(on[half + 8 * i..half + 8 * i + 8].try_into().unwrap());
                let (sum, c1) = v.overflowing_add(modulus[i]);
                let (sum, c2) = sum.overflowing_add(u64::from(carry));
                limbs[i] = sum;
                carry = c1 || c2;
            }
            if !carry {
                let mut wrapped = on;
                for (i, limb) in limbs.iter().enumerate() {
                    wrapped[half + 8 * i..half + 8 * i + 8].copy_from_slice(&limb.to_le_bytes());
                }
                cases.push(wrapped);
            }
        }
        let mut random = [0u8; 64];
        rand::RngCore::fill_bytes(&mut rng, &mut random);
        cases.push(random);
    }
    // Coordinates at the modulus, and one below it.
    let mut at = [0u8; 64];
    at[..32].copy_from_slice(&q);
    cases.push(at);
    at[32..].copy_from_slice(&q);
    cases.push(at);
    let mut accepted = 0;
    for case in &cases {
        let theirs = G1Affine::from_raw_bytes(case).is_some();
        assert_eq!(raw_point_on_curve(case), theirs, "{case:?}");
        accepted += usize::from(theirs);
    }
    assert!(
        accepted > 300,
        "the cases must include valid points: {accepted}"
    );
    assert!(accepted < cases.len() - 600, "and invalid ones");
    // Input of another length is refused, not read past or short.
    assert!(!raw_point_on_curve(&cases[3][..63]));
    assert!(!raw_point_on_curve(&[cases[3].as_slice(), &[0]].concat()));
}
