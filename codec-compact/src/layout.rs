//! The compact payload: what is stored, and how the rest is recomputed.
//!
//! ```text
//! k: u32 LE, compress_selectors: u8, fixed commitment count: u32 LE,
//! fixed commitments, permutation commitments (raw 64-byte points; the latter's count is the
//! circuit's), selectors (packed, n/8 bytes each; the circuit's count when compressed)
//! -- proving keys only --
//! per fixed column: runs until 2^k rows: varint length, tag, value
//!     tag 0: zero; 1: varint v; 2: varint v meaning -v; 3: 32-byte canonical value
//! per permutation column: varint exception count, then per exception (in row order):
//!     varint row gap from the previous exception (+1 after the first), varint column,
//!     varint row it maps to; every other cell maps to itself
//! ```

use std::collections::HashMap;

use codec_core::circuit::{expect_count, rows, PkParts, PkShape};
use codec_core::field::{encode_fr, FieldEncoding};
use codec_core::halo2_proofs::arithmetic::Field;
use codec_core::halo2_proofs::fft;
use codec_core::halo2_proofs::halo2curves::ff::PrimeField;
use codec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use codec_core::halo2_proofs::poly::EvaluationDomain;
use codec_core::halo2curves::bn256::{Fr, G1Affine};
use codec_core::{Error, PayloadReader, Result};
use rayon::prelude::*;

use crate::varint;

const TAG_ZERO: u8 = 0;
const TAG_SMALL: u8 = 1;
const TAG_NEGATED_SMALL: u8 = 2;
const TAG_FULL: u8 = 3;

/// What a compact proving key stores besides its verifying key.
pub(crate) struct StoredPk {
    fixed_values: Vec<Vec<Fr>>,
    /// Per permutation column: (row, column it maps to, row it maps to), rows increasing.
    exceptions: Vec<Vec<(usize, usize, usize)>>,
}

pub(crate) fn write_pk(pk: &ProvingKey<G1Affine>, out: &mut Vec<u8>) -> Result<()> {
    // The ω powers the check and the permutation's mapping both need, computed once.
    let domain = pk.get_vk().get_domain();
    let omega_powers = powers(domain.get_omega(), rows(domain.k()));
    check_derivable(pk, &omega_powers)?;
    for column in pk.fixed_values() {
        write_runs(column.values(), out);
    }
    let exceptions = permutation_exceptions(pk, &omega_powers)?;
    for column in &exceptions {
        varint::write(out, column.len() as u64);
        let mut previous = None;
        for &(row, to_column, to_row) in column {
            let gap = match previous {
                None => row,
                Some(previous) => row - previous - 1,
            };
            varint::write(out, gap as u64);
            varint::write(out, to_column as u64);
            varint::write(out, to_row as u64);
            previous = Some(row);
        }
    }
    Ok(())
}

fn write_runs(values: &[Fr], out: &mut Vec<u8>) {
    let mut index = 0;
    while let Some(value) = values.get(index) {
        let run = values
            .get(index..)
            .map_or(1, |rest| rest.iter().take_while(|v| *v == value).count());
        varint::write(out, run as u64);
        write_value(value, out);
        index += run;
    }
}

fn write_value(value: &Fr, out: &mut Vec<u8>) {
    let small = |x: &Fr| -> Option<u64> {
        let repr = x.to_repr();
        let (low, high) = repr.split_at(8);
        let low: [u8; 8] = low.try_into().ok()?;
        high.iter()
            .all(|b| *b == 0)
            .then(|| u64::from_le_bytes(low))
    };
    if bool::from(value.is_zero()) {
        out.push(TAG_ZERO);
    } else if let Some(v) = small(value) {
        out.push(TAG_SMALL);
        varint::write(out, v);
    } else if let Some(v) = small(&-*value) {
        out.push(TAG_NEGATED_SMALL);
        varint::write(out, v);
    } else {
        out.push(TAG_FULL);
        out.extend_from_slice(&value.to_repr());
    }
}

pub(crate) fn read_pk(input: &mut PayloadReader<'_>, shape: &PkShape) -> Result<StoredPk> {
    let n = shape.rows;
    let columns = shape.permutation_columns;
    let fixed_values = (0..shape.fixed_columns)
        .map(|_| read_runs(input, n))
        .collect::<Result<_>>()?;
    let mut exceptions = Vec::with_capacity(columns);
    for _ in 0..columns {
        let count = varint::read_at_most(input, n as u64, "permutation exception count")? as usize;
        // Each exception takes at least three bytes: a count beyond that is a forgery.
        input.ensure_available(count as u128 * 3, "permutation exceptions")?;
        let mut column = Vec::with_capacity(count);
        let mut next_row = 0usize;
        for _ in 0..count {
            let gap = varint::read_at_most(input, n as u64, "permutation row gap")? as usize;
            let row = next_row + gap;
            if row >= n {
                return Err(Error::Malformed(format!(
                    "permutation exception at row {row} of {n}"
                )));
            }
            let to_column = varint::read_at_most(
                input,
                columns.saturating_sub(1) as u64,
                "permutation column",
            )?;
            let to_row = varint::read_at_most(input, n as u64 - 1, "permutation row")?;
            column.push((row, to_column as usize, to_row as usize));
            next_row = row + 1;
        }
        exceptions.push(column);
    }
    Ok(StoredPk {
        fixed_values,
        exceptions,
    })
}

fn read_runs(input: &mut PayloadReader<'_>, n: usize) -> Result<Vec<Fr>> {
    let mut values = Vec::with_capacity(n);
    while values.len() < n {
        let run =
            varint::read_at_most(input, (n - values.len()) as u64, "fixed column run")? as usize;
        if run == 0 {
            return Err(Error::Malformed("empty run in a fixed column".into()));
        }
        let value = match input.read_u8("fixed value tag")? {
            TAG_ZERO => Fr::ZERO,
            TAG_SMALL => Fr::from(varint::read(input, "fixed value")?),
            TAG_NEGATED_SMALL => -Fr::from(varint::read(input, "fixed value")?),
            TAG_FULL => {
                let repr = input.read_array::<32>("fixed value")?;
                Option::from(Fr::from_repr(repr)).ok_or(Error::InvalidFieldElement {
                    context: "fixed value",
                })?
            }
            tag => return Err(Error::Malformed(format!("unknown fixed value tag {tag}"))),
        };
        values.resize(values.len() + run, value);
    }
    Ok(values)
}

/// `1/n` in the field (`0` for `n = 0`, which has no inverse).
fn inverse_of(n: usize) -> Fr {
    Option::<Fr>::from(Fr::from(n as u64).invert()).unwrap_or(Fr::ZERO)
}

/// `[1, x, x^2, ..., x^(len-1)]`, in parallel chunks (each starts from its own power).
fn powers(x: Fr, len: usize) -> Vec<Fr> {
    const CHUNK: usize = 1 << 14;
    let mut out = vec![Fr::ZERO; len];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(index, chunk)| {
            let mut current = x.pow_vartime([(index * CHUNK) as u64]);
            for power in chunk {
                *power = current;
                current *= x;
            }
        });
    out
}

/// Finds, for every permutation cell whose value is not its own `δ^column · ω^row`, the
/// (column, row) it maps to. `omega_powers` are the domain's `n` powers of ω, and every
/// permutation column has `n` values ([`check_derivable`] checked it).
fn permutation_exceptions(
    pk: &ProvingKey<G1Affine>,
    omega_powers: &[Fr],
) -> Result<Vec<Vec<(usize, usize, usize)>>> {
    let values = pk.permutation().permutations();
    let n = omega_powers.len();
    let delta_powers = powers(Fr::DELTA, values.len());
    let delta_inverses: Vec<Fr> = delta_powers
        .iter()
        .map(|d| Option::<Fr>::from(d.invert()).unwrap_or(Fr::ZERO))
        .collect();
    // Cells whose value is not their own δ^column · ω^row, with that value.
    let mut odd_cells: Vec<Vec<(usize, Fr)>> = Vec::with_capacity(values.len());
    for (column, poly) in values.iter().enumerate() {
        let delta = delta_powers.get(column).copied().unwrap_or(Fr::ONE);
        odd_cells.push(
            poly.values()
                .par_iter()
                .zip(omega_powers.par_iter())
                .enumerate()
                .filter(|(_, (value, omega))| **value != delta * **omega)
                .map(|(row, (value, _))| (row, *value))
                .collect(),
        );
    }
    // Each odd value is δ^c · ω^r for some (c, r): for every column c, the ω power it would
    // need is `value / δ^c`, found through an index of ω powers by their first raw limb.
    let odd_total: usize = odd_cells.iter().map(Vec::len).sum();
    if odd_total == 0 {
        // The identity permutation (or none): nothing to look up.
        return Ok(vec![Vec::new(); values.len()]);
    }
    let index = if odd_total.saturating_mul(delta_inverses.len()) >= n / 8 {
        // Dense permutation: index every ω power.
        OmegaIndex::new(
            omega_powers
                .iter()
                .enumerate()
                .map(|(row, w)| (row, limb(w))),
        )
    } else {
        // Sparse: one parallel pass over the ω powers finds the rows of the few candidates
        // (the index holds the candidates, not the n powers).
        let candidates: LimbMap<()> = odd_cells
            .iter()
            .flatten()
            .flat_map(|(_, value)| {
                delta_inverses
                    .iter()
                    .map(move |inv| (limb(&(*value * inv)), ()))
            })
            .collect();
        let rows: Vec<(usize, u64)> = omega_powers
            .par_iter()
            .enumerate()
            .map(|(row, w)| (row, limb(w)))
            .filter(|(_, key)| candidates.contains_key(key))
            .collect();
        OmegaIndex::new(rows.into_iter())
    };
    odd_cells
        .iter()
        .map(|cells| {
            cells
                .par_iter()
                .map(|(row, value)| {
                    delta_inverses
                        .iter()
                        .enumerate()
                        .find_map(|(to_column, inverse)| {
                            index
                                .row_of(&(*value * inverse), omega_powers)
                                .map(|to_row| (*row, to_column, to_row))
                        })
                        .ok_or_else(|| {
                            Error::Malformed(
                                "a permutation value is not δ^column · ω^row: not a halo2 key"
                                    .into(),
                            )
                        })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect()
}

/// The first limb of a field element's raw (Montgomery) form: for the powers of ω, a
/// pseudo-random 64-bit value, used as its own hash.
fn limb(value: &Fr) -> u64 {
    let raw = encode_fr(value, FieldEncoding::Raw);
    let mut first = [0u8; 8];
    first.copy_from_slice(raw.get(..8).unwrap_or(&[0u8; 8]));
    u64::from_le_bytes(first)
}

/// A `Hasher` for keys that are already uniformly distributed ([`limb`]s): the key is the
/// hash. SipHash over 32-byte keys made indexing 2^22 ω powers the bulk of a dense save.
#[derive(Default)]
struct LimbHasher(u64);

impl std::hash::Hasher for LimbHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

type LimbMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<LimbHasher>>;

/// Rows of ω powers by their first raw limb. Two powers may share a limb (about one chance
/// in 10^6 at k = 22): the first row of a limb is in `first`, any other in `more`, and
/// every lookup compares the whole value, so the index is exact.
struct OmegaIndex {
    first: LimbMap<usize>,
    more: LimbMap<Vec<usize>>,
}

impl OmegaIndex {
    fn new(rows: impl ExactSizeIterator<Item = (usize, u64)>) -> Self {
        let mut first = LimbMap::with_capacity_and_hasher(rows.len(), Default::default());
        let mut more: LimbMap<Vec<usize>> = LimbMap::default();
        for (row, key) in rows {
            if let Some(previous) = first.insert(key, row) {
                first.insert(key, previous);
                more.entry(key).or_default().push(row);
            }
        }
        OmegaIndex { first, more }
    }

    /// The row `r` with `ω^r == value`, if indexed.
    fn row_of(&self, value: &Fr, omega_powers: &[Fr]) -> Option<usize> {
        let key = limb(value);
        self.first
            .get(&key)
            .into_iter()
            .chain(self.more.get(&key).into_iter().flatten())
            .copied()
            .find(|&row| omega_powers.get(row) == Some(value))
    }
}

/// `p(x)` for coefficients `coeffs`, by Horner's rule over blocks evaluated in parallel:
/// `p(x) = Σ_b x^(b·S) · p_b(x)` for blocks `p_b` of `S` coefficients.
fn evaluate_parallel(coeffs: &[Fr], x: Fr) -> Fr {
    const BLOCK: usize = 1 << 14;
    let x_block = x.pow_vartime([BLOCK as u64]);
    let partial: Vec<Fr> = coeffs
        .par_chunks(BLOCK)
        .map(|block| block.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + c))
        .collect();
    partial
        .iter()
        .rev()
        .fold(Fr::ZERO, |acc, p| acc * x_block + p)
}

/// Refuses to save a key whose recomputable polynomials are not what loading would
/// recompute (a key assembled by hand, or corrupted in memory): saving it compactly would
/// silently change it.
///
/// Each coefficient-form polynomial `p` must be the inverse FFT of its Lagrange values `v`.
/// Both sides are evaluated at one point `x` outside the domain: `p(x)` by Horner, and the
/// interpolation `Σ v_j L_j(x)` with `L_j(x) = (x^n - 1)/n · ω^j/(x - ω^j)`. Two distinct
/// polynomials of degree < n agree at `x` with probability at most n/|F| (Schwartz–Zippel),
/// and `x` is derived from the key, so an accidental inconsistency cannot be aimed at it.
///
/// The interpolation costs one multiplication per row only for dense columns. A column
/// whose values are its base (zero for fixed columns, `δ^c · ω^j` for permutation column
/// `c`) except on a few rows is the base's value at `x` (`0`, or `δ^c · x`) plus the few
/// rows' terms; the basis over every row (one batch inversion of n elements) is built only
/// if some column is dense. `l_active_row` uses `Σ_j L_j(x) = 1`.
/// `omega_powers` are the domain's `n` powers of ω.
fn check_derivable(pk: &ProvingKey<G1Affine>, omega_powers: &[Fr]) -> Result<()> {
    let n = omega_powers.len();
    // A point derived from the key (its transcript representation), moved off the domain.
    let mut x = pk.get_vk().transcript_repr().square() + Fr::from(0x6b63_u64);
    while x.pow_vartime([n as u64]) == Fr::ONE {
        x += Fr::ONE;
    }
    let lagrange = Interpolator::new(omega_powers, x);
    let evaluate = |coeffs: &[Fr]| evaluate_parallel(coeffs, x);
    let refuse = |what: &str| {
        Error::Malformed(format!("{what} is not derivable the way halo2 keygen derives it: the compact layout cannot store this key"))
    };

    let blinding = pk.get_vk().cs().blinding_factors();
    let last = n
        .checked_sub(blinding + 1)
        .ok_or_else(|| refuse("l_last"))?;
    let ends = lagrange.basis_at_rows(&[0, last]);
    let inactive: Fr = lagrange
        .basis_at_rows(&(last..n).collect::<Vec<_>>())
        .iter()
        .sum();
    let checks = [
        (evaluate(pk.l0().values()), ends.first().copied(), "l0"),
        (
            evaluate(pk.l_last().values()),
            ends.get(1).copied(),
            "l_last",
        ),
        (
            evaluate(pk.l_active_row().values()),
            Some(Fr::ONE - inactive),
            "l_active_row",
        ),
    ];
    for (got, expected, what) in checks {
        if Some(got) != expected {
            return Err(refuse(what));
        }
    }
    let permutation = pk.permutation();
    let delta_powers = powers(Fr::DELTA, permutation.permutations().len());
    let pairs = pk
        .fixed_values()
        .iter()
        .zip(pk.fixed_polys())
        .map(|(v, p)| (v.values(), p.values(), Base::Zero, "a fixed polynomial"))
        .chain(
            permutation
                .permutations()
                .iter()
                .zip(permutation.polys())
                .zip(&delta_powers)
                .map(|((v, p), delta)| {
                    (
                        v.values(),
                        p.values(),
                        Base::Linear(*delta),
                        "a permutation polynomial",
                    )
                }),
        );
    for (values, coeffs, base, what) in pairs {
        if values.len() != n
            || coeffs.len() != n
            || evaluate(coeffs) != lagrange.interpolate(values, base)
        {
            return Err(refuse(what));
        }
    }
    if pk.fixed_polys().len() != pk.fixed_values().len()
        || permutation.polys().len() != permutation.permutations().len()
    {
        return Err(refuse("the polynomial counts"));
    }
    Ok(())
}

/// Interpolation at one point `x` off the domain of `n` rows: `Σ v_j L_j(x)` with
/// `L_j(x) = (x^n - 1)/n · ω^j/(x - ω^j)`.
struct Interpolator<'a> {
    x: Fr,
    n: usize,
    scale: Fr,
    /// The domain's powers of ω, `n` of them.
    omega_powers: &'a [Fr],
    /// The basis over every row, for dense columns: built at most once.
    full_basis: std::sync::OnceLock<Vec<Fr>>,
}

impl<'a> Interpolator<'a> {
    fn new(omega_powers: &'a [Fr], x: Fr) -> Self {
        let n = omega_powers.len();
        Interpolator {
            x,
            n,
            scale: (x.pow_vartime([n as u64]) - Fr::ONE) * inverse_of(n),
            omega_powers,
            full_basis: std::sync::OnceLock::new(),
        }
    }

    fn omega_at(&self, row: usize) -> Fr {
        self.omega_powers.get(row).copied().unwrap_or(Fr::ZERO)
    }

    /// `L_j(x)` for the given rows, with one batch inversion.
    fn basis_at_rows(&self, rows: &[usize]) -> Vec<Fr> {
        let mut inverses: Vec<Fr> = rows
            .par_iter()
            .map(|&j| self.x - self.omega_at(j))
            .collect();
        inverses.par_chunks_mut(1 << 16).for_each(|chunk| {
            codec_core::halo2_proofs::halo2curves::ff::BatchInvert::batch_invert(chunk.iter_mut());
        });
        rows.par_iter()
            .zip(inverses.par_iter())
            .map(|(&j, inv)| self.scale * self.omega_at(j) * inv)
            .collect()
    }

    /// `Σ v_j L_j(x)`. Where `values` equal `base` on all but an eighth of the rows, the
    /// base's own value at `x` plus the other rows' terms (one multiplication per row to
    /// compare with a linear base, none for zero); otherwise over every row, with the full
    /// basis.
    fn interpolate(&self, values: &[Fr], base: Base) -> Fr {
        let base_at = |row: usize| match base {
            Base::Zero => Fr::ZERO,
            Base::Constant(c) => c,
            Base::Linear(d) => d * self.omega_at(row),
        };
        // At most an eighth of the rows are collected: one more means the column is dense
        // (and stops the search early).
        let limit = self.n / 8;
        let off: Vec<(usize, Fr)> = values
            .par_iter()
            .enumerate()
            .filter_map(|(row, v)| {
                let b = base_at(row);
                (*v != b).then(|| (row, *v - b))
            })
            .take_any(limit + 1)
            .collect();
        if off.len() <= limit {
            let at_x = match base {
                Base::Zero => Fr::ZERO,
                Base::Constant(c) => c,
                Base::Linear(d) => d * self.x,
            };
            let rows: Vec<usize> = off.iter().map(|(row, _)| *row).collect();
            let basis = self.basis_at_rows(&rows);
            at_x + off
                .par_iter()
                .zip(basis.par_iter())
                .map(|((_, difference), l)| *difference * l)
                .sum::<Fr>()
        } else {
            self.interpolate_dense(values)
        }
    }

    /// `Σ v_j L_j(x)` over every row.
    fn interpolate_dense(&self, values: &[Fr]) -> Fr {
        let basis = self
            .full_basis
            .get_or_init(|| self.basis_at_rows(&(0..self.n).collect::<Vec<_>>()));
        values
            .par_iter()
            .zip(basis.par_iter())
            .map(|(v, l)| *v * l)
            .sum()
    }
}

/// Lagrange vectors with at most this many entries off their base are converted to
/// coefficients term by term (each term costs two multiplications per coefficient) instead
/// of by a full inverse FFT: below roughly k terms that is cheaper.
fn sparse_limit(k: u32) -> usize {
    k as usize
}

/// A Lagrange vector whose coefficient form is known in closed form.
#[derive(Clone, Copy)]
enum Base {
    /// All values zero: the zero polynomial.
    Zero,
    /// All values `c`: the constant polynomial `c`.
    Constant(Fr),
    /// Value `d · ω^row` at every row: the polynomial `d · X`.
    Linear(Fr),
}

/// The coefficients of the polynomial whose Lagrange values are `base` plus `terms`
/// (row, added value): `Σ_j v_j · ω^(-ij) / n` per coefficient `i`, a geometric sequence per
/// term. Exact field arithmetic, so identical to halo2's inverse FFT of the same values.
fn sparse_to_coeff(n: usize, omega_inv: Fr, base: Base, terms: &[(usize, Fr)]) -> Vec<Fr> {
    const CHUNK: usize = 1 << 14;
    let n_inv = inverse_of(n);
    let terms: Vec<(Fr, Fr)> = terms
        .iter()
        .map(|(row, value)| (omega_inv.pow_vartime([*row as u64]), *value * n_inv))
        .collect();
    let mut coeffs = vec![Fr::ZERO; n];
    coeffs
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(index, chunk)| {
            let first = (index * CHUNK) as u64;
            for (ratio, scaled) in &terms {
                let mut current = *scaled * ratio.pow_vartime([first]);
                for coeff in chunk.iter_mut() {
                    *coeff += current;
                    current *= ratio;
                }
            }
        });
    match base {
        Base::Zero => {}
        Base::Constant(c) => {
            if let Some(first) = coeffs.get_mut(0) {
                *first += c;
            }
        }
        Base::Linear(d) => {
            if let Some(second) = coeffs.get_mut(1) {
                *second += d;
            }
        }
    }
    coeffs
}

/// The coefficients of the polynomial with Lagrange values `values`: what halo2's
/// `EvaluationDomain::lagrange_to_coeff` returns (exact field arithmetic: any inverse FFT of
/// the same values gives the same coefficients), through halo2-axiom's other public FFT,
/// `fft::recursive::fft`, over the twiddle tables the domain already holds. On x86-64
/// `lagrange_to_coeff` uses `fft::parallel`, which recomputes its twiddles as it goes: at
/// k = 22 on the 2-core project machine the recursive one takes 1.13 s against 1.65 s.
///
/// # Errors
///
/// [`Error::Structure`] unless `values` has the domain's `2^k` elements (halo2 would panic).
fn inverse_fft(domain: &EvaluationDomain<Fr>, values: &[Fr]) -> Result<Vec<Fr>> {
    let n = values.len();
    expect_count("polynomial length (2^k)", rows(domain.k()), n)?;
    let mut coeffs = values.to_vec();
    fft::recursive::fft(
        &mut coeffs,
        domain.get_omega_inv(),
        domain.k(),
        domain.get_fft_data(n),
        true,
    );
    let n_inv = inverse_of(n);
    coeffs.par_iter_mut().for_each(|c| *c *= n_inv);
    Ok(coeffs)
}

/// Recomputes every polynomial, exactly as halo2-axiom 0.5.3's `keygen_pk` computes it:
/// through closed forms and sparse sums where the values allow, halo2's own inverse FFT
/// otherwise.
pub(crate) fn recompute(vk: &VerifyingKey<G1Affine>, stored: StoredPk) -> Result<PkParts> {
    let domain = vk.get_domain();
    let n = rows(domain.k());
    let limit = sparse_limit(domain.k());
    let omega_inv = domain.get_omega_inv();
    let full_ifft = |values: &Vec<Fr>| inverse_fft(domain, values);
    let omega_powers = powers(domain.get_omega(), n);
    let delta_powers = powers(Fr::DELTA, stored.exceptions.len());

    let blinding = vk.cs().blinding_factors();
    let last = n.checked_sub(blinding + 1).ok_or(Error::Structure {
        what: "rows against blinding factors",
        expected: blinding as u64 + 1,
        found: n as u64,
    })?;
    let inactive: Vec<(usize, Fr)> = (last..n).map(|row| (row, -Fr::ONE)).collect();
    let l0 = sparse_to_coeff(n, omega_inv, Base::Zero, &[(0, Fr::ONE)]);
    let l_last = sparse_to_coeff(n, omega_inv, Base::Zero, &[(last, Fr::ONE)]);
    let l_active_row = sparse_to_coeff(n, omega_inv, Base::Constant(Fr::ONE), &inactive);

    expect_count(
        "fixed columns",
        vk.cs().num_fixed_columns(),
        stored.fixed_values.len(),
    )?;
    let fixed_polys = stored
        .fixed_values
        .iter()
        .map(|values| {
            let nonzero: Vec<(usize, Fr)> = values
                .iter()
                .enumerate()
                .filter(|(_, v)| !bool::from(v.is_zero()))
                .take(limit + 1)
                .map(|(row, v)| (row, *v))
                .collect();
            if nonzero.len() <= limit {
                Ok(sparse_to_coeff(n, omega_inv, Base::Zero, &nonzero))
            } else {
                full_ifft(values)
            }
        })
        .collect::<Result<_>>()?;

    let mut permutation_values = Vec::with_capacity(stored.exceptions.len());
    let mut permutation_polys = Vec::with_capacity(stored.exceptions.len());
    for (column, exceptions) in stored.exceptions.iter().enumerate() {
        let delta = delta_powers.get(column).copied().unwrap_or(Fr::ONE);
        let mut values: Vec<Fr> = omega_powers.par_iter().map(|w| delta * w).collect();
        let mut changes = Vec::with_capacity(exceptions.len().min(limit + 1));
        for &(row, to_column, to_row) in exceptions {
            let target = delta_powers.get(to_column).zip(omega_powers.get(to_row));
            if let (Some(cell), Some((d, w))) = (values.get_mut(row), target) {
                let new = *d * w;
                if changes.len() <= limit {
                    changes.push((row, new - *cell));
                }
                *cell = new;
            }
        }
        let poly = if changes.len() <= limit {
            sparse_to_coeff(n, omega_inv, Base::Linear(delta), &changes)
        } else {
            full_ifft(&values)?
        };
        permutation_values.push(values);
        permutation_polys.push(poly);
    }
    Ok(PkParts {
        l0,
        l_last,
        l_active_row,
        fixed_values: stored.fixed_values,
        fixed_polys,
        permutation_values,
        permutation_polys,
    })
}

#[cfg(test)]
mod evaluation_tests {
    use super::*;

    #[test]
    fn parallel_horner_agrees_with_plain_horner() {
        let x = Fr::from(0x1234_5678_u64);
        for len in [0usize, 1, 5, (1 << 14) - 1, 1 << 14, (1 << 14) + 1, 3 << 14] {
            let coeffs: Vec<Fr> = (0..len as u64).map(|i| Fr::from(i * i + 7)).collect();
            let plain = coeffs.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + c);
            assert_eq!(evaluate_parallel(&coeffs, x), plain, "len {len}");
        }
    }

    /// The sparse interpolation (base value plus the differing rows) equals the one over
    /// every row, and both equal the inverse FFT's polynomial evaluated at `x`.
    #[test]
    fn sparse_and_dense_interpolation_agree_with_the_inverse_fft() {
        let k = 6;
        let n = 1usize << k;
        let domain = EvaluationDomain::<Fr>::new(3, k);
        let x = Fr::from(0xdead_beef_u64);
        let omega_powers = powers(domain.get_omega(), n);
        let lagrange = Interpolator::new(&omega_powers, x);
        let delta = Fr::from(5u64);
        let linear: Vec<Fr> = omega_powers.iter().map(|w| delta * w).collect();
        for (base, base_values) in [
            (Base::Zero, vec![Fr::ZERO; n]),
            (Base::Constant(Fr::from(3u64)), vec![Fr::from(3u64); n]),
            (Base::Linear(delta), linear),
        ] {
            // 0, a few (sparse path) and many (dense path) rows off the base.
            for changed in [0usize, 1, 3, n / 8, n / 8 + 1, n] {
                let mut values = base_values.clone();
                for (i, value) in values.iter_mut().enumerate().take(changed) {
                    *value += Fr::from(i as u64 * 7 + 1);
                }
                let coeffs = inverse_fft(&domain, &values).unwrap();
                let expected = evaluate_parallel(&coeffs, x);
                assert_eq!(lagrange.interpolate(&values, base), expected, "{changed}");
                assert_eq!(lagrange.interpolate_dense(&values), expected, "{changed}");
            }
        }
    }

    /// Rows sharing a limb: the lookup compares whole values, so it finds the row whose
    /// power it is, whether that row was indexed first or not, and no row for a value
    /// that only shares the limb.
    #[test]
    fn omega_index_is_exact_when_limbs_collide() {
        let omega_powers = powers(Fr::from(5u64), 4);
        let shared = limb(&omega_powers[1]);
        let index = OmegaIndex::new([(0, shared), (1, shared), (2, shared)].into_iter());
        assert_eq!(index.row_of(&omega_powers[1], &omega_powers), Some(1));
        assert_eq!(index.row_of(&omega_powers[2], &omega_powers), None);
        let index = OmegaIndex::new([(2, shared), (0, shared), (1, shared)].into_iter());
        assert_eq!(index.row_of(&omega_powers[1], &omega_powers), Some(1));
        let all = OmegaIndex::new(omega_powers.iter().enumerate().map(|(r, w)| (r, limb(w))));
        for (row, w) in omega_powers.iter().enumerate() {
            assert_eq!(all.row_of(w, &omega_powers), Some(row));
        }
        assert_eq!(all.row_of(&Fr::from(7u64), &omega_powers), None);
    }

    #[test]
    fn parallel_powers_agree_with_repeated_multiplication() {
        let x = Fr::from(0x9e37_79b9_u64);
        for len in [0usize, 1, 2, (1 << 14) - 1, 1 << 14, (1 << 14) + 1, 3 << 14] {
            let serial: Vec<Fr> = std::iter::successors(Some(Fr::ONE), |p| Some(*p * x))
                .take(len)
                .collect();
            assert_eq!(powers(x, len), serial, "len {len}");
        }
    }
}
