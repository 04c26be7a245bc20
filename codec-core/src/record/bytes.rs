//! A record's bytes ([`CircuitRecord::to_bytes`], [`CircuitRecord::from_bytes`]) and the
//! container's record section ([`CircuitRecord::to_section`]): `docs/format.md` ("The
//! circuit's record") describes them byte by byte.

use super::{
    malformed, CircuitRecord, ColumnRef, Node, Query, Step, MAX_RECORD_BYTES, RECORD_VERSION,
};
use crate::error::{Error, Result};

/// The record in a container's record section (its bytes, then their XXH3-64), its checksum
/// checked: what a load that checks checksums does, and what [`CircuitRecord::from_section`]
/// decodes.
///
/// # Errors
///
/// [`Error::Truncated`] for fewer than 8 bytes, [`Error::PayloadChecksum`] when the checksum
/// is not the record's.
pub(crate) fn record_of_section(section: &[u8]) -> Result<&[u8]> {
    let Some((record, stored)) = section.split_last_chunk::<8>() else {
        return Err(Error::Truncated {
            context: "the circuit's record",
        });
    };
    let (expected, found) = (u64::from_le_bytes(*stored), crate::xxh3::xxh3_64(record));
    if expected != found {
        return Err(Error::PayloadChecksum { expected, found });
    }
    Ok(record)
}

impl CircuitRecord {
    /// The record section of a container (version 4): the record's bytes, then their
    /// XXH3-64.
    pub fn to_section(&self) -> Vec<u8> {
        let mut bytes = self.to_bytes();
        let checksum = crate::xxh3::xxh3_64(&bytes);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// The record in a container's record section (see [`CircuitRecord::to_section`]).
    ///
    /// # Errors
    ///
    /// [`Error::PayloadChecksum`] when the checksum is not the record's; as
    /// [`CircuitRecord::from_bytes`].
    pub fn from_section(section: &[u8]) -> Result<CircuitRecord> {
        CircuitRecord::from_bytes(record_of_section(section)?)
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
        match &self.params {
            None => out.0.push(0),
            Some(json) => {
                out.0.push(1);
                out.string(json);
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
        let params = match input.u8()? {
            0 => None,
            1 => Some(input.string()?),
            _ => return Err(malformed("the circuit's parameters")),
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
            params,
        };
        record.check()?;
        Ok(record)
    }
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
