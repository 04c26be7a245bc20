//! The proving key's polynomials, as every backend stores them: their groups in halo2's
//! serialization order, and the shape a verifying key implies for them.

use halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use halo2_proofs::poly::Polynomial;
use halo2curves::bn256::{Fr, G1Affine};

use crate::circuit::{expect_count, permutation_columns, rows};
use crate::error::Result;

/// The proving key's polynomial data, as decoded (values and lengths not yet checked
/// against the circuit: [`assemble_pk`](crate::backend_api::assemble_pk) does that).
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

/// The groups of a proving key's polynomials, in halo2's serialization order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolyGroup {
    /// `l0`, one polynomial.
    L0,
    /// `l_last`, one polynomial.
    LLast,
    /// `l_active_row`, one polynomial.
    LActiveRow,
    /// The fixed columns' values, one per fixed column.
    FixedValues,
    /// The fixed columns' coefficients, one per fixed column.
    FixedPolys,
    /// The permutation's values, one per permutation column.
    PermutationValues,
    /// The permutation's coefficients, one per permutation column.
    PermutationPolys,
}

impl PolyGroup {
    /// Every group, in halo2's order.
    pub const ALL: [PolyGroup; 7] = [
        PolyGroup::L0,
        PolyGroup::LLast,
        PolyGroup::LActiveRow,
        PolyGroup::FixedValues,
        PolyGroup::FixedPolys,
        PolyGroup::PermutationValues,
        PolyGroup::PermutationPolys,
    ];

    /// The group's name, for error messages.
    pub fn name(self) -> &'static str {
        match self {
            PolyGroup::L0 => "l0",
            PolyGroup::LLast => "l_last",
            PolyGroup::LActiveRow => "l_active_row",
            PolyGroup::FixedValues => "fixed_values",
            PolyGroup::FixedPolys => "fixed_polys",
            PolyGroup::PermutationValues => "permutation values",
            PolyGroup::PermutationPolys => "permutation polys",
        }
    }

    /// Whether halo2 writes the group as a counted list (the fixed columns and the
    /// permutation's) rather than as one polynomial.
    pub fn is_list(self) -> bool {
        !matches!(
            self,
            PolyGroup::L0 | PolyGroup::LLast | PolyGroup::LActiveRow
        )
    }

    /// How many polynomials the group holds in a key of `shape`.
    pub fn count(self, shape: &PkShape) -> usize {
        match self {
            PolyGroup::L0 | PolyGroup::LLast | PolyGroup::LActiveRow => 1,
            PolyGroup::FixedValues | PolyGroup::FixedPolys => shape.fixed_columns,
            PolyGroup::PermutationValues | PolyGroup::PermutationPolys => shape.permutation_columns,
        }
    }
}

impl PkParts {
    /// Fills every group in halo2's order with what `read(group)` returns (the group's
    /// polynomials, [`PolyGroup::count`] of them).
    ///
    /// # Errors
    ///
    /// `read`'s errors; [`crate::Error::Structure`] when a single-polynomial group is given
    /// another number of polynomials. List counts and lengths are checked on assembly.
    pub fn read_groups(mut read: impl FnMut(PolyGroup) -> Result<Vec<Vec<Fr>>>) -> Result<Self> {
        let mut parts = PkParts::default();
        for group in PolyGroup::ALL {
            let polys = read(group)?;
            let single = |mut polys: Vec<Vec<Fr>>| -> Result<Vec<Fr>> {
                expect_count(group.name(), 1, polys.len())?;
                Ok(polys.pop().unwrap_or_default())
            };
            match group {
                PolyGroup::L0 => parts.l0 = single(polys)?,
                PolyGroup::LLast => parts.l_last = single(polys)?,
                PolyGroup::LActiveRow => parts.l_active_row = single(polys)?,
                PolyGroup::FixedValues => parts.fixed_values = polys,
                PolyGroup::FixedPolys => parts.fixed_polys = polys,
                PolyGroup::PermutationValues => parts.permutation_values = polys,
                PolyGroup::PermutationPolys => parts.permutation_polys = polys,
            }
        }
        Ok(parts)
    }
}

/// A proving key's polynomials, group by group in halo2's order.
pub fn groups(pk: &ProvingKey<G1Affine>) -> [(PolyGroup, Vec<&[Fr]>); 7] {
    fn values<B>(polys: &[Polynomial<Fr, B>]) -> Vec<&[Fr]> {
        polys.iter().map(|p| p.values()).collect()
    }
    let permutation = pk.permutation();
    [
        (PolyGroup::L0, vec![pk.l0().values()]),
        (PolyGroup::LLast, vec![pk.l_last().values()]),
        (PolyGroup::LActiveRow, vec![pk.l_active_row().values()]),
        (PolyGroup::FixedValues, values(pk.fixed_values())),
        (PolyGroup::FixedPolys, values(pk.fixed_polys())),
        (
            PolyGroup::PermutationValues,
            values(permutation.permutations()),
        ),
        (PolyGroup::PermutationPolys, values(permutation.polys())),
    ]
}

/// A proving key's polynomials in halo2's serialization order, one after the other.
pub fn polynomials(pk: &ProvingKey<G1Affine>) -> impl Iterator<Item = &[Fr]> {
    groups(pk).into_iter().flat_map(|(_, polys)| polys)
}

/// The polynomial counts a proving key of a verifying key must have.
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
        PolyGroup::ALL
            .iter()
            .map(|group| group.count(self) as u128)
            .sum::<u128>()
            * self.rows as u128
    }
}
