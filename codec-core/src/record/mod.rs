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
//! Its bytes ([`CircuitRecord::to_bytes`]) are versioned ([`RECORD_VERSION`]); a key's
//! container carries them after its payload (version 4: `docs/format.md`).

mod bytes;
mod order;
mod replay;

use halo2_proofs::plonk::{Any, Circuit, ConstraintSystem};
use halo2curves::bn256::Fr;

use crate::circuit::fingerprint_of;
use crate::error::{Error, Result};

pub(crate) use bytes::record_of_section;
pub use replay::Recorded;

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
    /// The circuit's parameters as JSON ([`RecordableParams`]), if the save had them.
    params: Option<String>,
}

/// Circuit parameters (a circuit's `Circuit::Params`) that a key's container records beside
/// its constraint system, so that the circuit can be built again from the file alone
/// ([`CircuitRecord::circuit_params`]): every serde type, as JSON (`()` as `null`; halo2-lib's
/// `BaseCircuitParams`), and a record's own, passed on (a key loaded with [`Recorded`] and
/// saved again keeps the parameters of the circuit it was first saved with).
pub trait RecordableParams {
    /// These parameters as the record stores them (JSON), or none (a serialisation that
    /// fails records no parameters; the constraint system is recorded all the same).
    fn to_recorded_json(&self) -> Option<String>;
}

impl<T: serde::Serialize> RecordableParams for T {
    fn to_recorded_json(&self) -> Option<String> {
        serde_json::to_string(self).ok()
    }
}

impl RecordableParams for CircuitRecord {
    fn to_recorded_json(&self) -> Option<String> {
        self.params.clone()
    }
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
                            order::nodes_of(poly, &mut selectors)?,
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
                            order::nodes_of(input, &mut selectors)?,
                            order::nodes_of(table, &mut selectors)?,
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
            steps: order::interleave(cs, [gates, lookups, equalities])?,
            constants: cs
                .constants()
                .iter()
                .map(|column| count(column.index()))
                .collect::<Result<_>>()?,
            minimum_degree: cs.minimum_degree().map(count).transpose()?,
            params: None,
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

    /// This record with the circuit's parameters `params` ([`RecordableParams`]).
    pub fn with_params(self, params: Option<String>) -> CircuitRecord {
        CircuitRecord { params, ..self }
    }

    /// The circuit's parameters the key was saved with, for building the circuit again (a
    /// halo2-lib prover's `BaseCircuitParams`):
    ///
    /// ```
    /// # use keycodec_core::record::CircuitRecord;
    /// # fn example(record: &CircuitRecord) -> keycodec_core::Result<()> {
    /// # type BaseCircuitParams = ();
    /// // The record of a key's container (keycodec's `read_record`).
    /// let params: BaseCircuitParams = record.circuit_params()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::CircuitParams`] when the record carries none (the key was saved by a build
    /// that did not record them) or they are not a `P`.
    pub fn circuit_params<P: serde::de::DeserializeOwned>(&self) -> Result<P> {
        let json = self.params.as_deref().ok_or_else(|| {
            Error::CircuitParams("the record carries none: pass the circuit's parameters".into())
        })?;
        serde_json::from_str(json).map_err(|err| Error::CircuitParams(err.to_string()))
    }

    /// The circuit's parameters as recorded (JSON), if any.
    pub fn circuit_params_json(&self) -> Option<&str> {
        self.params.as_deref()
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
}

fn malformed(what: &str) -> Error {
    Error::Malformed(format!("the circuit's record: {what} is malformed"))
}

fn unrecordable(why: &str) -> Error {
    Error::Malformed(format!("this constraint system cannot be recorded: {why}"))
}
