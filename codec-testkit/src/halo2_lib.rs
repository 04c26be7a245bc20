//! A circuit built the way keycodec's users build theirs: halo2-lib's `BaseCircuitBuilder`
//! (halo2-base 0.5.5, on the same halo2-axiom), filled with Poseidon hashes whose inputs are
//! range-checked to 64 bits through the lookup table. Its key has tens of advice columns (each
//! with its gate selector in a fixed column and a permutation column), a lookup advice column,
//! the range table, and the Poseidon constants in a fixed column: dense, varied polynomials,
//! unlike `StandardPlonk`'s mostly zero ones.
//!
//! The circuit fills `advice` columns of `2^k` rows, so its key grows with `2^k` at a
//! constant shape (about 71 MB at k = 14 for 30 columns, doubling with each `k`).

use halo2_base::gates::circuit::builder::BaseCircuitBuilder;
use halo2_base::gates::circuit::{BaseCircuitParams, CircuitBuilderStage};
use halo2_base::gates::flex_gate::MultiPhaseThreadBreakPoints;
use halo2_base::gates::{RangeChip, RangeInstructions};
use halo2_base::poseidon::hasher::spec::OptimizedPoseidonSpec;
use halo2_base::poseidon::hasher::PoseidonHasher;
use halo2_base::Context;
use halo2curves::bn256::Fr;

/// The circuit type: halo2-lib's builder itself, as users key it. Loading its key needs its
/// [`BaseCircuitParams`] (`circuit.params()`), as halo2's `ProvingKey::read` does.
pub type Halo2LibCircuit = BaseCircuitBuilder<Fr>;

/// Rows halo2-lib leaves for blinding factors (its testers' default).
const UNUSABLE_ROWS: usize = 9;

/// Bits each hashed input is range-checked to.
const RANGE_BITS: usize = 64;

/// The circuit at `k` with about `advice` advice columns, ready for keygen (witness values
/// unknown, configuration computed).
pub fn halo2_lib_keygen(k: u32, advice: usize) -> Halo2LibCircuit {
    let mut builder = BaseCircuitBuilder::from_stage(CircuitBuilderStage::Keygen)
        .use_k(k as usize)
        .use_lookup_bits(lookup_bits(k));
    fill(&mut builder, k, advice);
    builder.calculate_params(Some(UNUSABLE_ROWS));
    builder
}

/// The same circuit for proving, with witnesses, laid out as keygen laid it out: its
/// configuration (`keygen.config_params`) and break points (`keygen.break_points()`, known
/// once keygen has run on it).
pub fn halo2_lib_prover(
    config: BaseCircuitParams,
    break_points: MultiPhaseThreadBreakPoints,
    advice: usize,
) -> Halo2LibCircuit {
    let k = u32::try_from(config.k).unwrap_or(u32::MAX);
    let mut builder = BaseCircuitBuilder::prover(config, break_points);
    fill(&mut builder, k, advice);
    builder
}

/// halo2-lib's usual table: `2^(k-1)` rows.
fn lookup_bits(k: u32) -> usize {
    (k as usize).saturating_sub(1).max(1)
}

/// Hashes pairs of witnesses with Poseidon (T = 3, rate 2, 8 full and 57 partial rounds),
/// range-checking the first of each pair, until the cells fill `advice` columns of usable rows.
fn fill(builder: &mut Halo2LibCircuit, k: u32, advice: usize) {
    let usable = (1usize << k).saturating_sub(UNUSABLE_ROWS + 1);
    let target = usable * advice.max(1);
    let range: RangeChip<Fr> = builder.range_chip();
    let ctx: &mut Context<Fr> = builder.main(0);
    let mut hasher = PoseidonHasher::<Fr, 3, 2>::new(OptimizedPoseidonSpec::new::<8, 57, 0>());
    hasher.initialize_consts(ctx, range.gate());
    let mut state = 0x6b65_7963_6f64_6563_u64;
    let mut previous = ctx.load_zero();
    while ctx.advice.len() < target {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let input = ctx.load_witness(Fr::from(state));
        range.range_check(ctx, input, RANGE_BITS);
        previous = hasher.hash_fix_len_array(ctx, range.gate(), &[input, previous]);
    }
}
