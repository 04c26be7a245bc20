//! G1 points checked on the curve eight at a time with AVX-512 IFMA (52-bit multiply-adds
//! on eight 64-bit lanes), where the CPU has it: the bulk of a checked load of parameters.
//!
//! Each lane holds one point. Its raw coordinates are in Montgomery form, `X = x·2^256 mod q`
//! (four 64-bit limbs), and are split here into five 52-bit limbs. The product
//! `mont(a, b) = a·b·2^-260 mod q` (word-by-word Montgomery reduction) is below `2q` for
//! inputs below `4q`, so no step needs a final subtraction. The curve's equation
//! `y^2 = x^3 + 3` is `Y^2·2^256 = X^3 + 3·2^768`, which times `2^-516` reads
//!
//! `mont(Y, Y) ≡ mont(mont(4X, 4X), X) + 3·2^252 (mod q)`:
//!
//! three products a point, as the scalar check takes, for eight points at once. The two sides
//! are compared by their difference, which lies strictly between 0 and `5q`.
//!
//! This is a fast path only: the caller has checked both coordinates below `q` (the bounds
//! above need it), and a group of eight that fails here is decided again by the scalar check,
//! which also accepts the identity `(0, 0)`. The test
//! `the_wide_point_check_answers_as_the_scalar_one` compares the two.

use std::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_and_si512, _mm512_cmpeq_epi64_mask, _mm512_loadu_epi64,
    _mm512_madd52hi_epu64, _mm512_madd52lo_epu64, _mm512_or_si512, _mm512_set1_epi64,
    _mm512_setzero_si512, _mm512_slli_epi64, _mm512_srai_epi64, _mm512_srli_epi64,
    _mm512_sub_epi64,
};

use halo2_proofs::halo2curves::ff::Field;
use halo2curves::bn256::Fq;

/// Points a call checks.
pub(super) const LANES: usize = 8;
/// Bytes of the points a call checks.
pub(super) const GROUP_BYTES: usize = LANES * super::G1_RAW_BYTES;
/// Limbs of 52 bits that hold a value below `2^260`.
const LIMBS: usize = 5;
/// The low 52 bits.
const MASK: u64 = (1 << 52) - 1;

/// A value in five 52-bit limbs, each held by one lane of eight.
type Wide = [__m512i; LIMBS];
/// A constant in five 52-bit limbs.
type Limbs = [u64; LIMBS];

/// Proof that the CPU has AVX-512F and IFMA, and the constants of the check: only
/// [`Ifma::detect`] makes one, so every method may use the instructions.
#[derive(Clone, Copy)]
pub(super) struct Ifma {
    constants: &'static Constants,
}

/// The check's constants, each in 52-bit limbs.
struct Constants {
    /// The base field's modulus.
    q: Limbs,
    /// `-q^-1 mod 2^52`.
    q_inv: u64,
    /// `3·2^252 mod q`.
    b_term: Limbs,
    /// `2q`, added to the difference to keep it positive.
    twice_q: Limbs,
    /// `q`, `2q`, `3q`, `4q`: the values the difference may take when the sides are equal.
    multiples: [Limbs; 4],
}

impl Ifma {
    /// The fast path, when this CPU has the instructions it needs.
    pub(super) fn detect() -> Option<Ifma> {
        static CONSTANTS: std::sync::OnceLock<Constants> = std::sync::OnceLock::new();
        let present = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512ifma");
        present.then(|| Ifma {
            constants: CONSTANTS.get_or_init(Constants::new),
        })
    }

    /// Whether all eight points (raw `x || y`, coordinates below `q`) satisfy the curve's
    /// equation. `false` says at least one does not, or one is the identity.
    pub(super) fn all_on_curve(self, points: &[u8; GROUP_BYTES]) -> bool {
        // SAFETY: an `Ifma` exists only where `detect` found AVX-512F and IFMA on this CPU,
        // the features `all_on_curve_wide` is compiled for.
        unsafe { all_on_curve_wide(self.constants, points) }
    }
}

impl Constants {
    fn new() -> Constants {
        let q = super::base_modulus_limbs();
        let inverse = super::base_modulus_inverse();
        let b_term = Fq::from(3) * Fq::from(2).pow_vartime([252]);
        let multiple = |times: u64| split(&super::modulus_times(times));
        Constants {
            q: split(&q),
            q_inv: inverse.wrapping_neg() & MASK,
            b_term: split(&super::canonical_limbs(&b_term)),
            twice_q: multiple(2),
            multiples: [multiple(1), multiple(2), multiple(3), multiple(4)],
        }
    }
}

/// Four 64-bit limbs as five 52-bit ones.
fn split(value: &[u64; 4]) -> Limbs {
    let [a0, a1, a2, a3] = *value;
    [
        a0 & MASK,
        ((a0 >> 52) | (a1 << 12)) & MASK,
        ((a1 >> 40) | (a2 << 24)) & MASK,
        ((a2 >> 28) | (a3 << 36)) & MASK,
        a3 >> 16,
    ]
}

/// [`Ifma::all_on_curve`]'s work.
///
/// # Safety
///
/// The CPU must have AVX-512F and AVX-512 IFMA.
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
unsafe fn all_on_curve_wide(constants: &Constants, points: &[u8; GROUP_BYTES]) -> bool {
    let columns = super::limb_columns::<LANES>(points);
    // SAFETY: each `columns` row is eight initialized `i64`s, what an unaligned 512-bit load
    // reads.
    let lanes = columns.map(|column| unsafe { _mm512_loadu_epi64(column.as_ptr()) });
    let [x0, x1, x2, x3, y0, y1, y2, y3] = lanes;
    let x = split_wide([x0, x1, x2, x3]);
    let y = split_wide([y0, y1, y2, y3]);
    let x4 = times_four(x);
    let lhs = mont(constants, y, y);
    let rhs = mont(constants, mont(constants, x4, x4), x);
    // difference = rhs + 3·2^252 + 2q - lhs, in (0, 5q); normalized with signed carries.
    let mut difference = [_mm512_setzero_si512(); LIMBS];
    for (i, limb) in difference.iter_mut().enumerate() {
        let sum = _mm512_add_epi64(
            _mm512_add_epi64(rhs[i], broadcast(constants.b_term[i])),
            broadcast(constants.twice_q[i]),
        );
        *limb = _mm512_sub_epi64(sum, lhs[i]);
    }
    for i in 0..LIMBS - 1 {
        let carry = _mm512_srai_epi64::<52>(difference[i]);
        difference[i] = _mm512_and_si512(difference[i], broadcast(MASK));
        difference[i + 1] = _mm512_add_epi64(difference[i + 1], carry);
    }
    let mut equal: u8 = 0;
    for multiple in &constants.multiples {
        let mut lanes_equal: u8 = 0xff;
        for (limb, value) in difference.iter().zip(multiple) {
            lanes_equal &= _mm512_cmpeq_epi64_mask(*limb, broadcast(*value));
        }
        equal |= lanes_equal;
    }
    equal == 0xff
}

/// A constant in every lane.
#[target_feature(enable = "avx512f")]
fn broadcast(value: u64) -> __m512i {
    _mm512_set1_epi64(value as i64)
}

/// [`split`], lane by lane.
#[target_feature(enable = "avx512f")]
fn split_wide([a0, a1, a2, a3]: [__m512i; 4]) -> Wide {
    let mask = broadcast(MASK);
    [
        _mm512_and_si512(a0, mask),
        _mm512_and_si512(
            _mm512_or_si512(_mm512_srli_epi64::<52>(a0), _mm512_slli_epi64::<12>(a1)),
            mask,
        ),
        _mm512_and_si512(
            _mm512_or_si512(_mm512_srli_epi64::<40>(a1), _mm512_slli_epi64::<24>(a2)),
            mask,
        ),
        _mm512_and_si512(
            _mm512_or_si512(_mm512_srli_epi64::<28>(a2), _mm512_slli_epi64::<36>(a3)),
            mask,
        ),
        _mm512_srli_epi64::<16>(a3),
    ]
}

/// `4a` in normalized limbs, for `a` below `q` (so `4a` is below `2^256`).
#[target_feature(enable = "avx512f")]
fn times_four(a: Wide) -> Wide {
    let mask = broadcast(MASK);
    let mut out = a;
    let mut carry = _mm512_setzero_si512();
    for limb in out.iter_mut() {
        let shifted = _mm512_or_si512(_mm512_slli_epi64::<2>(*limb), carry);
        carry = _mm512_srli_epi64::<52>(shifted);
        *limb = _mm512_and_si512(shifted, mask);
    }
    // No carry leaves the last limb: `4a < 2^256`, and five limbs hold 260 bits.
    out
}

/// `a·b·2^-260 mod q`, below `2q`, in normalized limbs, for normalized `a` and `b` below
/// `4q`. Each step adds at most four 52-bit products to a 64-bit accumulator, five steps in
/// all: below `2^57`, no overflow.
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
fn mont(constants: &Constants, a: Wide, b: Wide) -> Wide {
    let zero = _mm512_setzero_si512();
    let q_inv = broadcast(constants.q_inv);
    let q = constants.q.map(|limb| broadcast(limb));
    let mut t = [zero; LIMBS + 1];
    for a_i in a {
        for j in 0..LIMBS {
            t[j] = _mm512_madd52lo_epu64(t[j], a_i, b[j]);
            t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], a_i, b[j]);
        }
        // m makes t's low limb a multiple of 2^52: t + m·q ≡ 0 (mod 2^52).
        let m = _mm512_madd52lo_epu64(zero, t[0], q_inv);
        for j in 0..LIMBS {
            t[j] = _mm512_madd52lo_epu64(t[j], m, q[j]);
            t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], m, q[j]);
        }
        let carry = _mm512_srli_epi64::<52>(t[0]);
        t = [_mm512_add_epi64(t[1], carry), t[2], t[3], t[4], t[5], zero];
    }
    let mask = broadcast(MASK);
    let mut out = [zero; LIMBS];
    let mut carry = zero;
    for (out, limb) in out.iter_mut().zip(t) {
        let value = _mm512_add_epi64(limb, carry);
        carry = _mm512_srli_epi64::<52>(value);
        *out = _mm512_and_si512(value, mask);
    }
    out
}
