//! The scalar point check's arithmetic over BN254's base field, for public values
//! (variable-time is fine: a point read from a file is no secret), with fewer word products
//! than three of halo2curves' Montgomery products.
//!
//! A raw point holds `X = x·R mod q` and `Y = y·R mod q` (`R = 2^256`). `y^2 = x^3 + b` is
//! `Y^2 ≡ X2·X + c (mod q)` with `X2 = x^2·R mod q` (one Montgomery product) and the constant
//! `c = b·R^2 mod q`. `Y^2` and `X2·X` are left as 512-bit integers; `Y^2 - X2·X - c`, made
//! positive by adding `q^2 + q` (a multiple of `q`), is reduced once (Montgomery's
//! reduction), and is zero modulo `q` exactly when the point is on the curve. Two squares
//! (10 word products each), a product (16) and two reductions (20 each): 76 word products a
//! point, against the 108 of three of halo2curves' Montgomery products (16 and 20 each). The
//! test `montgomery_reductions_are_halo2curves_products` compares the parts with
//! halo2curves, and `the_fast_point_check_answers_as_halo2curves` the whole check.

use halo2_proofs::halo2curves::ff::Field;
use halo2curves::bn256::{Fq, G1Affine};
use halo2curves::serde::SerdeObject;

/// A 512-bit integer, little-endian words.
pub(super) type Wide = [u64; 8];

/// BN254's base modulus and the constants of the check.
pub(super) struct Mont {
    /// The modulus `q`, little-endian limbs.
    q: [u64; 4],
    /// `-q^-1 mod 2^64`.
    q_inv: u64,
    /// `q^2 + q - c`, with `c = b·R^2 mod q`: added to `Y^2 - X2·X` to keep it positive,
    /// taking `c` off at once.
    offset: Wide,
}

impl Mont {
    /// The constants, made once.
    pub(super) fn get() -> &'static Mont {
        static MONT: std::sync::OnceLock<Mont> = std::sync::OnceLock::new();
        MONT.get_or_init(|| {
            let q = super::base_modulus_limbs();
            // The element b·R has the raw limbs b·R^2 mod q.
            let b_r = <G1Affine as halo2_proofs::halo2curves::CurveAffine>::b()
                * Fq::from(2).pow_vartime([256]);
            let c = limbs(&b_r);
            let mut q_wide = [0; 8];
            q_wide[..4].copy_from_slice(&q);
            let mut c_wide = [0; 8];
            c_wide[..4].copy_from_slice(&c);
            Mont {
                q,
                q_inv: super::base_modulus_inverse().wrapping_neg(),
                offset: sub(&add(&product(&q, &q), &q_wide), &c_wide),
            }
        })
    }

    /// The modulus, little-endian limbs.
    pub(super) fn modulus(&self) -> &[u64; 4] {
        &self.q
    }

    /// Whether raw coordinates `x`, `y` (Montgomery limbs, each below `q`: the caller checks)
    /// satisfy the curve's equation.
    pub(super) fn on_curve(&self, x: &[u64; 4], y: &[u64; 4]) -> bool {
        let x2 = self.reduce_once(self.redc(square(x)));
        // Below q^2 each; the offset, q^2 + q - c, keeps the difference above 0 (it is at least
        // 2q) and below 2q^2 + q < q·R, as `redc` needs.
        let difference = sub(&add(&square(y), &self.offset), &product(&x2, x));
        let reduced = self.redc(difference);
        reduced == [0; 4] || reduced == self.q
    }

    /// Montgomery's reduction: `t·R^-1 mod q` for `t` below `q·R`, below `2q`.
    #[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
    pub(super) fn redc(&self, mut t: Wide) -> [u64; 4] {
        for i in 0..4 {
            let m = t[i].wrapping_mul(self.q_inv);
            let mut carry = 0u64;
            for (j, &modulus) in self.q.iter().enumerate() {
                let sum =
                    u128::from(m) * u128::from(modulus) + u128::from(t[i + j]) + u128::from(carry);
                t[i + j] = sum as u64;
                carry = (sum >> 64) as u64;
            }
            // The sum, t + m·q·2^(64 i) for each i, stays below 2·q·R < 2^512: no carry out.
            for word in &mut t[i + 4..] {
                if carry == 0 {
                    break;
                }
                let (sum, overflow) = word.overflowing_add(carry);
                *word = sum;
                carry = u64::from(overflow);
            }
        }
        [t[4], t[5], t[6], t[7]]
    }

    /// `t - q` if `t >= q`, else `t`: `t` below `2q` comes back below `q`.
    pub(super) fn reduce_once(&self, t: [u64; 4]) -> [u64; 4] {
        match subtract(&t, &self.q) {
            (_, true) => t,
            (less, false) => less,
        }
    }
}

/// `a·b`, 16 word products.
#[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
pub(super) fn product(a: &[u64; 4], b: &[u64; 4]) -> Wide {
    let mut t = [0u64; 8];
    for (i, &word) in b.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &limb) in a.iter().enumerate() {
            let sum =
                u128::from(limb) * u128::from(word) + u128::from(t[i + j]) + u128::from(carry);
            t[i + j] = sum as u64;
            carry = (sum >> 64) as u64;
        }
        t[i + 4] = carry;
    }
    t
}

/// `a^2`, 10 word products: each product of two different limbs once, doubled, then the
/// limbs' squares.
#[allow(clippy::indexing_slicing)] // fixed-size arrays, indices below their lengths
pub(super) fn square(a: &[u64; 4]) -> Wide {
    let mut t = [0u64; 8];
    for i in 0..3 {
        let mut carry = 0u64;
        for j in i + 1..4 {
            let sum =
                u128::from(a[i]) * u128::from(a[j]) + u128::from(t[i + j]) + u128::from(carry);
            t[i + j] = sum as u64;
            carry = (sum >> 64) as u64;
        }
        t[i + 4] = carry;
    }
    // The products of different limbs sum to below 2^511: doubling them fits.
    for k in (1..8).rev() {
        t[k] = (t[k] << 1) | (t[k - 1] >> 63);
    }
    t[0] <<= 1;
    let mut carry = 0u128;
    for (i, &limb) in a.iter().enumerate() {
        let limb_square = u128::from(limb) * u128::from(limb);
        let low = u128::from(t[2 * i]) + (limb_square & u128::from(u64::MAX)) + carry;
        t[2 * i] = low as u64;
        let high = u128::from(t[2 * i + 1]) + (limb_square >> 64) + (low >> 64);
        t[2 * i + 1] = high as u64;
        carry = high >> 64;
    }
    t
}

/// `a + b`, for a sum below `2^512`.
fn add(a: &Wide, b: &Wide) -> Wide {
    let mut sum = [0u64; 8];
    let mut carry = false;
    for ((out, &a), &b) in sum.iter_mut().zip(a).zip(b) {
        let (partial, first) = a.overflowing_add(b);
        let (total, second) = partial.overflowing_add(u64::from(carry));
        *out = total;
        carry = first || second;
    }
    sum
}

/// `a - b`, for `a >= b`.
fn sub(a: &Wide, b: &Wide) -> Wide {
    subtract(a, b).0
}

/// `a - b` modulo `2^(64 N)`, and whether it borrowed (`a < b`).
fn subtract<const N: usize>(a: &[u64; N], b: &[u64; N]) -> ([u64; N], bool) {
    let mut difference = [0u64; N];
    let mut borrow = false;
    for ((out, &a), &b) in difference.iter_mut().zip(a).zip(b) {
        let (partial, first) = a.overflowing_sub(b);
        let (total, second) = partial.overflowing_sub(u64::from(borrow));
        *out = total;
        borrow = first || second;
    }
    (difference, borrow)
}

/// An element's raw limbs (its Montgomery form).
pub(super) fn limbs(value: &Fq) -> [u64; 4] {
    super::limbs_le(&value.to_raw_bytes())
}
