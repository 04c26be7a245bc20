//! A circuit's constraint system as data: what `configure` built ([`CircuitRecord`]), and the
//! circuit that builds it again from the record alone ([`Recorded`]), so that a key loads
//! without the circuit's code.
//!
//! A record holds the columns (advice with their phases, fixed, instance), the selectors
//! (simple or complex), the challenges with their phases, the gates (named constraints as
//! expression trees), the lookups (input and table expressions), the equality-enabled columns
//! and the fixed columns of constants, and the minimum degree; and the order in which the
//! gates, lookups and equality columns were made, which fixes the order of halo2's queries.
//! Replaying it through halo2's public `ConstraintSystem` API builds a constraint system whose
//! pinned form (what a verifying key's transcript and the container's fingerprint hash) is
//! the original's: [`CircuitRecord::of`] replays every record it makes and refuses to make one
//! that does not.
//!
//! A record authenticates nothing: an edited record (a gate dropped) replays into another
//! circuit. Pin a key loaded with [`Recorded`] (its digest, or its verifying key's
//! transcript).
//!
//! # Bytes
//!
//! [`CircuitRecord::to_bytes`] and [`CircuitRecord::from_bytes`], little-endian, counts as
//! `u32` (checked against the bytes left before anything is allocated), strings as a count and
//! UTF-8, field elements as their 32-byte canonical representation:
//!
//! ```text
//! version u32 (1)
//! advice phases: count, a byte each (0, 1 or 2)
//! fixed columns u32, instance columns u32
//! selectors: count, a byte each (1 simple, 0 complex)
//! challenge phases: count, a byte each
//! steps: count, each a tag byte and its body, in the order configure made them:
//!   0 gate: name, constraints: count, each a name and an expression
//!   1 lookup: name, pairs: count, each an input expression and a table expression
//!   2 equality: a column (kind byte 0 advice, 1 fixed, 2 instance; index u32)
//! constants: count, a fixed column index u32 each
//! minimum degree: 0, or 1 and a u32
//! ```
//!
//! An expression is its nodes in postfix order (a count, then each node a tag byte and its
//! body): 0 constant (32 bytes), 1 selector (u32), 2 fixed, 3 advice, 4 instance (each a
//! column u32 and a rotation i32), 5 challenge (u32), 6 negated, 7 sum, 8 product (no body:
//! they take the one or two values before them), 9 scaled (32 bytes; takes one value).

use halo2_proofs::circuit::{Layouter, SimpleFloorPlanner};
use halo2_proofs::halo2curves::ff::{Field, PrimeField};
use halo2_proofs::plonk::{
    Advice, Any, Challenge, Circuit, Column, ConstraintSystem, Expression, FirstPhase, Fixed,
    Instance, SecondPhase, Selector, ThirdPhase, VirtualCells,
};
use halo2_proofs::poly::Rotation;
use halo2curves::bn256::Fr;

use crate::circuit::fingerprint_of;
use crate::error::{Error, Result};

/// The version of the record's bytes this build writes and reads.
pub const RECORD_VERSION: u32 = 1;

/// The most columns of a kind, selectors or challenges a record may declare: far above any
/// circuit's (a replay allocates for each).
const MAX_COUNT: usize = 1 << 16;

/// The deepest expression a record may hold: halo2 walks expressions recursively.
const MAX_DEPTH: usize = 1 << 10;

/// The longest record read: a replay builds a value for each of its nodes.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// A circuit's constraint system as data (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CircuitRecord {
    advice_phases: Vec<u8>,
    fixed: u32,
    instance: u32,
    selectors: Vec<bool>,
    challenge_phases: Vec<u8>,
    steps: Vec<Step>,
    constants: Vec<u32>,
    minimum_degree: Option<u32>,
}

/// What `configure` made, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Gate {
        name: String,
        queries: Vec<Query>,
        constraints: Vec<(String, Vec<Node>)>,
    },
    Lookup {
        name: String,
        queries: Vec<Query>,
        pairs: Vec<(Vec<Node>, Vec<Node>)>,
    },
    Equality(ColumnRef),
}

/// A cell a step queried first, in the order it did (halo2 numbers a query when it is made,
/// not when an expression uses it): a column and a rotation.
type Query = (ColumnRef, i32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColumnRef {
    Advice(u32),
    Fixed(u32),
    Instance(u32),
}

/// An expression's node, in postfix order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Constant([u8; 32]),
    Selector(u32),
    Fixed(u32, i32),
    Advice(u32, i32),
    Instance(u32, i32),
    Challenge(u32),
    Negated,
    Sum,
    Product,
    Scaled([u8; 32]),
}

impl CircuitRecord {
    /// The record of `cs`, as `configure` built it (before any selector compression).
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] when the record would not replay into `cs` (a constraint system
    /// that halo2's public API cannot build again, or more than `u32` of something).
    pub fn of(cs: &ConstraintSystem<Fr>) -> Result<CircuitRecord> {
        let count = |n: usize| u32::try_from(n).map_err(|_| unrecordable("a count over u32"));
        let mut selectors = vec![false; cs.num_selectors()];
        // A selector's kind shows only where it is queried; one never queried may be either
        // (it changes nothing halo2 pins).
        let gates = cs
            .gates()
            .iter()
            .map(|gate| {
                let constraints = gate
                    .polynomials()
                    .iter()
                    .enumerate()
                    .map(|(i, poly)| {
                        Ok((
                            gate.constraint_name(i).to_owned(),
                            nodes_of(poly, &mut selectors)?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Step::Gate {
                    name: gate.name().to_owned(),
                    queries: Vec::new(),
                    constraints,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let lookups = cs
            .lookups()
            .iter()
            .map(|lookup| {
                let pairs = lookup
                    .input_expressions()
                    .iter()
                    .zip(lookup.table_expressions())
                    .map(|(input, table)| {
                        Ok((
                            nodes_of(input, &mut selectors)?,
                            nodes_of(table, &mut selectors)?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Step::Lookup {
                    name: lookup.name().to_owned(),
                    queries: Vec::new(),
                    pairs,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let equalities = cs
            .permutation()
            .get_columns()
            .iter()
            .map(|column| {
                let index = count(column.index())?;
                Ok(Step::Equality(match column.column_type() {
                    Any::Advice(_) => ColumnRef::Advice(index),
                    Any::Fixed => ColumnRef::Fixed(index),
                    Any::Instance => ColumnRef::Instance(index),
                }))
            })
            .collect::<Result<Vec<_>>>()?;
        let record = CircuitRecord {
            advice_phases: cs.advice_column_phase(),
            fixed: count(cs.num_fixed_columns())?,
            instance: count(cs.num_instance_columns())?,
            selectors,
            challenge_phases: cs.challenge_phase(),
            steps: interleave(cs, [gates, lookups, equalities])?,
            constants: cs
                .constants()
                .iter()
                .map(|column| count(column.index()))
                .collect::<Result<_>>()?,
            minimum_degree: cs.minimum_degree().map(count).transpose()?,
        };
        record.check()?;
        let replayed = record.replay();
        if fingerprint_of(&replayed) != fingerprint_of(cs)
            || format!("{:?}", replayed.pinned()) != format!("{:?}", cs.pinned())
        {
            return Err(unrecordable(
                "its replay is another constraint system (a query order halo2's public API cannot make again)",
            ));
        }
        Ok(record)
    }

    /// The constraint system the record describes, built through halo2's public API.
    pub fn replay(&self) -> ConstraintSystem<Fr> {
        let mut cs = ConstraintSystem::default();
        Recorded::configure_with_params(&mut cs, self.clone());
        cs
    }

    /// The columns per kind: advice, fixed, instance.
    pub fn columns(&self) -> (usize, usize, usize) {
        (
            self.advice_phases.len(),
            self.fixed as usize,
            self.instance as usize,
        )
    }

    /// How many gates and lookups it has.
    pub fn gates_and_lookups(&self) -> (usize, usize) {
        let gates = self
            .steps
            .iter()
            .filter(|step| matches!(step, Step::Gate { .. }))
            .count();
        let lookups = self
            .steps
            .iter()
            .filter(|step| matches!(step, Step::Lookup { .. }))
            .count();
        (gates, lookups)
    }

    /// Its bytes (see the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Writer(Vec::new());
        out.u32(RECORD_VERSION);
        out.bytes(&self.advice_phases);
        out.u32(self.fixed);
        out.u32(self.instance);
        out.count(self.selectors.len());
        for &simple in &self.selectors {
            out.0.push(u8::from(simple));
        }
        out.bytes(&self.challenge_phases);
        out.count(self.steps.len());
        for step in &self.steps {
            match step {
                Step::Gate {
                    name,
                    queries,
                    constraints,
                } => {
                    out.0.push(0);
                    out.string(name);
                    out.queries(queries);
                    out.count(constraints.len());
                    for (name, nodes) in constraints {
                        out.string(name);
                        out.nodes(nodes);
                    }
                }
                Step::Lookup {
                    name,
                    queries,
                    pairs,
                } => {
                    out.0.push(1);
                    out.string(name);
                    out.queries(queries);
                    out.count(pairs.len());
                    for (input, table) in pairs {
                        out.nodes(input);
                        out.nodes(table);
                    }
                }
                Step::Equality(column) => {
                    out.0.push(2);
                    out.column(*column);
                }
            }
        }
        out.count(self.constants.len());
        for &column in &self.constants {
            out.u32(column);
        }
        match self.minimum_degree {
            None => out.0.push(0),
            Some(degree) => {
                out.0.push(1);
                out.u32(degree);
            }
        }
        out.0
    }

    /// The record in `bytes`, every reference in it checked (so that its replay cannot make
    /// halo2 panic or allocate without bound): columns, selectors and challenges that exist
    /// (at most 65,536 of each), phases halo2 has and in an order it accepts, expressions that
    /// are whole (at most 1,024 deep), gates with a constraint; at most
    /// [`MAX_RECORD_BYTES`] in all.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`]; [`Error::Malformed`], also for a record of another version.
    pub fn from_bytes(bytes: &[u8]) -> Result<CircuitRecord> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(malformed("its length"));
        }
        let mut input = Reader(bytes);
        let version = input.u32()?;
        if version != RECORD_VERSION {
            return Err(Error::Malformed(format!(
                "the circuit's record is of version {version} (this build reads {RECORD_VERSION})"
            )));
        }
        let advice_phases = input.bytes()?;
        let fixed = input.u32()?;
        let instance = input.u32()?;
        let selectors = input
            .bytes()?
            .into_iter()
            .map(|byte| match byte {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(malformed("a selector kind")),
            })
            .collect::<Result<_>>()?;
        let challenge_phases = input.bytes()?;
        let steps = (0..input.count(2)?)
            .map(|_| match input.u8()? {
                0 => {
                    let name = input.string()?;
                    let queries = input.queries()?;
                    let constraints = (0..input.count(5)?)
                        .map(|_| Ok((input.string()?, input.nodes()?)))
                        .collect::<Result<_>>()?;
                    Ok(Step::Gate {
                        name,
                        queries,
                        constraints,
                    })
                }
                1 => {
                    let name = input.string()?;
                    let queries = input.queries()?;
                    let pairs = (0..input.count(8)?)
                        .map(|_| Ok((input.nodes()?, input.nodes()?)))
                        .collect::<Result<_>>()?;
                    Ok(Step::Lookup {
                        name,
                        queries,
                        pairs,
                    })
                }
                2 => Ok(Step::Equality(input.column()?)),
                _ => Err(malformed("a step")),
            })
            .collect::<Result<_>>()?;
        let constants = (0..input.count(4)?)
            .map(|_| input.u32())
            .collect::<Result<_>>()?;
        let minimum_degree = match input.u8()? {
            0 => None,
            1 => Some(input.u32()?),
            _ => return Err(malformed("the minimum degree")),
        };
        if !input.0.is_empty() {
            return Err(malformed("bytes after the record"));
        }
        let record = CircuitRecord {
            advice_phases,
            fixed,
            instance,
            selectors,
            challenge_phases,
            steps,
            constants,
            minimum_degree,
        };
        record.check()?;
        Ok(record)
    }

    /// Every reference checked (see [`CircuitRecord::from_bytes`]).
    fn check(&self) -> Result<()> {
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

/// The nodes of `expression` in postfix order (the order halo2 registers its queries in),
/// noting each selector's kind in `selectors`.
fn nodes_of(expression: &Expression<Fr>, selectors: &mut [bool]) -> Result<Vec<Node>> {
    let index = |i: usize| u32::try_from(i).map_err(|_| unrecordable("an index over u32"));
    let mut nodes = Vec::new();
    // Iterative, in halo2's query order (a node's operands, left first, then the node).
    enum Visit<'a> {
        Enter(&'a Expression<Fr>),
        Exit(Node),
    }
    let mut work = vec![Visit::Enter(expression)];
    while let Some(visit) = work.pop() {
        match visit {
            Visit::Exit(node) => nodes.push(node),
            Visit::Enter(expression) => match expression {
                Expression::Constant(value) => nodes.push(Node::Constant(value.to_repr())),
                Expression::Selector(selector) => {
                    if let Some(simple) = selectors.get_mut(selector.index()) {
                        *simple = selector.is_simple();
                    }
                    nodes.push(Node::Selector(index(selector.index())?));
                }
                Expression::Fixed(query) => nodes.push(Node::Fixed(
                    index(query.column_index())?,
                    query.rotation().0,
                )),
                Expression::Advice(query) => nodes.push(Node::Advice(
                    index(query.column_index())?,
                    query.rotation().0,
                )),
                Expression::Instance(query) => nodes.push(Node::Instance(
                    index(query.column_index())?,
                    query.rotation().0,
                )),
                Expression::Challenge(challenge) => {
                    nodes.push(Node::Challenge(index(challenge.index())?))
                }
                Expression::Negated(a) => {
                    work.push(Visit::Exit(Node::Negated));
                    work.push(Visit::Enter(a));
                }
                Expression::Sum(a, b) | Expression::Product(a, b) => {
                    let node = if matches!(expression, Expression::Sum(..)) {
                        Node::Sum
                    } else {
                        Node::Product
                    };
                    work.push(Visit::Exit(node));
                    work.push(Visit::Enter(b));
                    work.push(Visit::Enter(a));
                }
                Expression::Scaled(a, factor) => {
                    work.push(Visit::Exit(Node::Scaled(factor.to_repr())));
                    work.push(Visit::Enter(a));
                }
            },
        }
    }
    Ok(nodes)
}

/// The queries a step's expressions make (an equality column: its current row).
fn queries_of(step: &Step) -> Vec<Query> {
    let from_nodes = |nodes: &[Node], out: &mut Vec<Query>| {
        for node in nodes {
            match *node {
                Node::Advice(column, at) => out.push((ColumnRef::Advice(column), at)),
                Node::Fixed(column, at) => out.push((ColumnRef::Fixed(column), at)),
                Node::Instance(column, at) => out.push((ColumnRef::Instance(column), at)),
                _ => {}
            }
        }
    };
    let mut out = Vec::new();
    match step {
        Step::Gate { constraints, .. } => {
            for (_, nodes) in constraints {
                from_nodes(nodes, &mut out);
            }
        }
        Step::Lookup { pairs, .. } => {
            for (input, table) in pairs {
                from_nodes(input, &mut out);
                from_nodes(table, &mut out);
            }
        }
        Step::Equality(column) => out.push((*column, 0)),
    }
    out
}

/// The kind of a column, as an index into per-kind lists: advice, fixed, instance.
fn kind(column: ColumnRef) -> usize {
    match column {
        ColumnRef::Advice(_) => 0,
        ColumnRef::Fixed(_) => 1,
        ColumnRef::Instance(_) => 2,
    }
}

/// The gates, lookups and equality columns (each in its own order) merged into an order
/// configure could have made them in, each gate and lookup with the queries it made first in
/// the order halo2 numbered them (`cs`'s query lists): a step fits next when the queries it
/// makes that are not made yet are exactly the next ones of those lists.
fn interleave(cs: &ConstraintSystem<Fr>, sequences: [Vec<Step>; 3]) -> Result<Vec<Step>> {
    /// One kind's queries: in the order halo2 numbered them, how many are made so far, and
    /// those the step under consideration would make.
    struct Made {
        expected: Vec<Query>,
        done: usize,
        new: Vec<Query>,
    }
    impl Made {
        fn of(expected: Vec<Query>) -> Made {
            Made {
                expected,
                done: 0,
                new: Vec::new(),
            }
        }
        /// The queries the step would make, if they are the next ones.
        fn next(&self) -> Option<&[Query]> {
            let next = self
                .expected
                .get(self.done..self.done.checked_add(self.new.len())?)?;
            next.iter().all(|q| self.new.contains(q)).then_some(next)
        }
    }
    let mut kinds = [
        Made::of(
            cs.advice_queries()
                .iter()
                .map(|(c, r)| (ColumnRef::Advice(c.index() as u32), r.0))
                .collect(),
        ),
        Made::of(
            cs.fixed_queries()
                .iter()
                .map(|(c, r)| (ColumnRef::Fixed(c.index() as u32), r.0))
                .collect(),
        ),
        Made::of(
            cs.instance_queries()
                .iter()
                .map(|(c, r)| (ColumnRef::Instance(c.index() as u32), r.0))
                .collect(),
        ),
    ];
    let mut sequences = sequences.map(|steps| steps.into_iter().peekable());
    let mut merged = Vec::new();
    'steps: loop {
        for sequence in &mut sequences {
            let Some(step) = sequence.peek() else {
                continue;
            };
            for made in &mut kinds {
                made.new.clear();
            }
            for query in queries_of(step) {
                if let Some(made) = kinds.get_mut(kind(query.0)) {
                    let done = made.expected.get(..made.done).unwrap_or_default();
                    if !done.contains(&query) && !made.new.contains(&query) {
                        made.new.push(query);
                    }
                }
            }
            let Some(queries) = kinds
                .iter()
                .map(|made| made.next().map(<[Query]>::to_vec))
                .collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            for made in &mut kinds {
                made.done += made.new.len();
            }
            let queries = queries.concat();
            merged.push(match sequence.next() {
                Some(Step::Gate {
                    name, constraints, ..
                }) => Step::Gate {
                    name,
                    queries,
                    constraints,
                },
                Some(Step::Lookup { name, pairs, .. }) => Step::Lookup {
                    name,
                    queries,
                    pairs,
                },
                Some(equality) => equality,
                None => break 'steps,
            });
            continue 'steps;
        }
        break;
    }
    let all_made = kinds.iter().all(|made| made.done == made.expected.len());
    if sequences
        .iter_mut()
        .any(|sequence| sequence.peek().is_some())
        || !all_made
    {
        return Err(unrecordable(
            "its queries' order is not one its gates, lookups and equality columns make",
        ));
    }
    Ok(merged)
}

fn malformed(what: &str) -> Error {
    Error::Malformed(format!("the circuit's record: {what} is malformed"))
}

fn unrecordable(why: &str) -> Error {
    Error::Malformed(format!("this constraint system cannot be recorded: {why}"))
}

/// The record's bytes as they are written.
struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    /// A count (records are far below `u32`: saturated, never wrapped).
    fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn column(&mut self, column: ColumnRef) {
        let (kind, index) = match column {
            ColumnRef::Advice(index) => (0, index),
            ColumnRef::Fixed(index) => (1, index),
            ColumnRef::Instance(index) => (2, index),
        };
        self.0.push(kind);
        self.u32(index);
    }

    fn queries(&mut self, queries: &[Query]) {
        self.count(queries.len());
        for &(column, at) in queries {
            self.column(column);
            self.0.extend_from_slice(&at.to_le_bytes());
        }
    }

    fn nodes(&mut self, nodes: &[Node]) {
        self.count(nodes.len());
        for node in nodes {
            match *node {
                Node::Constant(bytes) => {
                    self.0.push(0);
                    self.0.extend_from_slice(&bytes);
                }
                Node::Selector(i) => {
                    self.0.push(1);
                    self.u32(i);
                }
                Node::Fixed(i, at) | Node::Advice(i, at) | Node::Instance(i, at) => {
                    self.0.push(match node {
                        Node::Fixed(..) => 2,
                        Node::Advice(..) => 3,
                        _ => 4,
                    });
                    self.u32(i);
                    self.0.extend_from_slice(&at.to_le_bytes());
                }
                Node::Challenge(i) => {
                    self.0.push(5);
                    self.u32(i);
                }
                Node::Negated => self.0.push(6),
                Node::Sum => self.0.push(7),
                Node::Product => self.0.push(8),
                Node::Scaled(bytes) => {
                    self.0.push(9);
                    self.0.extend_from_slice(&bytes);
                }
            }
        }
    }
}

/// The record's bytes as they are read: every count checked against the bytes left.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or(Error::Truncated {
            context: "the circuit's record",
        })?;
        self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take()?))
    }

    /// A count of items at least `each` bytes long: no more than the bytes left hold.
    fn count(&mut self, each: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(each) > self.0.len() {
            return Err(Error::Truncated {
                context: "the circuit's record",
            });
        }
        Ok(n)
    }

    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.count(1)?;
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head.to_vec())
    }

    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| malformed("a name"))
    }

    fn column(&mut self) -> Result<ColumnRef> {
        let kind = self.u8()?;
        let index = self.u32()?;
        match kind {
            0 => Ok(ColumnRef::Advice(index)),
            1 => Ok(ColumnRef::Fixed(index)),
            2 => Ok(ColumnRef::Instance(index)),
            _ => Err(malformed("a column kind")),
        }
    }

    fn queries(&mut self) -> Result<Vec<Query>> {
        (0..self.count(9)?)
            .map(|_| Ok((self.column()?, self.i32()?)))
            .collect()
    }

    fn nodes(&mut self) -> Result<Vec<Node>> {
        (0..self.count(1)?)
            .map(|_| {
                Ok(match self.u8()? {
                    0 => Node::Constant(self.take()?),
                    1 => Node::Selector(self.u32()?),
                    tag @ 2..=4 => {
                        let (i, at) = (self.u32()?, self.i32()?);
                        match tag {
                            2 => Node::Fixed(i, at),
                            3 => Node::Advice(i, at),
                            _ => Node::Instance(i, at),
                        }
                    }
                    5 => Node::Challenge(self.u32()?),
                    6 => Node::Negated,
                    7 => Node::Sum,
                    8 => Node::Product,
                    9 => Node::Scaled(self.take()?),
                    _ => return Err(malformed("an expression's node")),
                })
            })
            .collect()
    }
}
