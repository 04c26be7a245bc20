//! What a constraint system's record is made of: its expressions as postfix nodes, and the
//! order of its gates, lookups and equality columns that makes halo2's query order.

use halo2_proofs::halo2curves::ff::PrimeField;
use halo2_proofs::plonk::{ConstraintSystem, Expression};
use halo2curves::bn256::Fr;

use super::{unrecordable, ColumnRef, Node, Query, Step};
use crate::error::Result;

/// The nodes of `expression` in postfix order (the order halo2 registers its queries in),
/// noting each selector's kind in `selectors`.
pub(super) fn nodes_of(expression: &Expression<Fr>, selectors: &mut [bool]) -> Result<Vec<Node>> {
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
pub(super) fn interleave(
    cs: &ConstraintSystem<Fr>,
    sequences: [Vec<Step>; 3],
) -> Result<Vec<Step>> {
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
