//! The circuit a record describes, replayed through halo2's public `ConstraintSystem` API.

use halo2_proofs::circuit::{Layouter, SimpleFloorPlanner};
use halo2_proofs::halo2curves::ff::{Field, PrimeField};
use halo2_proofs::plonk::{
    Advice, Any, Challenge, Circuit, Column, ConstraintSystem, Expression, FirstPhase, Fixed,
    Instance, SecondPhase, Selector, ThirdPhase, VirtualCells,
};
use halo2_proofs::poly::Rotation;
use halo2curves::bn256::Fr;

use super::{malformed, CircuitRecord, ColumnRef, Node, Query, Step, MAX_COUNT, MAX_DEPTH};
use crate::error::Result;

impl CircuitRecord {
    /// Every reference checked, so that a replay cannot make halo2 panic or allocate without
    /// bound (see [`CircuitRecord::from_bytes`]).
    pub(super) fn check(&self) -> Result<()> {
        let counts = [
            self.advice_phases.len(),
            self.fixed as usize,
            self.instance as usize,
            self.selectors.len(),
            self.challenge_phases.len(),
        ];
        if counts.iter().any(|&n| n > MAX_COUNT) {
            return Err(malformed("a count of columns, selectors or challenges"));
        }
        for (i, &phase) in self.advice_phases.iter().enumerate() {
            let after_previous = phase == 0
                || self
                    .advice_phases
                    .get(..i)
                    .is_some_and(|before| before.contains(&(phase - 1)));
            if phase > 2 || !after_previous {
                return Err(malformed("an advice column's phase"));
            }
        }
        for &phase in &self.challenge_phases {
            if phase > 2 || !self.advice_phases.contains(&phase) {
                return Err(malformed("a challenge's phase"));
            }
        }
        let (advice, fixed, instance) = self.columns();
        let column_exists = |column: &ColumnRef| match *column {
            ColumnRef::Advice(i) => (i as usize) < advice,
            ColumnRef::Fixed(i) => (i as usize) < fixed,
            ColumnRef::Instance(i) => (i as usize) < instance,
        };
        let expression = |nodes: &[Node]| -> Result<()> {
            // The tree's depth below each value on the stack.
            let mut depths: Vec<usize> = Vec::new();
            for node in nodes {
                let (takes, exists) = match *node {
                    Node::Constant(bytes) | Node::Scaled(bytes) => (
                        usize::from(matches!(node, Node::Scaled(_))),
                        bool::from(Fr::from_repr(bytes).is_some()),
                    ),
                    Node::Selector(i) => (0, (i as usize) < self.selectors.len()),
                    Node::Fixed(i, _) => (0, column_exists(&ColumnRef::Fixed(i))),
                    Node::Advice(i, _) => (0, column_exists(&ColumnRef::Advice(i))),
                    Node::Instance(i, _) => (0, column_exists(&ColumnRef::Instance(i))),
                    Node::Challenge(i) => (0, (i as usize) < self.challenge_phases.len()),
                    Node::Negated => (1, true),
                    Node::Sum | Node::Product => (2, true),
                };
                if !exists {
                    return Err(malformed("an expression's reference"));
                }
                let operands = depths
                    .len()
                    .checked_sub(takes)
                    .ok_or_else(|| malformed("an expression"))?;
                let below = depths.drain(operands..).max().unwrap_or(0);
                if below >= MAX_DEPTH {
                    return Err(malformed("an expression (too deep)"));
                }
                depths.push(below + 1);
            }
            if depths.len() == 1 {
                Ok(())
            } else {
                Err(malformed("an expression"))
            }
        };
        let queries = |queries: &[Query]| -> Result<()> {
            if queries.iter().all(|(column, _)| column_exists(column)) {
                Ok(())
            } else {
                Err(malformed("a query's column"))
            }
        };
        for step in &self.steps {
            match step {
                Step::Gate {
                    queries: made,
                    constraints,
                    ..
                } => {
                    queries(made)?;
                    if constraints.is_empty() {
                        return Err(malformed("a gate without a constraint"));
                    }
                    for (_, nodes) in constraints {
                        expression(nodes)?;
                    }
                }
                Step::Lookup {
                    queries: made,
                    pairs,
                    ..
                } => {
                    queries(made)?;
                    for (input, table) in pairs {
                        expression(input)?;
                        expression(table)?;
                    }
                }
                Step::Equality(column) => {
                    if !column_exists(column) {
                        return Err(malformed("an equality column"));
                    }
                }
            }
        }
        if self.constants.iter().any(|&i| i >= self.fixed) {
            return Err(malformed("a constants column"));
        }
        Ok(())
    }
}

/// The circuit a [`CircuitRecord`] describes: its `configure_with_params` replays the record
/// (its parameters), so that any key recorded loads with it, no circuit code needed. It has
/// no witness: `synthesize` fails (a key cannot be generated or a proof made with it).
#[derive(Clone, Debug, Default)]
pub struct Recorded;

impl Circuit<Fr> for Recorded {
    type Config = ();
    type FloorPlanner = SimpleFloorPlanner;
    type Params = CircuitRecord;

    fn without_witnesses(&self) -> Self {
        Recorded
    }

    fn configure(meta: &mut ConstraintSystem<Fr>) {
        Self::configure_with_params(meta, CircuitRecord::default());
    }

    fn configure_with_params(meta: &mut ConstraintSystem<Fr>, record: CircuitRecord) {
        // Every reference was checked when the record was made or read: nothing here
        // panics (halo2's own checks: phases in order, a constraint in every gate).
        let advice: Vec<Column<Advice>> = record
            .advice_phases
            .iter()
            .map(|&phase| match phase {
                0 => meta.advice_column_in(FirstPhase),
                1 => meta.advice_column_in(SecondPhase),
                _ => meta.advice_column_in(ThirdPhase),
            })
            .collect();
        let fixed: Vec<Column<Fixed>> = (0..record.fixed).map(|_| meta.fixed_column()).collect();
        let instance: Vec<Column<Instance>> = (0..record.instance)
            .map(|_| meta.instance_column())
            .collect();
        let selectors: Vec<Selector> = record
            .selectors
            .iter()
            .map(|&simple| {
                if simple {
                    meta.selector()
                } else {
                    meta.complex_selector()
                }
            })
            .collect();
        let challenges: Vec<Challenge> = record
            .challenge_phases
            .iter()
            .map(|&phase| match phase {
                0 => meta.challenge_usable_after(FirstPhase),
                1 => meta.challenge_usable_after(SecondPhase),
                _ => meta.challenge_usable_after(ThirdPhase),
            })
            .collect();
        let handles = Handles {
            advice: &advice,
            fixed: &fixed,
            instance: &instance,
            selectors: &selectors,
            challenges: &challenges,
        };
        for step in &record.steps {
            match step {
                Step::Gate {
                    name,
                    queries,
                    constraints,
                } => meta.create_gate(name, |cells| {
                    handles.query(queries, cells);
                    constraints
                        .iter()
                        .map(|(name, nodes)| (name.clone(), handles.build(nodes, cells)))
                        .collect::<Vec<_>>()
                }),
                Step::Lookup {
                    name,
                    queries,
                    pairs,
                } => {
                    meta.lookup_any(name, |cells| {
                        handles.query(queries, cells);
                        pairs
                            .iter()
                            .map(|(input, table)| {
                                (handles.build(input, cells), handles.build(table, cells))
                            })
                            .collect()
                    });
                }
                Step::Equality(column) => {
                    let column: Option<Column<Any>> = match *column {
                        ColumnRef::Advice(i) => advice.get(i as usize).map(|&c| c.into()),
                        ColumnRef::Fixed(i) => fixed.get(i as usize).map(|&c| c.into()),
                        ColumnRef::Instance(i) => instance.get(i as usize).map(|&c| c.into()),
                    };
                    if let Some(column) = column {
                        meta.enable_equality(column);
                    }
                }
            }
        }
        for &column in &record.constants {
            if let Some(&column) = fixed.get(column as usize) {
                meta.enable_constant(column);
            }
        }
        if let Some(degree) = record.minimum_degree {
            meta.set_minimum_degree(degree as usize);
        }
    }

    fn synthesize(
        &self,
        _config: (),
        _layouter: impl Layouter<Fr>,
    ) -> std::result::Result<(), halo2_proofs::plonk::Error> {
        Err(halo2_proofs::plonk::Error::Synthesis)
    }
}

/// The replay's columns, selectors and challenges, by index.
struct Handles<'a> {
    advice: &'a [Column<Advice>],
    fixed: &'a [Column<Fixed>],
    instance: &'a [Column<Instance>],
    selectors: &'a [Selector],
    challenges: &'a [Challenge],
}

impl Handles<'_> {
    /// Makes the queries `queries` (checked: their columns exist), in their order: the order
    /// halo2 numbers them in.
    fn query(&self, queries: &[Query], cells: &mut VirtualCells<'_, Fr>) {
        for &(column, at) in queries {
            match column {
                ColumnRef::Advice(i) => {
                    if let Some(&c) = self.advice.get(i as usize) {
                        cells.query_advice(c, Rotation(at));
                    }
                }
                ColumnRef::Fixed(i) => {
                    if let Some(&c) = self.fixed.get(i as usize) {
                        cells.query_fixed(c, Rotation(at));
                    }
                }
                ColumnRef::Instance(i) => {
                    if let Some(&c) = self.instance.get(i as usize) {
                        cells.query_instance(c, Rotation(at));
                    }
                }
            }
        }
    }

    /// The expression `nodes` (checked: whole, every reference there) describe, its queries
    /// made through `cells`.
    fn build(&self, nodes: &[Node], cells: &mut VirtualCells<'_, Fr>) -> Expression<Fr> {
        // `nodes` were checked whole: the fallbacks are never taken.
        let zero = || Expression::Constant(Fr::ZERO);
        let mut stack: Vec<Expression<Fr>> = Vec::new();
        for node in nodes {
            let value = match *node {
                Node::Constant(bytes) => {
                    Expression::Constant(Option::from(Fr::from_repr(bytes)).unwrap_or(Fr::ZERO))
                }
                Node::Selector(i) => self
                    .selectors
                    .get(i as usize)
                    .map_or_else(zero, |&s| cells.query_selector(s)),
                Node::Fixed(i, at) => self
                    .fixed
                    .get(i as usize)
                    .map_or_else(zero, |&c| cells.query_fixed(c, Rotation(at))),
                Node::Advice(i, at) => self
                    .advice
                    .get(i as usize)
                    .map_or_else(zero, |&c| cells.query_advice(c, Rotation(at))),
                Node::Instance(i, at) => self
                    .instance
                    .get(i as usize)
                    .map_or_else(zero, |&c| cells.query_instance(c, Rotation(at))),
                Node::Challenge(i) => self
                    .challenges
                    .get(i as usize)
                    .map_or_else(zero, |&c| cells.query_challenge(c)),
                Node::Negated => Expression::Negated(Box::new(stack.pop().unwrap_or_else(zero))),
                Node::Sum | Node::Product => {
                    let b = stack.pop().unwrap_or_else(zero);
                    let a = stack.pop().unwrap_or_else(zero);
                    if matches!(node, Node::Sum) {
                        Expression::Sum(Box::new(a), Box::new(b))
                    } else {
                        Expression::Product(Box::new(a), Box::new(b))
                    }
                }
                Node::Scaled(bytes) => Expression::Scaled(
                    Box::new(stack.pop().unwrap_or_else(zero)),
                    Option::from(Fr::from_repr(bytes)).unwrap_or(Fr::ZERO),
                ),
            };
            stack.push(value);
        }
        stack.pop().unwrap_or_else(zero)
    }
}
