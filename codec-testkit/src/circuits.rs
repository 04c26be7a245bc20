//! Test circuits: the seed's `StandardPlonk`, and a circuit with a lookup and
//! several simple selectors (so that selector compression has work to do).

use halo2_proofs::circuit::{Layouter, SimpleFloorPlanner, Value};
use halo2_proofs::plonk::{
    Advice, Circuit, Column, ConstraintSystem, Error, Fixed, Instance, Selector, TableColumn,
};
use halo2_proofs::poly::Rotation;
use halo2curves::bn256::Fr;

/// Columns of [`StandardPlonk`].
#[derive(Clone, Copy, Debug)]
pub struct StandardPlonkConfig {
    a: Column<Advice>,
    b: Column<Advice>,
    c: Column<Advice>,
    q_a: Column<Fixed>,
    q_b: Column<Fixed>,
    q_c: Column<Fixed>,
    q_ab: Column<Fixed>,
    constant: Column<Fixed>,
}

/// The circuit of halo2-axiom's `serialization` example and of the seed measurements:
/// `q_a·a + q_b·b + q_c·c + q_ab·a·b + constant + instance = 0`, with copy constraints.
///
/// Its public input is the witness itself: `instances = [[self.0]]`.
#[derive(Clone, Debug, Default)]
pub struct StandardPlonk(pub Fr);

impl StandardPlonk {
    /// The instance column values a proof of this circuit uses.
    pub fn instances(&self) -> Vec<Vec<Fr>> {
        vec![vec![self.0]]
    }
}

impl Circuit<Fr> for StandardPlonk {
    type Config = StandardPlonkConfig;
    type FloorPlanner = SimpleFloorPlanner;
    type Params = ();

    fn without_witnesses(&self) -> Self {
        Self::default()
    }

    fn configure(meta: &mut ConstraintSystem<Fr>) -> Self::Config {
        let [a, b, c] = [(); 3].map(|_| meta.advice_column());
        let [q_a, q_b, q_c, q_ab, constant] = [(); 5].map(|_| meta.fixed_column());
        let instance = meta.instance_column();
        for column in [a, b, c] {
            meta.enable_equality(column);
        }
        meta.create_gate(
            "q_a·a + q_b·b + q_c·c + q_ab·a·b + constant + instance = 0",
            |meta| {
                let [a, b, c] = [a, b, c].map(|column| meta.query_advice(column, Rotation::cur()));
                let [q_a, q_b, q_c, q_ab, constant] = [q_a, q_b, q_c, q_ab, constant]
                    .map(|column| meta.query_fixed(column, Rotation::cur()));
                let instance = meta.query_instance(instance, Rotation::cur());
                Some(
                    q_a * a.clone()
                        + q_b * b.clone()
                        + q_c * c
                        + q_ab * a * b
                        + constant
                        + instance,
                )
            },
        );
        StandardPlonkConfig {
            a,
            b,
            c,
            q_a,
            q_b,
            q_c,
            q_ab,
            constant,
        }
    }

    fn synthesize(
        &self,
        config: Self::Config,
        mut layouter: impl Layouter<Fr>,
    ) -> Result<(), Error> {
        layouter.assign_region(
            || "",
            |mut region| {
                region.assign_advice(config.a, 0, Value::known(self.0));
                region.assign_fixed(config.q_a, 0, -Fr::one());
                region.assign_advice(config.a, 1, Value::known(-Fr::from(5u64)));
                for (idx, column) in (1..).zip([
                    config.q_a,
                    config.q_b,
                    config.q_c,
                    config.q_ab,
                    config.constant,
                ]) {
                    region.assign_fixed(column, 1, Fr::from(idx as u64));
                }
                let a = region.assign_advice(config.a, 2, Value::known(Fr::one()));
                a.copy_advice(&mut region, config.b, 3);
                a.copy_advice(&mut region, config.c, 4);
                Ok(())
            },
        )
    }
}

/// Columns of [`LookupCircuit`].
#[derive(Clone, Copy, Debug)]
pub struct LookupConfig {
    a: Column<Advice>,
    b: Column<Advice>,
    c: Column<Advice>,
    q_mul: Selector,
    q_add: Selector,
    q_range: Selector,
    table: TableColumn,
    instance: Column<Instance>,
}

/// Size of [`LookupCircuit`]'s range table.
pub const LOOKUP_TABLE_SIZE: u64 = 16;

/// A circuit with a range-check lookup (`a` in `0..16`), two gates behind simple selectors
/// (`a·b = c`, `a + b = c`) that selector compression can merge, a chain of copy constraints
/// and a public output. Keys for it are generated with selector compression on.
///
/// It computes `((x·3) + 4) + 5` from `x = self.0` and exposes the result as its instance.
#[derive(Clone, Debug, Default)]
pub struct LookupCircuit(pub u64);

impl LookupCircuit {
    fn steps(&self) -> [(u64, u64, u64, bool); 3] {
        let x = self.0;
        let m = x * 3;
        let s = m + 4;
        [(x, 3, m, true), (m, 4, s, false), (s, 5, s + 5, false)]
    }

    /// The instance column values a proof of this circuit uses.
    pub fn instances(&self) -> Vec<Vec<Fr>> {
        let output = self.steps().last().map_or(0, |step| step.2);
        vec![vec![Fr::from(output)]]
    }
}

impl Circuit<Fr> for LookupCircuit {
    type Config = LookupConfig;
    type FloorPlanner = SimpleFloorPlanner;
    type Params = ();

    fn without_witnesses(&self) -> Self {
        Self::default()
    }

    fn configure(meta: &mut ConstraintSystem<Fr>) -> Self::Config {
        let [a, b, c] = [(); 3].map(|_| meta.advice_column());
        let q_mul = meta.selector();
        let q_add = meta.selector();
        let q_range = meta.complex_selector();
        let table = meta.lookup_table_column();
        let instance = meta.instance_column();
        for column in [a, b, c] {
            meta.enable_equality(column);
        }
        meta.enable_equality(instance);
        meta.create_gate("mul", |meta| {
            let q = meta.query_selector(q_mul);
            let [a, b, c] = [a, b, c].map(|column| meta.query_advice(column, Rotation::cur()));
            Some(q * (a * b - c))
        });
        meta.create_gate("add", |meta| {
            let q = meta.query_selector(q_add);
            let [a, b, c] = [a, b, c].map(|column| meta.query_advice(column, Rotation::cur()));
            Some(q * (a + b - c))
        });
        meta.lookup("range", |meta| {
            let q = meta.query_selector(q_range);
            let a = meta.query_advice(a, Rotation::cur());
            vec![(q * a, table)]
        });
        LookupConfig {
            a,
            b,
            c,
            q_mul,
            q_add,
            q_range,
            table,
            instance,
        }
    }

    fn synthesize(
        &self,
        config: Self::Config,
        mut layouter: impl Layouter<Fr>,
    ) -> Result<(), Error> {
        layouter.assign_table(
            || "range table",
            |mut table| {
                for value in 0..LOOKUP_TABLE_SIZE {
                    table.assign_cell(
                        || "range",
                        config.table,
                        value as usize,
                        || Value::known(Fr::from(value)),
                    )?;
                }
                Ok(())
            },
        )?;
        let output = layouter.assign_region(
            || "chain",
            |mut region| {
                let mut previous = None;
                let mut output = None;
                for (row, (a, b, c, is_mul)) in self.steps().into_iter().enumerate() {
                    let selector = if is_mul { config.q_mul } else { config.q_add };
                    selector.enable(&mut region, row)?;
                    if a < LOOKUP_TABLE_SIZE {
                        config.q_range.enable(&mut region, row)?;
                    }
                    let a_cell = region.assign_advice(config.a, row, Value::known(Fr::from(a)));
                    if let Some(previous) = previous {
                        region.constrain_equal(previous, a_cell.cell());
                    }
                    region.assign_advice(config.b, row, Value::known(Fr::from(b)));
                    let c_cell = region.assign_advice(config.c, row, Value::known(Fr::from(c)));
                    previous = Some(c_cell.cell());
                    output = Some(c_cell.cell());
                }
                output.ok_or(Error::Synthesis)
            },
        )?;
        layouter.constrain_instance(output, config.instance, 0);
        Ok(())
    }
}

/// Columns of [`DenseCircuit`].
#[derive(Clone, Copy, Debug)]
pub struct DenseConfig {
    a: Column<Advice>,
    b: Column<Advice>,
    f: Column<Fixed>,
}

/// Rows [`DenseCircuit::default`] fills (it needs `k >= 8`).
pub const DENSE_ROWS: usize = 200;

/// A circuit whose fixed column and permutation are dense: a full-size pseudo-random constant
/// in every used row of its fixed column, and one copy chain through every used cell of both
/// advice columns. The worst case for a compact layout. Gate: `f · (a - b) = 0`.
#[derive(Clone, Debug)]
pub struct DenseCircuit {
    /// Rows filled, from row 0 (at most the circuit's usable rows at its `k`).
    pub rows: usize,
}

impl Default for DenseCircuit {
    fn default() -> Self {
        DenseCircuit { rows: DENSE_ROWS }
    }
}

impl DenseCircuit {
    /// The pseudo-random, full-size constant of row `row`.
    pub fn constant(row: usize) -> Fr {
        use halo2_proofs::halo2curves::ff::Field;
        Fr::from(row as u64 + 2).pow_vartime([0x9e37_79b9_7f4a_7c15])
    }
}

impl Circuit<Fr> for DenseCircuit {
    type Config = DenseConfig;
    type FloorPlanner = SimpleFloorPlanner;
    type Params = ();

    fn without_witnesses(&self) -> Self {
        self.clone()
    }

    fn configure(meta: &mut ConstraintSystem<Fr>) -> Self::Config {
        let [a, b] = [(); 2].map(|_| meta.advice_column());
        let f = meta.fixed_column();
        meta.enable_equality(a);
        meta.enable_equality(b);
        meta.create_gate("dense", |meta| {
            let f = meta.query_fixed(f, Rotation::cur());
            let [a, b] = [a, b].map(|column| meta.query_advice(column, Rotation::cur()));
            Some(f * (a - b))
        });
        DenseConfig { a, b, f }
    }

    fn synthesize(
        &self,
        config: Self::Config,
        mut layouter: impl Layouter<Fr>,
    ) -> Result<(), Error> {
        layouter.assign_region(
            || "dense",
            |mut region| {
                let value = Value::known(Fr::from(7u64));
                let mut previous = None;
                for row in 0..self.rows {
                    region.assign_fixed(config.f, row, Self::constant(row));
                    let a = region.assign_advice(config.a, row, value);
                    let b = region.assign_advice(config.b, row, value);
                    region.constrain_equal(a.cell(), b.cell());
                    if let Some(previous) = previous {
                        region.constrain_equal(previous, a.cell());
                    }
                    previous = Some(b.cell());
                }
                Ok(())
            },
        )
    }
}
