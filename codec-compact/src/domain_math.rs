//! Field arithmetic over a domain's rows that saving and loading both need: powers of a
//! generator, `1/n`, and the closed forms of the Lagrange vectors the layout recognises.

use keycodec_core::backend_api::field::zeros;
use keycodec_core::backend_api::Result;
use keycodec_core::halo2_proofs::arithmetic::Field;
use keycodec_core::halo2curves::bn256::Fr;
use rayon::prelude::*;

/// `1/n` in the field (`0` for `n = 0`, which has no inverse).
pub(crate) fn inverse_of(n: usize) -> Fr {
    Option::<Fr>::from(Fr::from(n as u64).invert()).unwrap_or(Fr::ZERO)
}

/// `[1, x, x^2, ..., x^(len-1)]`, in parallel chunks (each starts from its own power).
///
/// # Errors
///
/// `OutOfMemory` when the vector cannot be allocated.
pub(crate) fn powers(x: Fr, len: usize) -> Result<Vec<Fr>> {
    const CHUNK: usize = 1 << 14;
    let mut out = zeros(len)?;
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(index, chunk)| {
            let mut current = x.pow_vartime([(index * CHUNK) as u64]);
            for power in chunk {
                *power = current;
                current *= x;
            }
        });
    Ok(out)
}

/// A Lagrange vector whose coefficient form is known in closed form.
#[derive(Clone, Copy)]
pub(crate) enum Base {
    /// All values zero: the zero polynomial.
    Zero,
    /// All values `c`: the constant polynomial `c`.
    Constant(Fr),
    /// Value `d · ω^row` at every row: the polynomial `d · X`.
    Linear(Fr),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_powers_agree_with_repeated_multiplication() {
        let x = Fr::from(0x9e37_79b9_u64);
        for len in [0usize, 1, 2, (1 << 14) - 1, 1 << 14, (1 << 14) + 1, 3 << 14] {
            let serial: Vec<Fr> = std::iter::successors(Some(Fr::ONE), |p| Some(*p * x))
                .take(len)
                .collect();
            assert_eq!(powers(x, len).unwrap(), serial, "len {len}");
        }
    }
}
