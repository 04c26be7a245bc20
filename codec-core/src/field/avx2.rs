//! G1 points checked on the curve four at a time with AVX2 (32-bit multiplies on four 64-bit
//! lanes), where the CPU has AVX2 and not AVX-512 IFMA ([`super::ifma`], eight at a time).
//!
//! Each lane holds one point. Its raw coordinates are in Montgomery form, `X = x·2^256 mod q`
//! (four 64-bit limbs), and are split here into nine 29-bit limbs. The product
//! `mont(a, b) = a·b·2^-261 mod q` (word-by-word Montgomery reduction, a limb a step) is below
//! `2q` for inputs below `2^257`, so no step needs a final subtraction. The curve's equation
//! `y^2 = x^3 + 3` is `Y^2·2^256 = X^3 + 3·2^768`, which times `2^-773` reads
//!
//! `mont(Y, Y) ≡ mont(mont(4X, 8X), X) + 3·2^251 (mod q)`:
//!
//! three products a point, as the scalar check takes, for four points at once. The two sides
//! are compared by their difference, which lies strictly between 0 and `5q`.
//!
//! Each product of two 29-bit limbs is below `2^58`, and a limb of the accumulator takes at
//! most eighteen of them (two a step over nine steps) before it is carried out: below `2^63`,
//! so the products are added without carrying between steps.
//!
//! This is a fast path only: the caller has checked both coordinates below `q` (the bounds
//! above need it), and a group of four that fails here is decided again by the scalar check,
//! which also accepts the identity `(0, 0)`. The test
//! `the_wide_point_checks_answer_as_the_scalar_one` compares the two.

use std::arch::x86_64::{
    __m256i, _mm256_add_epi64, _mm256_and_si256, _mm256_castsi256_pd, _mm256_cmpeq_epi64,
    _mm256_loadu_si256, _mm256_movemask_pd, _mm256_mul_epu32, _mm256_or_si256, _mm256_set1_epi64x,
    _mm256_setzero_si256, _mm256_sll_epi64, _mm256_slli_epi64, _mm256_srl_epi64, _mm256_srli_epi64,
    _mm256_sub_epi64, _mm_cvtsi64_si128,
};

use halo2_proofs::halo2curves::ff::Field;
use halo2curves::bn256::Fq;

/// Points a call checks.
pub(super) const LANES: usize = 4;
/// Bytes of the points a call checks.
pub(super) const GROUP_BYTES: usize = LANES * super::G1_RAW_BYTES;
/// Bits of a limb.
const BITS: usize = 29;
/// Limbs of 29 bits that hold a value below `2^261`.
const LIMBS: usize = 9;
/// The low 29 bits.
const MASK: u64 = (1 << BITS) - 1;

/// A value in nine 29-bit limbs, each held by one lane of four.
type Wide = [__m256i; LIMBS];
/// A constant in nine 29-bit limbs.
type Limbs = [u64; LIMBS];

/// Proof that the CPU has AVX2, and the constants of the check: only [`Avx2::detect`] makes
/// one, so every method may use the instructions.
#[derive(Clone, Copy)]
pub(super) struct Avx2 {
    constants: &'static Constants,
}

/// The check's constants, each in 29-bit limbs.
struct Constants {
    /// The base field's modulus.
    q: Limbs,
    /// `-q^-1 mod 2^29`.
    q_inv: u64,
    /// `3·2^251 mod q`.
    b_term: Limbs,
    /// `2q` with every limb but the last lent `2^29` by the one above it (which is one
    /// less): added to the difference, it keeps every limb but the last from going below 0.
    twice_q_lent: Limbs,
    /// `q`, `2q`, `3q`, `4q`: the values the difference may take when the sides are equal.
    multiples: [Limbs; 4],
}

impl Avx2 {
    /// The fast path, when this CPU has the instructions it needs.
    pub(super) fn detect() -> Option<Avx2> {
        static CONSTANTS: std::sync::OnceLock<Constants> = std::sync::OnceLock::new();
        std::arch::is_x86_feature_detected!("avx2").then(|| Avx2 {
            constants: CONSTANTS.get_or_init(Constants::new),
        })
    }

    /// Whether all four points (raw `x || y`, coordinates below `q`) satisfy the curve's
    /// equation. `false` says at least one does not, or one is the identity.
    pub(super) fn all_on_curve(self, points: &[u8; GROUP_BYTES]) -> bool {
        // SAFETY: an `Avx2` exists only where `detect` found AVX2 on this CPU, the feature
        // `all_on_curve_wide` is compiled for.
        unsafe { all_on_curve_wide(self.constants, points) }
    }
}

impl Constants {
    fn new() -> Constants {
        let q = super::base_modulus_limbs();
        let inverse = super::base_modulus_inverse();
        let b_term = Fq::from(3) * Fq::from(2).pow_vartime([251]);
        let multiple = |times: u64| split(&super::modulus_times(times));
        let mut twice_q_lent = multiple(2);
        for i in 0..LIMBS - 1 {
            if let Some(limb) = twice_q_lent.get_mut(i) {
                *limb += 1 << BITS;
            }
            if let Some(next) = twice_q_lent.get_mut(i + 1) {
                *next -= 1;
            }
        }
        Constants {
            q: split(&q),
            q_inv: inverse.wrapping_neg() & MASK,
            b_term: split(&super::canonical_limbs(&b_term)),
            twice_q_lent,
            multiples: [multiple(1), multiple(2), multiple(3), multiple(4)],
        }
    }
}

/// Where limb `i` of 29 bits starts in four 64-bit limbs: the limb's index and the bit in it.
const fn start(i: usize) -> (usize, u64) {
    ((BITS * i) / 64, ((BITS * i) % 64) as u64)
}

/// Four 64-bit limbs as nine 29-bit ones.
fn split(value: &[u64; 4]) -> Limbs {
    let mut out = [0u64; LIMBS];
    for (i, out) in out.iter_mut().enumerate() {
        let (word, bit) = start(i);
        let low = value.get(word).map_or(0, |limb| limb >> bit);
        let high = match value.get(word + 1) {
            Some(limb) if bit + BITS as u64 > 64 => limb << (64 - bit),
            _ => 0,
        };
        *out = (low | high) & MASK;
    }
    out
}

/// [`Avx2::all_on_curve`]'s work.
///
/// # Safety
///
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
unsafe fn all_on_curve_wide(constants: &Constants, points: &[u8; GROUP_BYTES]) -> bool {
    let columns = super::limb_columns::<LANES>(points);
    // SAFETY: each `columns` row is four initialized `i64`s, the 32 bytes an unaligned 256-bit
    // load reads.
    let lanes = columns.map(|column| unsafe { _mm256_loadu_si256(column.as_ptr().cast()) });
    let [x0, x1, x2, x3, y0, y1, y2, y3] = lanes;
    let x = split_wide([x0, x1, x2, x3]);
    let y = split_wide([y0, y1, y2, y3]);
    let lhs = mont(constants, y, y);
    let x_squared = mont(constants, shifted_left::<2>(x), shifted_left::<3>(x));
    let rhs = mont(constants, x_squared, x);
    // difference = rhs + 3·2^251 + 2q - lhs, in (0, 5q). Every limb but the last is at least
    // 0 (the lent 2q's limbs are at least 2^29 - 1, lhs's at most that), so carries shift out
    // as unsigned; the last limb, wrapped, ends as the difference's top, at least 0.
    let mut difference = [_mm256_setzero_si256(); LIMBS];
    for (i, limb) in difference.iter_mut().enumerate() {
        let sum = _mm256_add_epi64(
            _mm256_add_epi64(rhs[i], broadcast(constants.b_term[i])),
            broadcast(constants.twice_q_lent[i]),
        );
        *limb = _mm256_sub_epi64(sum, lhs[i]);
    }
    for i in 0..LIMBS - 1 {
        let carry = _mm256_srli_epi64::<29>(difference[i]);
        difference[i] = _mm256_and_si256(difference[i], broadcast(MASK));
        difference[i + 1] = _mm256_add_epi64(difference[i + 1], carry);
    }
    let mut equal = _mm256_setzero_si256();
    for multiple in &constants.multiples {
        let mut lanes_equal = _mm256_cmpeq_epi64(difference[0], broadcast(multiple[0]));
        for i in 1..LIMBS {
            let limb_equal = _mm256_cmpeq_epi64(difference[i], broadcast(multiple[i]));
            lanes_equal = _mm256_and_si256(lanes_equal, limb_equal);
        }
        equal = _mm256_or_si256(equal, lanes_equal);
    }
    _mm256_movemask_pd(_mm256_castsi256_pd(equal)) == 0b1111
}

/// A constant in every lane.
#[target_feature(enable = "avx2")]
fn broadcast(value: u64) -> __m256i {
    _mm256_set1_epi64x(value as i64)
}

/// [`split`], lane by lane.
#[target_feature(enable = "avx2")]
#[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
fn split_wide(words: [__m256i; 4]) -> Wide {
    let mask = broadcast(MASK);
    let mut out = [_mm256_setzero_si256(); LIMBS];
    for (i, out) in out.iter_mut().enumerate() {
        let (word, bit) = start(i);
        let mut limb = _mm256_srl_epi64(words[word], _mm_cvtsi64_si128(bit as i64));
        if bit + BITS as u64 > 64 && word + 1 < words.len() {
            let high = _mm256_sll_epi64(words[word + 1], _mm_cvtsi64_si128(64 - bit as i64));
            limb = _mm256_or_si256(limb, high);
        }
        *out = _mm256_and_si256(limb, mask);
    }
    out
}

/// `a·2^SHIFT` in normalized limbs, for `a` below `q` and a product below `2^261`.
#[target_feature(enable = "avx2")]
fn shifted_left<const SHIFT: i32>(a: Wide) -> Wide {
    let mask = broadcast(MASK);
    let mut out = a;
    let mut carry = _mm256_setzero_si256();
    for limb in out.iter_mut() {
        let shifted = _mm256_or_si256(_mm256_slli_epi64::<SHIFT>(*limb), carry);
        carry = _mm256_srli_epi64::<29>(shifted);
        *limb = _mm256_and_si256(shifted, mask);
    }
    // No carry leaves the last limb: the product is below 2^261, what nine limbs hold.
    out
}

/// `a·b·2^-261 mod q`, below `2q`, in normalized limbs, for normalized `a` and `b` below
/// `2^257`. Step `i` adds `a_i·b` and `m·q` at limb `i` of a double-width accumulator: a limb
/// takes two products below `2^58` in each of at most nine steps, and one carry, before it is
/// carried out (or is the result): below `2^63`, no overflow.
#[target_feature(enable = "avx2")]
#[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
fn mont(constants: &Constants, a: Wide, b: Wide) -> Wide {
    let zero = _mm256_setzero_si256();
    let mask = broadcast(MASK);
    let q_inv = broadcast(constants.q_inv);
    let mut q = [zero; LIMBS];
    for (q, limb) in q.iter_mut().zip(&constants.q) {
        *q = broadcast(*limb);
    }
    let mut t = [zero; 2 * LIMBS];
    // One step per limb of `a`, written out so that every index is a constant and the
    // accumulator stays in registers (a loop over the steps was not unrolled, and moved it
    // through the stack).
    macro_rules! step {
        ($i:literal) => {
            let a_i = a[$i];
            for j in 0..LIMBS {
                t[$i + j] = _mm256_add_epi64(t[$i + j], _mm256_mul_epu32(a_i, b[j]));
            }
            // m makes limb i a multiple of 2^29: t + m·q·2^(29 i) ≡ 0 (mod 2^(29 (i + 1))).
            let m = _mm256_and_si256(_mm256_mul_epu32(t[$i], q_inv), mask);
            for j in 0..LIMBS {
                t[$i + j] = _mm256_add_epi64(t[$i + j], _mm256_mul_epu32(m, q[j]));
            }
            t[$i + 1] = _mm256_add_epi64(t[$i + 1], _mm256_srli_epi64::<29>(t[$i]));
        };
    }
    step!(0);
    step!(1);
    step!(2);
    step!(3);
    step!(4);
    step!(5);
    step!(6);
    step!(7);
    step!(8);
    let mut out = [zero; LIMBS];
    let mut carry = zero;
    for i in 0..LIMBS {
        let value = _mm256_add_epi64(t[LIMBS + i], carry);
        carry = _mm256_srli_epi64::<29>(value);
        out[i] = _mm256_and_si256(value, mask);
    }
    out
}
