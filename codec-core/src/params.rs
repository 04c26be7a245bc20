//! KZG parameters (the structured reference string) as a third kind of artifact beside
//! proving and verifying keys: their data, checked assembly, and the bulk reading of their
//! points.
//!
//! halo2-axiom's `ParamsKZG<Bn256>` holds `k`, `2^k` G1 points `g` (powers of the secret), the
//! same number `g_lagrange` (the Lagrange basis), and two G2 points. In halo2's own layout
//! (`ParamsKZG::write_custom`) they follow each other with nothing else: `k` (u32 LE), `g`,
//! `g_lagrange`, `g2`, `s_g2`, points raw (`RawBytes`: 64-byte G1, 128-byte G2) or compressed
//! (`Processed`: 32 and 64 bytes).

use std::io::Write;

use halo2_proofs::halo2curves::group::{Group, GroupEncoding};
use halo2_proofs::poly::commitment::Params as _;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{G1Affine, G2Affine, G2};
use halo2curves::serde::SerdeObject;

use crate::circuit::rows;
use crate::error::{Error, IoContext, Result};
use crate::field::FieldEncoding;
use crate::item::KzgParams;
use crate::payload::{read_vector, read_vectors, Digest, PayloadReader};

/// Bytes of one raw G2 point.
pub(crate) const G2_RAW_BYTES: usize = 128;
/// Bytes of one compressed G2 point.
pub(crate) const G2_COMPRESSED_BYTES: usize = 64;

/// The parameters' data, as a backend decodes it (lengths checked on assembly).
#[derive(Debug)]
pub struct ParamsParts {
    /// The parameters serve circuits of up to `2^k` rows.
    pub k: u32,
    /// `[s^i] G1` for `i` below `2^k`.
    pub g: Vec<G1Affine>,
    /// The Lagrange basis of `g`.
    pub g_lagrange: Vec<G1Affine>,
    /// The G2 generator.
    pub g2: G2Affine,
    /// `[s] G2`.
    pub s_g2: G2Affine,
}

/// Builds parameters from decoded parts, checking both vectors hold `2^k` points.
///
/// # Errors
///
/// [`Error::Structure`] when a vector has another length.
pub fn assemble_params(parts: ParamsParts) -> Result<KzgParams> {
    let n = rows(parts.k);
    crate::circuit::expect_count("g points (2^k)", n, parts.g.len())?;
    crate::circuit::expect_count("g_lagrange points (2^k)", n, parts.g_lagrange.len())?;
    Ok(template()?.from_parts(
        parts.k,
        parts.g,
        Some(parts.g_lagrange),
        parts.g2,
        parts.s_g2,
    ))
}

/// A parameters value to call halo2-axiom's `from_parts` on (it takes `&self`, and reads
/// nothing from it): `k = 0`, one point of each kind, read from zero bytes.
fn template() -> Result<KzgParams> {
    let zeros = [0u8; 4 + 2 * 64 + 2 * G2_RAW_BYTES];
    KzgParams::read_custom(&mut zeros.as_slice(), SerdeFormat::RawBytesUnchecked)
        .map_err(|err| Error::Internal(format!("could not build a parameters template: {err}")))
}

/// Downsizes parameters to `2^k` points, as halo2's `Params::downsize` does: `g` is
/// truncated and `g_lagrange` recomputed (an FFT over G1 of `2^k` points: `2^(k-1) * k`
/// scalar multiplications, halo2's constant-time ones, so slow at large `k`).
///
/// # Errors
///
/// [`Error::KMismatch`] when `k` is larger than the parameters' (halo2 would panic).
pub fn downsize(mut params: KzgParams, k: u32) -> Result<KzgParams> {
    if k > params.k() || k == 0 {
        return Err(Error::KMismatch {
            expected: k,
            found: params.k(),
        });
    }
    if k < params.k() {
        params.downsize(k);
    }
    Ok(params)
}

/// The `SerdeFormat` of a field encoding (for halo2's own writer).
pub(crate) fn serde_format(encoding: FieldEncoding) -> SerdeFormat {
    match encoding {
        FieldEncoding::Raw => SerdeFormat::RawBytes,
        FieldEncoding::Canonical => SerdeFormat::Processed,
    }
}

/// Writes parameters in halo2's own layout (`ParamsKZG::write_custom`), through a buffer.
///
/// # Errors
///
/// The writer's I/O errors.
pub fn write_params(
    params: &KzgParams,
    encoding: FieldEncoding,
    out: &mut dyn Write,
) -> Result<()> {
    let mut buffered = std::io::BufWriter::with_capacity(1 << 20, out);
    params
        .write_custom(&mut buffered, serde_format(encoding))
        .during("write")?;
    buffered.flush().during("write")
}

/// Reads `count` G1 points, after checking the payload holds them, as every vector of the
/// payload is read ([`read_fr_vec`](crate::backend_api::field::read_fr_vec)): raw points straight into
/// the vector's memory, each piece checked on the curve while in cache (unless trusted),
/// compressed points in steps decompressed in parallel (decompression always checks them);
/// hashed for the digest, as a key's polynomials are.
///
/// # Errors
///
/// [`Error::LimitExceeded`], [`Error::Truncated`], [`Error::InvalidPoint`],
/// [`Error::OutOfMemory`].
pub fn read_g1_points(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: crate::options::Validation,
    context: &'static str,
) -> Result<Vec<G1Affine>> {
    read_vector(
        reader,
        count,
        encoding,
        validation,
        context,
        Digest::Polynomial,
    )
}

/// Reads one G2 point; checked (unless trusted, for raw points): on the curve and in the
/// prime-order subgroup (BN254's G2 has a cofactor).
///
/// # Errors
///
/// [`Error::Truncated`], [`Error::InvalidPoint`].
pub fn read_g2(
    reader: &mut PayloadReader<'_>,
    encoding: FieldEncoding,
    validation: crate::options::Validation,
    context: &'static str,
) -> Result<G2Affine> {
    decode_g2(
        &read_g2_bytes(reader, encoding, context)?,
        validation,
        context,
    )
}

/// One G2 point's bytes as read, before it is decoded and checked.
enum G2Bytes {
    Raw([u8; G2_RAW_BYTES]),
    Compressed([u8; G2_COMPRESSED_BYTES]),
}

/// Reads one G2 point's bytes in `encoding`.
fn read_g2_bytes(
    reader: &mut PayloadReader<'_>,
    encoding: FieldEncoding,
    context: &'static str,
) -> Result<G2Bytes> {
    Ok(match encoding {
        FieldEncoding::Raw => G2Bytes::Raw(reader.read_array::<G2_RAW_BYTES>(context)?),
        FieldEncoding::Canonical => {
            G2Bytes::Compressed(reader.read_array::<G2_COMPRESSED_BYTES>(context)?)
        }
    })
}

/// Decodes one G2 point, checked as [`read_g2`] says.
fn decode_g2(
    bytes: &G2Bytes,
    validation: crate::options::Validation,
    context: &'static str,
) -> Result<G2Affine> {
    let checked = validation == crate::options::Validation::Checked;
    let point = match bytes {
        G2Bytes::Raw(bytes) if checked => {
            G2Affine::from_raw_bytes(bytes).ok_or(Error::InvalidPoint { context })?
        }
        G2Bytes::Raw(bytes) => G2Affine::from_raw_bytes_unchecked(bytes),
        G2Bytes::Compressed(bytes) => {
            let mut repr = <G2Affine as GroupEncoding>::Repr::default();
            repr.as_mut().copy_from_slice(bytes);
            Option::from(G2Affine::from_bytes(&repr)).ok_or(Error::InvalidPoint { context })?
        }
    };
    let check = checked || matches!(bytes, G2Bytes::Compressed(_));
    if check && !in_g2_subgroup(&point) {
        return Err(Error::InvalidPoint { context });
    }
    Ok(point)
}

/// Whether `point`, on the curve, is in G2's prime-order subgroup. The generator is; any
/// other point is tested as El Housni, Guillevic and Piellard prove for BN curves ("Co-factor
/// clearing and subgroup membership testing on pairing-friendly curves", 2022, sections 3
/// and 5.1): `P` is in the subgroup if and only if
/// `[u + 1] P + psi([u] P) + psi^2([u] P) = psi^3([2u] P)`, `u` the curve's parameter and
/// `psi` the untwist-Frobenius-twist endomorphism ([`Psi`]). That is one multiplication by
/// the 63-bit `u` (by [`mul_by_digits`]), where `[r - 1] P = -P` takes one by the 254-bit
/// `r - 1`, and halo2curves' `is_torsion_free` a constant-time one at every bit (about 0.4
/// ms a point here). The test `the_subgroup_check_answers_as_halo2curves` compares them.
fn in_g2_subgroup(point: &G2Affine) -> bool {
    if *point == G2Affine::generator() {
        return true;
    }
    static U_AND_PSI: std::sync::OnceLock<(Vec<i8>, Psi)> = std::sync::OnceLock::new();
    let (digits, psi) = U_AND_PSI.get_or_init(|| {
        (
            non_adjacent_form(&halo2curves::bn256::BN_X.to_le_bytes()),
            Psi::new(),
        )
    });
    let times_u = mul_by_digits(point, digits);
    let left = times_u + point + psi.apply(&times_u) + psi.apply(&psi.apply(&times_u));
    let right = psi.apply(&psi.apply(&psi.apply(&times_u.double())));
    left == right
}

/// `psi(x, y) = (conj(x) c_x, conj(y) c_y)` on G2 (the twist `y^2 = x^3 + 3 / xi` over
/// `Fq2`, `xi = 9 + i`): the Frobenius map seen through the twist, with `c_x = xi^((p-1)/3)`
/// and `c_y = xi^((p-1)/2)`. Conjugation is a field automorphism, so it maps projective
/// coordinates as it maps affine ones.
struct Psi {
    c_x: halo2curves::bn256::Fq2,
    c_y: halo2curves::bn256::Fq2,
}

impl Psi {
    /// `c_x` and `c_y`, recorded rather than computed by every new process's first check (two
    /// exponentiations in `Fq2`); the test `psi_constants_are_powers_of_xi` computes them
    /// again.
    fn new() -> Psi {
        use halo2curves::bn256::{Fq, Fq2};
        Psi {
            c_x: Fq2::new(
                Fq::from_raw([
                    0x99e3_9557_176f_553d,
                    0xb78c_c310_c2c3_330c,
                    0x4c0b_ec3c_f559_b143,
                    0x2fb3_4798_4f79_11f7,
                ]),
                Fq::from_raw([
                    0x1665_d51c_640f_cba2,
                    0x32ae_2a1d_0b7c_9dce,
                    0x4ba4_cc8b_d75a_0794,
                    0x16c9_e550_61eb_ae20,
                ]),
            ),
            c_y: Fq2::new(
                Fq::from_raw([
                    0xdc54_0146_71a0_135a,
                    0xdbaa_e0ed_a9c9_5998,
                    0xdc5e_c698_b6e2_f9b9,
                    0x063c_f305_489a_f5dc,
                ]),
                Fq::from_raw([
                    0x82d3_7f63_2623_b0e3,
                    0x2180_7dc9_8fa2_5bd2,
                    0x0704_b5a7_ec79_6f2b,
                    0x07c0_3cbc_ac41_049a,
                ]),
            ),
        }
    }

    fn apply(&self, point: &G2) -> G2 {
        let (mut x, mut y, mut z) = (point.x, point.y, point.z);
        x.conjugate();
        y.conjugate();
        z.conjugate();
        G2 {
            x: x * self.c_x,
            y: y * self.c_y,
            z,
        }
    }
}

/// `point` times the number whose non-adjacent form is `digits` (least significant first).
fn mul_by_digits(point: &G2Affine, digits: &[i8]) -> G2 {
    let negated = -*point;
    let mut acc = G2::identity();
    for &digit in digits.iter().rev() {
        acc = acc.double();
        match digit {
            1 => acc += point,
            -1 => acc += negated,
            _ => {}
        }
    }
    acc
}

/// The non-adjacent form of the number whose little-endian bytes are `le`: digits in
/// `{-1, 0, 1}`, least significant first, no two adjacent ones non-zero, summing (each times
/// its power of two) to the number.
fn non_adjacent_form(le: &[u8]) -> Vec<i8> {
    // Little-endian 64-bit limbs, one spare for the carry of a digit of -1.
    let mut limbs = vec![0u64; le.len().div_ceil(8) + 1];
    for (index, byte) in le.iter().enumerate() {
        if let Some(limb) = limbs.get_mut(index / 8) {
            *limb |= u64::from(*byte) << (8 * (index % 8));
        }
    }
    let mut digits = Vec::with_capacity(64 * limbs.len());
    while limbs.iter().any(|&limb| limb != 0) {
        let low = limbs.first().copied().unwrap_or(0);
        let digit: i8 = match low & 3 {
            1 => 1,
            3 => -1,
            _ => 0,
        };
        // Subtract the digit: -1 adds one, which carries through the limbs.
        match digit {
            1 => {
                if let Some(first) = limbs.first_mut() {
                    *first &= !1;
                }
            }
            -1 => {
                for limb in &mut limbs {
                    let (sum, carry) = limb.overflowing_add(1);
                    *limb = sum;
                    if !carry {
                        break;
                    }
                }
            }
            _ => {}
        }
        digits.push(digit);
        // Halve.
        let mut high = 0;
        for limb in limbs.iter_mut().rev() {
            let next_high = *limb << 63;
            *limb = (*limb >> 1) | high;
            high = next_high;
        }
    }
    digits
}

/// Reads parameters in halo2's layout (`k`, `g`, `g_lagrange`, `g2`, `s_g2`): `k` is checked
/// with `check_k` before anything `2^k`-sized, and the payload must hold every point.
///
/// # Errors
///
/// `check_k`'s, and those of [`read_g1_points`] and [`read_g2`].
pub fn read_params(
    reader: &mut PayloadReader<'_>,
    encoding: FieldEncoding,
    validation: crate::options::Validation,
    check_k: impl FnOnce(u32) -> Result<()>,
) -> Result<KzgParams> {
    let k = reader.read_u32_le("parameters k")?;
    check_k(k)?;
    let n = rows(k);
    let g2_bytes = match encoding {
        FieldEncoding::Raw => G2_RAW_BYTES,
        FieldEncoding::Canonical => G2_COMPRESSED_BYTES,
    };
    reader.ensure_available(
        2 * n as u128 * encoding.point_bytes() as u128 + 2 * g2_bytes as u128,
        "parameters",
    )?;
    // Both vectors with one read: from the disk, `g_lagrange`'s first requests are in flight
    // while `g`'s last land.
    let [g, g_lagrange] = read_vectors(
        reader,
        n,
        encoding,
        validation,
        ["parameters g", "parameters g_lagrange"],
        Digest::Polynomial,
    )?;
    let g2 = read_g2_bytes(reader, encoding, "parameters g2")?;
    let s_g2 = read_g2_bytes(reader, encoding, "parameters s_g2")?;
    // Each G2 point's subgroup check is a constant-time multiplication by the group's order
    // (about a millisecond or two here, as long as checking 10,000 G1 points): both at once.
    let (g2, s_g2) = rayon::join(
        || decode_g2(&g2, validation, "parameters g2"),
        || decode_g2(&s_g2, validation, "parameters s_g2"),
    );
    let (g2, s_g2) = (g2?, s_g2?);
    assemble_params(ParamsParts {
        k,
        g,
        g_lagrange,
        g2,
        s_g2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Validation;
    use halo2_proofs::halo2curves::ff::{Field, PrimeField};
    use halo2_proofs::halo2curves::group::Curve;
    use halo2curves::bn256::Fr;

    fn small() -> KzgParams {
        use rand::SeedableRng;
        KzgParams::setup(5, rand::rngs::StdRng::seed_from_u64(7))
    }

    fn halo2_bytes(params: &KzgParams, format: SerdeFormat) -> Vec<u8> {
        let mut bytes = Vec::new();
        params.write_custom(&mut bytes, format).unwrap();
        bytes
    }

    #[test]
    fn halo2s_layout_round_trips_in_both_encodings() {
        let params = small();
        for encoding in [FieldEncoding::Raw, FieldEncoding::Canonical] {
            let mut written = Vec::new();
            write_params(&params, encoding, &mut written).unwrap();
            assert_eq!(written, halo2_bytes(&params, serde_format(encoding)));
            for validation in [Validation::Checked, Validation::Trusted] {
                let mut reader = PayloadReader::from_slice(&written);
                let back = read_params(&mut reader, encoding, validation, |_| Ok(())).unwrap();
                assert_eq!(reader.remaining(), 0);
                assert_eq!(
                    halo2_bytes(&back, SerdeFormat::RawBytes),
                    halo2_bytes(&params, SerdeFormat::RawBytes)
                );
            }
        }
    }

    /// `g` and `g_lagrange` are read with one read of a file (past the page cache where the
    /// file system allows it): the same points as from memory, and a point off the curve is
    /// named by the vector that holds it.
    #[test]
    fn both_vectors_read_at_once_are_each_checked_as_themselves() {
        let params = small();
        let bytes = halo2_bytes(&params, SerdeFormat::RawBytes);
        let read = |bytes: &[u8], validation| {
            let mut file = tempfile::tempfile().unwrap();
            std::io::Write::write_all(&mut file, bytes).unwrap();
            let source = crate::source::FileSource::with(&file, true, true);
            let mut reader = PayloadReader::from_file(&source, bytes.len() as u64, 1 << 10);
            let read = read_params(&mut reader, FieldEncoding::Raw, validation, |_| Ok(()));
            read.map(|params| (params, reader.remaining()))
        };
        let (back, remaining) = read(&bytes, Validation::Checked).unwrap();
        assert_eq!(remaining, 0);
        assert_eq!(
            halo2_bytes(&back, SerdeFormat::RawBytes),
            halo2_bytes(&params, SerdeFormat::RawBytes)
        );
        let n = 1 << 5;
        for (point, context) in [(3, "parameters g"), (n + 5, "parameters g_lagrange")] {
            let mut damaged = bytes.clone();
            damaged[4 + point * 64 + 40] ^= 1;
            let refused = read(&damaged, Validation::Checked).map(|_| ());
            assert!(
                matches!(refused, Err(Error::InvalidPoint { context: c }) if c == context),
                "{refused:?}"
            );
            assert!(read(&damaged, Validation::Trusted).is_ok());
        }
    }

    #[test]
    fn points_off_the_curve_and_outside_g2s_subgroup_are_refused() {
        use halo2_proofs::arithmetic::CurveAffine;
        use halo2_proofs::halo2curves::group::cofactor::CofactorGroup;
        use halo2_proofs::halo2curves::group::prime::PrimeCurveAffine;
        let params = small();
        let mut bytes = halo2_bytes(&params, SerdeFormat::RawBytes);
        // The y coordinate of g[3] changed: off the curve.
        bytes[4 + 3 * 64 + 40] ^= 1;
        let mut reader = PayloadReader::from_slice(&bytes);
        let refused = read_params(&mut reader, FieldEncoding::Raw, Validation::Checked, |_| {
            Ok(())
        });
        assert!(
            matches!(refused, Err(Error::InvalidPoint { .. })),
            "{refused:?}"
        );
        let mut reader = PayloadReader::from_slice(&bytes);
        assert!(read_params(
            &mut reader,
            FieldEncoding::Raw,
            Validation::Trusted,
            |_| Ok(())
        )
        .is_ok());
        // A G2 point on the twist but outside the prime-order subgroup.
        let outside = (0u64..)
            .find_map(|x| {
                use halo2curves::bn256::Fq2;
                let x = Fq2::new(
                    halo2curves::bn256::Fq::from(x),
                    halo2curves::bn256::Fq::one(),
                );
                let y2 = x.square() * x + G2Affine::b();
                Option::<Fq2>::from(y2.sqrt())
                    .map(|y| G2Affine { x, y })
                    .filter(|p| !bool::from(p.to_curve().is_torsion_free()))
            })
            .unwrap();
        let mut bytes = halo2_bytes(&params, SerdeFormat::RawBytes);
        let end = bytes.len();
        bytes[end - G2_RAW_BYTES..].copy_from_slice(&outside.to_raw_bytes());
        let mut reader = PayloadReader::from_slice(&bytes);
        let refused = read_params(&mut reader, FieldEncoding::Raw, Validation::Checked, |_| {
            Ok(())
        });
        assert!(
            matches!(
                refused,
                Err(Error::InvalidPoint {
                    context: "parameters s_g2"
                })
            ),
            "{refused:?}"
        );
    }

    #[test]
    fn the_subgroup_check_answers_as_halo2curves() {
        use halo2_proofs::arithmetic::CurveAffine;
        use halo2_proofs::halo2curves::group::cofactor::CofactorGroup;
        use halo2_proofs::halo2curves::group::prime::PrimeCurveAffine;
        use halo2_proofs::halo2curves::group::Curve;
        use halo2curves::bn256::{Fq, Fq2};
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let halo2 = |point: &G2Affine| bool::from(point.to_curve().is_torsion_free());
        let mut inside = vec![G2Affine::identity(), G2Affine::generator()];
        inside.extend((0..16).map(|_| (G2::generator() * Fr::random(&mut rng)).to_affine()));
        // Points of the twist at random x: outside the subgroup but for a chance of 1/p.
        let mut outside = Vec::new();
        while outside.len() < 16 {
            let x = Fq2::new(Fq::random(&mut rng), Fq::random(&mut rng));
            if let Some(y) = Option::<Fq2>::from((x.square() * x + G2Affine::b()).sqrt()) {
                let y = if rng.gen() { y } else { -y };
                outside.push(G2Affine { x, y });
            }
        }
        for point in &inside {
            assert!(halo2(point) && in_g2_subgroup(point));
        }
        for point in &outside {
            assert!(bool::from(point.is_on_curve()));
            assert!(!halo2(point) && !in_g2_subgroup(point));
            // A subgroup point moved by a point outside: outside too.
            let moved = (point.to_curve() + inside[2]).to_affine();
            assert_eq!(in_g2_subgroup(&moved), halo2(&moved));
            // The point's part outside the subgroup alone (`[r] point`, in the cofactor's
            // torsion), and added to a subgroup point: refused.
            let r_minus_one = non_adjacent_form((-Fr::ONE).to_repr().as_ref());
            let torsion = (mul_by_digits(point, &r_minus_one) + point).to_affine();
            assert!(!bool::from(torsion.is_identity()));
            let moved = (torsion.to_curve() + inside[3]).to_affine();
            for point in [torsion, moved] {
                assert!(bool::from(point.is_on_curve()));
                assert!(!halo2(&point) && !in_g2_subgroup(&point));
            }
        }
    }

    /// `[scalar] point` in variable time, as the subgroup check multiplies: a double-and-add
    /// over the digits of the scalar's non-adjacent form.
    fn g2_mul_public(point: &G2Affine, scalar: &Fr) -> G2Affine {
        mul_by_digits(point, &non_adjacent_form(scalar.to_repr().as_ref())).to_affine()
    }

    /// `Psi`'s recorded constants are `xi^((p-1)/3)` and `xi^((p-1)/2)`, `xi = 9 + i`.
    #[test]
    fn psi_constants_are_powers_of_xi() {
        use halo2curves::bn256::{Fq, Fq2};
        // p - 1 as little-endian limbs, divided by a small number (p = 1 mod 6).
        let p_minus_one = crate::field::canonical_limbs(&-Fq::ONE);
        let divided = |by: u128| {
            let mut limbs = p_minus_one;
            let mut remainder = 0u128;
            for limb in limbs.iter_mut().rev() {
                let value = (remainder << 64) | u128::from(*limb);
                *limb = (value / by) as u64;
                remainder = value % by;
            }
            assert_eq!(remainder, 0);
            limbs
        };
        let xi = Fq2::new(Fq::from(9), Fq::ONE);
        let psi = Psi::new();
        assert_eq!(psi.c_x, xi.pow_vartime(divided(3)));
        assert_eq!(psi.c_y, xi.pow_vartime(divided(2)));
    }

    #[test]
    fn a_public_multiplication_is_halo2curves_multiplication() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        let point = (G2::generator() * Fr::random(&mut rng)).to_affine();
        for scalar in [
            Fr::ZERO,
            Fr::ONE,
            -Fr::ONE,
            Fr::random(&mut rng),
            Fr::random(&mut rng),
        ] {
            assert_eq!(g2_mul_public(&point, &scalar), (point * scalar).to_affine());
        }
    }

    #[test]
    fn the_non_adjacent_form_sums_to_its_number() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let check = |digits: &[i8]| {
            assert!(digits.iter().all(|d| (-1..=1).contains(d)));
            assert!(digits.windows(2).all(|pair| pair[0] == 0 || pair[1] == 0));
        };
        for value in [0u64, 1, 2, 3, 7, u64::MAX]
            .into_iter()
            .chain((0..200).map(|_| rng.gen()))
        {
            let digits = non_adjacent_form(&value.to_le_bytes());
            check(&digits);
            let sum = digits
                .iter()
                .enumerate()
                .map(|(at, &d)| i128::from(d) << at)
                .sum::<i128>();
            assert_eq!(sum, i128::from(value));
        }
        // r - 1, summed in the field of order r: -1.
        let digits = non_adjacent_form((-Fr::ONE).to_repr().as_ref());
        check(&digits);
        let sum = digits.iter().rev().fold(Fr::ZERO, |acc, &d| {
            acc.double()
                + Fr::from(d.unsigned_abs() as u64) * if d < 0 { -Fr::ONE } else { Fr::ONE }
        });
        assert_eq!(sum, -Fr::ONE);
        assert_eq!(digits.len(), 255);
    }

    #[test]
    fn downsizing_matches_halo2_and_refuses_growing() {
        let params = small();
        let mut expected = small();
        expected.downsize(3);
        let down = downsize(params, 3).unwrap();
        assert_eq!(
            halo2_bytes(&down, SerdeFormat::RawBytes),
            halo2_bytes(&expected, SerdeFormat::RawBytes)
        );
        assert!(matches!(downsize(small(), 6), Err(Error::KMismatch { .. })));
    }
}
