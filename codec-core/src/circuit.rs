//! What a decoder needs from the circuit: its constraint system, its fingerprint, and the
//! checked assembly of keys from decoded parts.
//!
//! halo2's own readers trust the counts and lengths they read; the assembly functions here
//! check every one against the circuit before building a key, so a decoded key always has the
//! shape its circuit implies.

use halo2_proofs::plonk::{Circuit, ConstraintSystem, ProvingKey, VerifyingKey};
use halo2_proofs::poly::{EvaluationDomain, Polynomial};
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{Fr, G1Affine};
use xxhash_rust::xxh3::xxh3_128;

use crate::error::{Error, Result};
use crate::header::Fingerprint;
use crate::options::{Limits, MAX_K};

/// Runs the circuit's `configure_with_params` on a fresh constraint system, as halo2's key
/// readers do.
pub fn configure<C: Circuit<Fr>>(circuit_params: C::Params) -> ConstraintSystem<Fr> {
    let mut cs = ConstraintSystem::default();
    let _config = C::configure_with_params(&mut cs, circuit_params);
    cs
}

/// The fingerprint of a configured constraint system (before selectors are turned into
/// fixed columns): a hash of the `Debug` form of its pinned representation.
pub fn fingerprint_of(cs: &ConstraintSystem<Fr>) -> Fingerprint {
    let pinned = format!("{:?}", cs.pinned());
    Fingerprint(xxh3_128(pinned.as_bytes()).to_le_bytes())
}

/// The fingerprint of circuit type `C` configured with `circuit_params`.
pub fn fingerprint<C: Circuit<Fr>>(circuit_params: C::Params) -> Fingerprint {
    fingerprint_of(&configure::<C>(circuit_params))
}

/// Checks `k` against the field's two-adicity and the caller's limit.
///
/// # Errors
///
/// [`Error::KOutOfRange`] when `k` is 0 or above `min(limits.max_k, 28)`.
pub fn check_k(k: u32, limits: &Limits) -> Result<()> {
    let max = limits.max_k.min(MAX_K);
    if k == 0 || k > max {
        return Err(Error::KOutOfRange { k, max });
    }
    Ok(())
}

/// Number of rows, `2^k`, for a `k` already checked by [`check_k`].
pub fn rows(k: u32) -> usize {
    1usize << k.min(MAX_K)
}

/// Fails with [`Error::Structure`] unless `found == expected`.
///
/// # Errors
///
/// [`Error::Structure`] naming `what`.
pub fn expect_count(what: &'static str, expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::Structure {
            what,
            expected: expected as u64,
            found: found as u64,
        })
    }
}

/// The verifying key's data, as every backend decodes it.
#[derive(Debug)]
pub struct VkParts {
    /// The circuit has `2^k` rows.
    pub k: u32,
    /// Whether the key was generated with selector compression.
    pub compress_selectors: bool,
    /// Commitments to the fixed columns (selector columns included).
    pub fixed_commitments: Vec<G1Affine>,
    /// Commitments to the permutation's sigma polynomials.
    pub permutation_commitments: Vec<G1Affine>,
    /// Selector activations, one vector of `2^k` per selector; empty without compression.
    pub selectors: Vec<Vec<bool>>,
}

impl VkParts {
    /// Extracts the parts of an existing verifying key (for encoding).
    ///
    /// halo2-axiom has no accessor for the selector activations, so they are read back from
    /// the tail of the key's own `RawBytes` serialization, where halo2 packs them 8 per byte.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] if halo2's serialization is shorter than its selectors (a bug).
    pub fn of(vk: &VerifyingKey<G1Affine>) -> Result<Self> {
        let k = vk.get_domain().k();
        let n = rows(k);
        let count = stored_selector_count(vk.cs(), vk.compress_selectors());
        let selectors = if count == 0 {
            Vec::new()
        } else {
            let bytes = vk.to_bytes(SerdeFormat::RawBytes);
            let per_selector = n.div_ceil(8);
            let tail = bytes
                .len()
                .checked_sub(count * per_selector)
                .and_then(|start| bytes.get(start..))
                .ok_or_else(|| {
                    Error::Malformed("verifying key shorter than its selectors".into())
                })?;
            tail.chunks_exact(per_selector)
                .map(|packed| unpack_bits(packed, n))
                .collect()
        };
        Ok(VkParts {
            k,
            compress_selectors: vk.compress_selectors(),
            fixed_commitments: vk.fixed_commitments().clone(),
            permutation_commitments: vk.permutation().commitments().clone(),
            selectors,
        })
    }
}

/// Unpacks `n` booleans stored 8 per byte, least significant bit first (halo2's packing).
pub fn unpack_bits(packed: &[u8], n: usize) -> Vec<bool> {
    packed
        .iter()
        .flat_map(|byte| (0..8).map(move |bit| (byte >> bit) & 1 == 1))
        .take(n)
        .collect()
}

/// Packs booleans 8 per byte, least significant bit first (halo2's packing).
pub fn pack_bits(bits: &[bool]) -> Vec<u8> {
    bits.chunks(8)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0u8, |byte, (i, bit)| byte | (u8::from(*bit) << i))
        })
        .collect()
}

/// How many selector vectors a verifying key of `cs` stores: one per selector when
/// `compress_selectors` is set, none otherwise.
pub fn stored_selector_count(cs: &ConstraintSystem<Fr>, compress_selectors: bool) -> usize {
    if compress_selectors {
        cs.num_selectors()
    } else {
        0
    }
}

/// Number of permutation columns of the circuit.
pub fn permutation_columns(cs: &ConstraintSystem<Fr>) -> usize {
    cs.permutation().get_columns().len()
}

/// Builds a verifying key from decoded parts and the circuit's freshly configured constraint
/// system, checking every count and length against the circuit first.
///
/// # Errors
///
/// [`Error::KOutOfRange`] for an impossible `k`, [`Error::Structure`] when a count or length
/// disagrees with the circuit (or the circuit needs more rows than `2^k`).
pub fn assemble_vk(
    cs: ConstraintSystem<Fr>,
    parts: VkParts,
    limits: &Limits,
) -> Result<VerifyingKey<G1Affine>> {
    let plan = VkPlan::new(cs, parts, limits)?;
    let domain = plan.build_domain();
    plan.finish(domain)
}

/// A verifying key checked against its circuit and waiting only for its evaluation domain:
/// the one part of a verifying key whose construction costs time and memory in `2^k`
/// (twiddle tables for `2^k` and the extended domain: about 0.9 s and 0.7 GiB at k = 22).
/// Splitting it off lets a decoder build the domain on one thread while it reads the
/// proving key's polynomials on others
/// ([`crate::DecodeContext::assemble_proving_while_reading`]).
#[derive(Debug)]
pub struct VkPlan {
    cs: ConstraintSystem<Fr>,
    k: u32,
    fixed_commitments: Vec<G1Affine>,
    permutation_commitments: Vec<G1Affine>,
    selectors: Vec<Vec<bool>>,
    compress_selectors: bool,
}

impl VkPlan {
    /// Checks `parts` against the circuit's freshly configured constraint system and
    /// converts its selectors as halo2's reader does.
    ///
    /// # Errors
    ///
    /// [`Error::KOutOfRange`] for an impossible `k`, [`Error::Structure`] when a count or
    /// length disagrees with the circuit (or the circuit needs more rows than `2^k`).
    pub fn new(cs: ConstraintSystem<Fr>, parts: VkParts, limits: &Limits) -> Result<Self> {
        check_k(parts.k, limits)?;
        let n = rows(parts.k);
        if n < cs.minimum_rows() {
            return Err(Error::Structure {
                what: "rows (2^k) against the circuit's minimum",
                expected: cs.minimum_rows() as u64,
                found: n as u64,
            });
        }
        expect_count(
            "selector vectors",
            stored_selector_count(&cs, parts.compress_selectors),
            parts.selectors.len(),
        )?;
        for selector in &parts.selectors {
            expect_count("selector length (2^k)", n, selector.len())?;
        }
        expect_count(
            "permutation commitments",
            permutation_columns(&cs),
            parts.permutation_commitments.len(),
        )?;

        let (cs, selectors) = if parts.compress_selectors {
            let (cs, _) = cs.compress_selectors(parts.selectors.clone());
            (cs, parts.selectors)
        } else {
            let placeholder = vec![vec![false]; cs.num_selectors()];
            let (cs, _) = cs.directly_convert_selectors_to_fixed(placeholder);
            (cs, Vec::new())
        };
        expect_count(
            "fixed commitments",
            cs.num_fixed_columns(),
            parts.fixed_commitments.len(),
        )?;
        // The domain's degree is the converted constraint system's.
        check_extended_k(parts.k, cs.degree())?;
        Ok(VkPlan {
            cs,
            k: parts.k,
            fixed_commitments: parts.fixed_commitments,
            permutation_commitments: parts.permutation_commitments,
            selectors,
            compress_selectors: parts.compress_selectors,
        })
    }

    /// Builds the evaluation domain the finished key needs (halo2's
    /// `EvaluationDomain::new`, whose assertion on the extended domain [`VkPlan::new`]
    /// already checked).
    pub fn build_domain(&self) -> EvaluationDomain<Fr> {
        EvaluationDomain::new(self.cs.degree() as u32, self.k)
    }

    /// Builds the evaluation domain on a second thread while `work` runs on this one (given
    /// the proving key's shape), then finishes the verifying key. Both take most of a load's
    /// time at large `k` and neither waits for the other: a decoder reading the polynomials
    /// in `work` hides the domain's construction behind the reads.
    ///
    /// The domain's memory is allocated at once: call this only when the input already
    /// justifies `2^k`-sized memory (for example, when the payload holds the polynomials'
    /// bytes, [`PayloadReader::ensure_available`](crate::PayloadReader::ensure_available)).
    ///
    /// # Errors
    ///
    /// `work`'s error (the domain is still built, then dropped) and those of
    /// [`VkPlan::finish`]. Should building the domain panic (which [`VkPlan::new`]'s checks
    /// rule out), the panic is reported as [`Error::Malformed`], not propagated.
    pub fn finish_while<T>(
        self,
        work: impl FnOnce(&PkShape) -> Result<T>,
    ) -> Result<(VerifyingKey<G1Affine>, T)> {
        let shape = self.pk_shape();
        let (domain, done) = std::thread::scope(|scope| {
            let domain = scope.spawn(|| self.build_domain());
            let done = work(&shape);
            (domain.join(), done)
        });
        let done = done?;
        let domain = domain.map_err(|_| {
            Error::Malformed(format!(
                "halo2's EvaluationDomain::new panicked for k = {}",
                self.k
            ))
        })?;
        Ok((self.finish(domain)?, done))
    }

    /// The proving key's shape this verifying key implies.
    pub fn pk_shape(&self) -> PkShape {
        PkShape {
            rows: rows(self.k),
            fixed_columns: self.cs.num_fixed_columns(),
            permutation_columns: permutation_columns(&self.cs),
        }
    }

    /// Builds the verifying key around `domain`, which should come from
    /// [`VkPlan::build_domain`] of this plan.
    ///
    /// # Errors
    ///
    /// [`Error::Structure`] if `domain` was built for another `k` or constraint degree (a
    /// caller's bug: such a key would not verify).
    pub fn finish(self, domain: EvaluationDomain<Fr>) -> Result<VerifyingKey<G1Affine>> {
        expect_count("evaluation domain k", self.k as usize, domain.k() as usize)?;
        expect_count(
            "evaluation domain quotient degree",
            self.cs.degree().max(1) - 1,
            domain.get_quotient_poly_degree(),
        )?;
        Ok(VerifyingKey::from_parts(
            domain,
            self.fixed_commitments,
            halo2_proofs::plonk::permutation::VerifyingKey::from_commitments(
                self.permutation_commitments,
            ),
            self.cs,
            self.selectors,
            self.compress_selectors,
        ))
    }
}

/// `EvaluationDomain::new` asserts that the extended domain fits the field's two-adicity;
/// check it first so that a large `k` is an error, not a panic.
fn check_extended_k(k: u32, degree: usize) -> Result<()> {
    let quotient_degree = (degree.max(1) - 1) as u128;
    let n = 1u128 << k.min(MAX_K);
    let mut extended_k = k;
    while (1u128 << extended_k) < n * quotient_degree {
        extended_k += 1;
        if extended_k > MAX_K {
            return Err(Error::KOutOfRange { k, max: MAX_K });
        }
    }
    Ok(())
}

/// The proving key's polynomial data, as every backend decodes it (values, not yet checked
/// against the circuit).
#[derive(Debug, Default)]
pub struct PkParts {
    /// Lagrange basis polynomial for the first row, coefficient form.
    pub l0: Vec<Fr>,
    /// Lagrange basis polynomial for the last usable row, coefficient form.
    pub l_last: Vec<Fr>,
    /// Indicator of the active rows, coefficient form.
    pub l_active_row: Vec<Fr>,
    /// Fixed columns, Lagrange form.
    pub fixed_values: Vec<Vec<Fr>>,
    /// Fixed columns, coefficient form.
    pub fixed_polys: Vec<Vec<Fr>>,
    /// Permutation sigma columns, Lagrange form.
    pub permutation_values: Vec<Vec<Fr>>,
    /// Permutation sigma columns, coefficient form.
    pub permutation_polys: Vec<Vec<Fr>>,
}

/// The polynomial counts a proving key of `vk` must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PkShape {
    /// Length of every polynomial (`2^k`).
    pub rows: usize,
    /// Number of fixed columns (after selectors became fixed columns).
    pub fixed_columns: usize,
    /// Number of permutation columns.
    pub permutation_columns: usize,
}

impl PkShape {
    /// The shape implied by a verifying key.
    pub fn of(vk: &VerifyingKey<G1Affine>) -> Self {
        PkShape {
            rows: rows(vk.get_domain().k()),
            fixed_columns: vk.cs().num_fixed_columns(),
            permutation_columns: permutation_columns(vk.cs()),
        }
    }

    /// Total number of field elements in the proving key's polynomials.
    pub fn total_elements(&self) -> u128 {
        (3 + 2 * self.fixed_columns as u128 + 2 * self.permutation_columns as u128)
            * self.rows as u128
    }
}

/// A proving key's polynomials in halo2's serialization order: `l0`, `l_last`,
/// `l_active_row`, the fixed values, the fixed polynomials, the permutation's values and
/// polynomials.
pub fn polynomials(pk: &ProvingKey<G1Affine>) -> impl Iterator<Item = &[Fr]> {
    let permutation = pk.permutation();
    [pk.l0(), pk.l_last(), pk.l_active_row()]
        .into_iter()
        .map(|p| p.values())
        .chain(pk.fixed_values().iter().map(|p| p.values()))
        .chain(pk.fixed_polys().iter().map(|p| p.values()))
        .chain(permutation.permutations().iter().map(|p| p.values()))
        .chain(permutation.polys().iter().map(|p| p.values()))
}

/// Builds a proving key from its verifying key and decoded polynomials, checking every count
/// and length against the shape the verifying key implies.
///
/// # Errors
///
/// [`Error::Structure`] when a polynomial count or length disagrees with the circuit.
pub fn assemble_pk(vk: VerifyingKey<G1Affine>, parts: PkParts) -> Result<ProvingKey<G1Affine>> {
    let shape = PkShape::of(&vk);
    for (what, poly) in [
        ("l0 length", &parts.l0),
        ("l_last length", &parts.l_last),
        ("l_active_row length", &parts.l_active_row),
    ] {
        expect_count(what, shape.rows, poly.len())?;
    }
    for (what, polys, count) in [
        (
            "fixed_values count",
            &parts.fixed_values,
            shape.fixed_columns,
        ),
        ("fixed_polys count", &parts.fixed_polys, shape.fixed_columns),
        (
            "permutation values count",
            &parts.permutation_values,
            shape.permutation_columns,
        ),
        (
            "permutation polys count",
            &parts.permutation_polys,
            shape.permutation_columns,
        ),
    ] {
        expect_count(what, count, polys.len())?;
        for poly in polys {
            expect_count("polynomial length (2^k)", shape.rows, poly.len())?;
        }
    }
    Ok(ProvingKey::from_parts(
        vk,
        Polynomial::new(parts.l0),
        Polynomial::new(parts.l_last),
        Polynomial::new(parts.l_active_row),
        into_polys(parts.fixed_values),
        into_polys(parts.fixed_polys),
        halo2_proofs::plonk::permutation::ProvingKey::from_parts(
            into_polys(parts.permutation_values),
            into_polys(parts.permutation_polys),
        ),
    ))
}

fn into_polys<B>(polys: Vec<Vec<Fr>>) -> Vec<Polynomial<Fr, B>> {
    polys.into_iter().map(Polynomial::new).collect()
}
