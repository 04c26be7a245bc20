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
    let mut rng = crate::testing::rng();
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
    let mut rng = crate::testing::rng();
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

#[test]
fn montgomery_reductions_are_halo2curves_products() {
    let curve = mont::Mont::get();
    let mut rng = crate::testing::rng();
    // Small and largest values, as values and as raw limbs (`q - 1`: the largest limbs there
    // are), then random ones.
    let mut largest_limbs = *curve.modulus();
    largest_limbs[0] -= 1; // q is odd
    let raw = |limbs: [u64; 4]| Fq::from_raw_bytes_unchecked(&limbs.map(u64::to_le_bytes).concat());
    let mut values = vec![Fq::ZERO, Fq::ONE, -Fq::ONE, -Fq::from(2), Fq::from(3)];
    values.extend([raw([1, 0, 0, 0]), raw(largest_limbs)]);
    values.extend((0..2_000).map(|_| Fq::random(&mut rng)));
    let montgomery = |wide| curve.reduce_once(curve.redc(wide));
    for a in &values {
        let la = mont::limbs(a);
        assert_eq!(mont::square(&la), mont::product(&la, &la), "{a:?}");
        assert_eq!(
            montgomery(mont::square(&la)),
            mont::limbs(&a.square()),
            "{a:?}"
        );
        for b in values.iter().take(40) {
            let lb = mont::limbs(b);
            assert_eq!(
                montgomery(mont::product(&la, &lb)),
                mont::limbs(&(a * b)),
                "{a:?} * {b:?}"
            );
        }
    }
}

/// A random point of G1, raw.
fn random_raw_point(rng: &mut impl rand::RngCore) -> [u8; 64] {
    (G1::generator() * Fr::random(rng))
        .to_affine()
        .to_raw_bytes()
        .try_into()
        .unwrap()
}

/// Raw points for the wide check's tests: on the curve, off it in `x` or in `y`, the
/// identity, and coordinates below the modulus that are off the curve (random limbs, and the
/// largest values); with `out_of_range`, also points on the curve with a coordinate encoded
/// plus the modulus (which the wide check alone would accept: its caller checks the range).
fn raw_point_cases(
    rng: &mut impl rand::RngCore,
    count: usize,
    out_of_range: bool,
) -> Vec<[u8; 64]> {
    let modulus = base_modulus_limbs();
    let below_modulus = |rng: &mut dyn rand::RngCore| -> [u8; 32] {
        let mut limbs = [0u64; 4];
        limbs.iter_mut().for_each(|limb| *limb = rng.next_u64());
        limbs[3] %= modulus[3];
        let mut bytes = [0u8; 32];
        for (i, limb) in limbs.iter().enumerate() {
            bytes[8 * i..8 * i + 8].copy_from_slice(&limb.to_le_bytes());
        }
        bytes
    };
    let mut largest = [0u8; 32];
    let mut minus_one = modulus;
    minus_one[0] -= 1;
    for (i, limb) in minus_one.iter().enumerate() {
        largest[8 * i..8 * i + 8].copy_from_slice(&limb.to_le_bytes());
    }
    (0..count)
        .map(|i| {
            let mut case = random_raw_point(&mut *rng);
            match i % 16 {
                0 => case[3] ^= 4,
                1 => case[33] ^= 1,
                2 => case = G1Affine::identity().to_raw_bytes().try_into().unwrap(),
                3 => {
                    case[..32].copy_from_slice(&below_modulus(rng));
                    case[32..].copy_from_slice(&below_modulus(rng));
                }
                4 => case[32..].copy_from_slice(&largest),
                5 => {
                    case[..32].copy_from_slice(&largest);
                    case[32..].copy_from_slice(&largest);
                }
                6 | 7 if out_of_range => {
                    // A coordinate below 2^254 plus the modulus: below 2^256, no carry out.
                    let half = if i % 16 == 6 { 0 } else { 32 };
                    let mut carry = 0u128;
                    for (limb, bytes) in modulus
                        .iter()
                        .zip(case[half..half + 32].chunks_exact_mut(8))
                    {
                        let sum = u128::from(u64::from_le_bytes(bytes.try_into().unwrap()))
                            + u128::from(*limb)
                            + carry;
                        bytes.copy_from_slice(&(sum as u64).to_le_bytes());
                        carry = sum >> 64;
                    }
                    assert_eq!(carry, 0);
                }
                _ => {}
            }
            case
        })
        .collect()
}

/// Each wide check this CPU has answers as the scalar one: on random groups of valid and bad
/// points, and with each kind of bad point alone in every lane among good ones.
#[test]
fn the_wide_point_checks_answer_as_the_scalar_one() {
    let mut checked = 0;
    if let Some(wide) = ifma::Ifma::detect() {
        answers_as_the_scalar_check::<{ ifma::GROUP_BYTES }>(|group| wide.all_on_curve(group));
        checked += 1;
    } else {
        eprintln!("this CPU has no AVX-512 IFMA: the eight-point check is not tested");
    }
    if let Some(wide) = avx2::Avx2::detect() {
        answers_as_the_scalar_check::<{ avx2::GROUP_BYTES }>(|group| wide.all_on_curve(group));
        checked += 1;
    } else {
        eprintln!("this CPU has no AVX2: the four-point check is not tested");
    }
    eprintln!("{checked} wide checks tested");
}

/// `all_on_curve`, a wide check of `GROUP` bytes of points, answers as the scalar check.
fn answers_as_the_scalar_check<const GROUP: usize>(all_on_curve: impl Fn(&[u8; GROUP]) -> bool) {
    let lanes = GROUP / 64;
    let mut rng = crate::testing::rng();
    let mut cases = raw_point_cases(&mut rng, 4096, false);
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..2 {
        use rand::seq::SliceRandom;
        cases.shuffle(&mut rng);
        for group in cases.chunks_exact(lanes) {
            // A quarter of the groups: valid points only, so that the wide check accepts.
            let group: Vec<[u8; 64]> = if round == 0 && accepted < 256 {
                group.iter().map(|_| random_raw_point(&mut rng)).collect()
            } else {
                group.to_vec()
            };
            let bytes: [u8; GROUP] = group.concat().try_into().unwrap();
            let scalar = group
                .iter()
                .all(|point| raw_point_on_curve(point) && !point.iter().all(|&b| b == 0));
            assert_eq!(all_on_curve(&bytes), scalar, "{group:?}");
            accepted += usize::from(scalar);
            refused += usize::from(!scalar);
        }
    }
    assert!(accepted >= 256 && refused >= 256, "{accepted} {refused}");
    // Each kind of bad point alone among good ones is refused, in every lane.
    let good: Vec<[u8; 64]> = (0..lanes).map(|_| random_raw_point(&mut rng)).collect();
    for bad in raw_point_cases(&mut rng, 16, false).iter().take(6) {
        for lane in 0..lanes {
            let mut group = good.clone();
            group[lane] = *bad;
            let bytes: [u8; GROUP] = group.concat().try_into().unwrap();
            assert!(!all_on_curve(&bytes), "lane {lane}: {bad:?}");
        }
    }
}

#[test]
fn points_in_bulk_are_checked_as_one_by_one() {
    let mut rng = crate::testing::rng();
    let mut cases = raw_point_cases(&mut rng, 64, true);
    // Valid points only, in lengths around the wide check's groups, then one bad point
    // moved through every position.
    let valid: Vec<[u8; 64]> = cases
        .iter()
        .filter(|case| G1Affine::from_raw_bytes(case.as_slice()).is_some())
        .copied()
        .collect();
    for count in [0, 1, 3, 4, 5, 7, 8, 9, 16, 23] {
        let bytes: Vec<u8> = valid
            .iter()
            .cycle()
            .take(count)
            .flatten()
            .copied()
            .collect();
        assert!(raw_points_on_curve(&bytes), "{count} valid points");
        assert!(!raw_points_on_curve(&bytes[..bytes.len().saturating_sub(1)]) || count == 0);
    }
    // Around each bad point, points on the curve but not the identity (which the wide check
    // leaves to the scalar one), so that a group of eight is the wide check's to confirm.
    cases.retain(|case| G1Affine::from_raw_bytes(case.as_slice()).is_none());
    let on_curve: Vec<[u8; 64]> = valid
        .iter()
        .filter(|point| point.iter().any(|&byte| byte != 0))
        .copied()
        .collect();
    for (index, bad) in cases.iter().enumerate() {
        for position in [index % 8, 8 + index % 8, 16 + index % 3] {
            let mut points: Vec<[u8; 64]> = on_curve.iter().cycle().take(19).copied().collect();
            points[position] = *bad;
            assert!(
                !raw_points_on_curve(&points.concat()),
                "{bad:?} at {position}"
            );
        }
    }
}

/// [`WIDE_POINT_CHECK_ENV`]` = 0` turns the wide check off (in a process of its own: the choice
/// is made once per process), and points in bulk are then still checked as one by one.
#[test]
fn the_wide_check_turns_off_by_the_environment() {
    if crate::testing::in_child() {
        assert_eq!(points_checked_at_once(), 1);
        points_in_bulk_are_checked_as_one_by_one();
        return;
    }
    if std::env::var_os(WIDE_POINT_CHECK_ENV).is_none() {
        #[cfg(target_arch = "x86_64")]
        {
            let widest = if ifma::Ifma::detect().is_some() {
                ifma::LANES
            } else if avx2::Avx2::detect().is_some() {
                avx2::LANES
            } else {
                1
            };
            assert_eq!(points_checked_at_once(), widest);
        }
    }
    // On a CPU without AVX2 the child's first assertion holds whatever the variable says.
    crate::testing::passes_alone(
        "field::tests::the_wide_check_turns_off_by_the_environment",
        &[(WIDE_POINT_CHECK_ENV, "0")],
    );
}
