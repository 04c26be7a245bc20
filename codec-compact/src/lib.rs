//! A keycodec backend that stores only what a halo2 proving key cannot recompute.
//!
//! Of a halo2-axiom proving key's polynomials, most follow from a little data:
//! - `fixed_polys` are the inverse FFT of `fixed_values`;
//! - the permutation's values are `δ^column · ω^row` for the (column, row) each cell maps
//!   to, mostly the identity, and its polynomials are their inverse FFT;
//! - `l0`, `l_last` and `l_active_row` follow from `k` and the circuit's blinding rows.
//!
//! So the payload holds the verifying key's data (as every backend does), the fixed columns
//! as runs of equal values (zero, small integers, negated small integers, or 32-byte
//! canonical values), and the permutation as its exceptions to the identity mapping. Loading
//! recomputes everything else with halo2's own `EvaluationDomain` functions, exactly as
//! halo2's keygen does, so the loaded key is identical (tests compare halo2's `RawBytes`
//! serialisation byte for byte and prove with it).
//!
//! It is a backend of its own rather than a layout option of the core: what it stores is a
//! different *model* of the key (mappings, runs), not a different encoding of the same
//! vectors, and only saving needs to understand halo2's permutation structure.
//!
//! # Memory
//!
//! A compact file expands on load by design (a StandardPlonk key at k = 22 is a few hundred
//! bytes on disk and 3.2 GiB in memory with its evaluation domain). Every run and mapping
//! entry is checked against `2^k`, and the whole expansion against
//! [`keycodec_core::Limits::memory_budget`] before any of it is allocated: memory the file's
//! bytes do not justify. Loading a large compact key may need a larger budget; restricting
//! [`keycodec_core::LoadOptions::codecs`] keeps an untrusted file from choosing this backend.

#![forbid(unsafe_code)]

mod derivable;
mod domain_math;
mod exceptions;
mod recompute;
mod varint;
mod wire;

use std::io::Write;

use keycodec_core::backend_api::circuit::rows;
use keycodec_core::backend_api::field::{FieldEncoding, FR_BYTES};
use keycodec_core::backend_api::{
    assemble_pk, ArtifactKind, CodecId, DecodeContext, Error, IoContext, Key, KeyCodec, KeyRef,
    PayloadReader, Result, VkParts, VkPlan, WireMode,
};

/// This backend's id in the container header.
pub const ID: CodecId = CodecId::COMPACT;

/// The only wire mode.
pub const MODE_RECOMPUTE: WireMode = WireMode::new(0, "recompute");

/// The compact codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompactCodec;

impl KeyCodec for CompactCodec {
    fn name(&self) -> &'static str {
        "compact"
    }

    fn id(&self) -> CodecId {
        ID
    }

    fn wire_modes(&self) -> &'static [WireMode] {
        &[MODE_RECOMPUTE]
    }

    fn wire_mode(&self) -> WireMode {
        MODE_RECOMPUTE
    }

    /// Saving checks every polynomial is derivable and finds the permutation's exceptions:
    /// seconds at k = 18, for a payload a few percent of the key.
    fn costly_encoding(&self) -> bool {
        true
    }

    /// After its verifying key, its payload is read in order, as one stream: a load from
    /// object storage streams it from the first answer, with no first round (measured:
    /// `docs/performance.md`, "Object storage").
    fn reads_in_order(&self) -> bool {
        true
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let parts = VkParts::of(key.vk())?;
        let mut buf = Vec::new();
        keycodec_core::backend_api::vk_layout::write(&parts, FieldEncoding::Raw, &mut buf)?;
        if let KeyRef::Proving(pk) = key {
            // The ω powers the check and the permutation's mapping both need, computed once.
            let domain = pk.get_vk().get_domain();
            let omega_powers = domain_math::powers(domain.get_omega(), rows(domain.k()))?;
            derivable::check_derivable(pk, &omega_powers)?;
            let exceptions = exceptions::permutation_exceptions(pk, &omega_powers)?;
            let fixed: Vec<&[_]> = pk.fixed_values().iter().map(|p| p.values()).collect();
            wire::write_pk(&fixed, &exceptions, &mut buf);
        }
        out.write_all(&buf).during("write")
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        let vk_parts =
            keycodec_core::backend_api::vk_layout::read(input, context, FieldEncoding::Raw)?;
        match context.kind {
            // Parameters never reach here: this codec stores none.
            ArtifactKind::Verifying | ArtifactKind::Params => context.assemble_vk(vk_parts),
            ArtifactKind::Proving => {
                // The stored columns are parsed from memory: the rest of the payload in one
                // read (a compact payload is small beside the key it rebuilds; borrowed when
                // the payload is in memory) instead of millions of small reads, each through
                // the reader's buffer and checksum. Meanwhile the evaluation domain the
                // recomputation needs is built on another thread.
                let rest = input.read_rest("compact proving key data")?;
                let mut stored_input = PayloadReader::from_slice(&rest);
                let plan = VkPlan::new(context.cs.clone(), vk_parts, &context.limits)?;
                // A few bytes of runs expand to the whole key: memory the file does not
                // justify, so it must fit the budget before any of it is allocated.
                let key_bytes = plan.pk_shape().total_elements() * FR_BYTES as u128;
                plan.check_budget(
                    "recomputing a compact proving key",
                    rest.len() as u64,
                    u64::try_from(key_bytes).unwrap_or(u64::MAX),
                )?;
                let (vk, stored) =
                    plan.finish_while(|shape| wire::read_pk(&mut stored_input, shape))?;
                match stored_input.remaining() {
                    0 => drop(rest),
                    count => return Err(Error::TrailingBytes { count }),
                }
                let parts = recompute::recompute(&vk, stored)?;
                assemble_pk(vk, parts).map(Key::Proving)
            }
        }
    }
}
