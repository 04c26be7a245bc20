//! Checked assembly of halo2 keys from decoded parts.
//!
//! halo2's own readers trust the counts and lengths they read; the functions here check
//! every one against the circuit before building a key, so a decoded key always has the shape
//! its circuit implies. The verifying key's evaluation domain, the one part whose
//! construction costs time and memory in `2^k`, is built last ([`VkPlan`]), or beside the
//! proving key's polynomial reads ([`VkPlan::finish_while`]).

use halo2_proofs::plonk::{ConstraintSystem, ProvingKey, VerifyingKey};
use halo2_proofs::poly::{EvaluationDomain, Polynomial};
use halo2curves::bn256::{Fr, G1Affine};

use crate::circuit::{check_k, expect_count, permutation_columns, rows, stored_selector_count};
use crate::error::{Error, Result};
use crate::options::{Limits, MAX_K};
use crate::pk_parts::{PkParts, PkShape};
use crate::vk_parts::{packed_selector_len, unpack_bits, VkParts};

/// Runs `work` with its rayon calls (halo2's `parallelize`, which builds an evaluation
/// domain's twiddles) on a pool of its own of `threads` threads, not on the pool of the
/// thread that calls it or rayon's global one: how a load builds a key's evaluation domain
/// beside its reads ([`VkPlan::finish_while`]). A domain built beside the polynomials' reads
/// otherwise sends its jobs to the pool the reads keep busy, and they wait until every read
/// is done: the domain was built after the reads, its one-threaded parts leaving the other
/// cores idle. Without a pool (no thread could be started), `work` runs as called.
pub fn on_a_pool_of_its_own<T: Send>(threads: usize, work: impl FnOnce() -> T + Send) -> T {
    match rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|index| format!("keycodec-domain-{index}"))
        .build()
    {
        Ok(pool) => pool.install(work),
        Err(_) => work(),
    }
}

/// Builds a verifying key from decoded parts and the circuit's freshly configured constraint
/// system, checking every count and length against the circuit first.
///
/// # Errors
///
/// As [`VkPlan::new`].
pub(crate) fn assemble_vk(
    cs: ConstraintSystem<Fr>,
    parts: VkParts,
    limits: &Limits,
) -> Result<VerifyingKey<G1Affine>> {
    let plan = VkPlan::new(cs, parts, limits)?;
    // A verifying key's bytes justify none of its domain's memory.
    plan.check_budget("a verifying key's evaluation domain", 0, 0)?;
    let domain = plan.build_domain();
    plan.finish(domain)
}

/// Bytes of memory halo2-axiom's `EvaluationDomain::new(degree, k)` holds at its peak: it
/// keeps forward and inverse twiddles for every FFT size from `2^k` to the extended domain
/// (twice the sum of those sizes in field elements) and builds each with a scratch vector of
/// its size, so at most three times that sum (measured: 2.00x kept and 2.53x to 3.00x at
/// the peak, k = 10 to 20, degrees 2 to 9).
pub(crate) fn domain_memory(k: u32, degree: usize) -> u64 {
    let quotient_degree = (degree.max(1) - 1) as u128;
    let n = 1u128 << k.min(MAX_K);
    let mut extended_k = k.min(MAX_K);
    let mut sizes = n;
    while (1u128 << extended_k) < n * quotient_degree && extended_k < MAX_K {
        extended_k += 1;
        sizes += 1u128 << extended_k;
    }
    let bytes = 3 * sizes * crate::field::FR_BYTES as u128 + (1 << 20);
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// A verifying key checked against its circuit and waiting only for its evaluation domain
/// (twiddle tables for `2^k` and the extended domain). Splitting it off lets a decoder build
/// the domain on one thread while it reads the proving key's polynomials on others.
#[derive(Debug)]
pub struct VkPlan {
    cs: ConstraintSystem<Fr>,
    memory_budget: u64,
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
        for packed in &parts.selectors {
            expect_count(
                "packed selector bytes",
                packed_selector_len(parts.k),
                packed.len(),
            )?;
        }
        expect_count(
            "permutation commitments",
            permutation_columns(&cs),
            parts.permutation_commitments.len(),
        )?;

        let (cs, selectors) = if parts.compress_selectors {
            let selectors: Vec<Vec<bool>> = parts
                .selectors
                .iter()
                .map(|packed| unpack_bits(packed, n))
                .collect();
            let (cs, _) = cs.compress_selectors(selectors.clone());
            (cs, selectors)
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
            memory_budget: limits.memory_budget,
            k: parts.k,
            fixed_commitments: parts.fixed_commitments,
            permutation_commitments: parts.permutation_commitments,
            selectors,
            compress_selectors: parts.compress_selectors,
        })
    }

    /// Bytes of memory building the evaluation domain takes at its peak.
    pub fn domain_memory(&self) -> u64 {
        domain_memory(self.k, self.cs.degree())
    }

    /// Fails unless what finishing this key costs beyond what the input justifies fits the
    /// memory budget ([`Limits::memory_budget`]): the domain plus `extra` bytes the caller
    /// will allocate (recomputed polynomials), less `justified`, the bytes of the input
    /// that are present (a proving key's polynomials in a file).
    ///
    /// # Errors
    ///
    /// [`Error::OverBudget`] naming `what`.
    pub fn check_budget(&self, what: &'static str, justified: u64, extra: u64) -> Result<()> {
        let requested = self
            .domain_memory()
            .saturating_add(extra)
            .saturating_sub(justified);
        if requested > self.memory_budget {
            return Err(Error::OverBudget {
                what,
                requested,
                budget: self.memory_budget,
            });
        }
        Ok(())
    }

    /// Builds the evaluation domain the finished key needs (halo2's
    /// `EvaluationDomain::new`, whose assertion on the extended domain [`VkPlan::new`]
    /// already checked).
    pub fn build_domain(&self) -> EvaluationDomain<Fr> {
        EvaluationDomain::new(self.cs.degree() as u32, self.k)
    }

    /// Builds the evaluation domain on a second thread, its twiddles on a rayon pool of its
    /// own as large as the caller's, while `work` runs on this one (given the proving key's
    /// shape), then finishes the verifying key. Both take most of a load's time at large `k`
    /// and neither waits for the other.
    ///
    /// The domain's memory is allocated at once: call this only when the input already
    /// justifies `2^k`-sized memory (for example, when the payload holds the polynomials'
    /// bytes).
    ///
    /// # Errors
    ///
    /// `work`'s error (the domain is still built, then dropped) and those of
    /// [`VkPlan::finish`]. Should building the domain panic (which [`VkPlan::new`]'s checks
    /// rule out), the panic is reported as [`Error::Internal`], not propagated. When no
    /// thread can be started, the domain is built after `work`, on this thread.
    pub fn finish_while<T>(
        self,
        work: impl FnOnce(&PkShape) -> Result<T>,
    ) -> Result<(VerifyingKey<G1Affine>, T)> {
        let shape = self.pk_shape();
        let threads = rayon::current_num_threads();
        let (domain, done) = std::thread::scope(|scope| {
            let domain = std::thread::Builder::new()
                .name("keycodec-domain".into())
                .spawn_scoped(scope, || {
                    on_a_pool_of_its_own(threads, || self.build_domain())
                });
            let done = work(&shape);
            (domain.map(|thread| thread.join()), done)
        });
        let done = done?;
        let domain = match domain {
            Ok(joined) => joined.map_err(|_| {
                Error::Internal(format!(
                    "halo2's EvaluationDomain::new panicked for k = {}",
                    self.k
                ))
            })?,
            Err(_) => self.build_domain(),
        };
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

/// Builds a proving key from its verifying key and decoded polynomials, checking every count
/// and length against the shape the verifying key implies.
///
/// # Errors
///
/// [`Error::Structure`] when a polynomial count or length disagrees with the circuit.
pub fn assemble_pk(vk: VerifyingKey<G1Affine>, parts: PkParts) -> Result<ProvingKey<G1Affine>> {
    check_shape(&parts, &PkShape::of(&vk))?;
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

/// Checks every polynomial count and length of `parts` against `shape`.
///
/// # Errors
///
/// [`Error::Structure`] naming the first that disagrees.
pub(crate) fn check_shape(parts: &PkParts, shape: &PkShape) -> Result<()> {
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
    Ok(())
}

fn into_polys<B>(polys: Vec<Vec<Fr>>) -> Vec<Polynomial<Fr, B>> {
    polys.into_iter().map(Polynomial::new).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::on_a_pool_of_its_own;

    /// Work on a pool of its own finishes while every thread of rayon's global pool, where
    /// the reads run, is held: its rayon calls do not wait for that pool.
    #[test]
    fn work_on_a_pool_of_its_own_does_not_wait_for_the_global_pool() {
        let threads = rayon::current_num_threads();
        let (started, all_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let released = std::sync::Arc::new(std::sync::Mutex::new(released));
        for _ in 0..threads {
            let (started, released) = (started.clone(), released.clone());
            rayon::spawn(move || {
                let _ = started.send(());
                // Each held thread waits for the release (or the sender's drop).
                let _ = released.lock().map(|released| released.recv());
            });
        }
        for _ in 0..threads {
            all_started
                .recv_timeout(Duration::from_secs(60))
                .expect("every thread of the global pool held");
        }
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            let sum = on_a_pool_of_its_own(2, || {
                let (a, b) = rayon::join(|| 1, || 2);
                let mut more = 0;
                rayon::scope(|scope| scope.spawn(|_| more = 3));
                a + b + more
            });
            let _ = done.send(sum);
        });
        let sum = finished.recv_timeout(Duration::from_secs(20));
        for _ in 0..threads {
            let _ = release.send(());
        }
        assert_eq!(sum, Ok(6), "the work waited for the held global pool");
    }
}
