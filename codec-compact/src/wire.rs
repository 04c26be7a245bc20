//! The compact payload after the verifying key: what is stored, byte for byte.
//!
//! ```text
//! per fixed column: runs until 2^k rows: varint length, tag, value
//!     tag 0: zero; 1: varint v; 2: varint v meaning -v; 3: 32-byte canonical value
//! per permutation column: varint exception count, then per exception (in row order):
//!     varint row gap from the previous exception (+1 after the first), varint column,
//!     varint row it maps to; every other cell maps to itself
//! ```

use keycodec_core::backend_api::{Error, PayloadReader, PkShape, Result};
use keycodec_core::halo2_proofs::arithmetic::Field;
use keycodec_core::halo2_proofs::halo2curves::ff::PrimeField;
use keycodec_core::halo2curves::bn256::Fr;

use crate::varint;

const TAG_ZERO: u8 = 0;
const TAG_SMALL: u8 = 1;
const TAG_NEGATED_SMALL: u8 = 2;
const TAG_FULL: u8 = 3;

/// Per permutation column: (row, column it maps to, row it maps to), rows increasing.
pub(crate) type Exceptions = Vec<Vec<(usize, usize, usize)>>;

/// What a compact proving key stores besides its verifying key.
pub(crate) struct StoredPk {
    pub(crate) fixed_values: Vec<Vec<Fr>>,
    /// The permutation's cells that do not map to themselves.
    pub(crate) exceptions: Exceptions,
}

/// Writes the fixed columns as runs and the permutation's exceptions.
pub(crate) fn write_pk(fixed_values: &[&[Fr]], exceptions: &Exceptions, out: &mut Vec<u8>) {
    for column in fixed_values {
        write_runs(column, out);
    }
    for column in exceptions {
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
    let mut values = Vec::new();
    values
        .try_reserve_exact(n)
        .map_err(|_| Error::OutOfMemory {
            what: "a compact fixed column",
            bytes: (n as u64).saturating_mul(32),
        })?;
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
