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
//! KiB on disk and 2.4 GiB in memory). Every run and mapping entry is checked against `2^k`,
//! and `k` against [`codec_core::Limits::max_k`]: that limit, not the file size, bounds what a
//! load may allocate. Lower it when loading compact files from untrusted sources.

mod layout;
mod varint;

use std::io::Write;

use codec_core::circuit::{VkParts, VkPlan};
use codec_core::field::FieldEncoding;
use codec_core::{
    CodecId, DecodeContext, Error, Key, KeyCodec, KeyKind, KeyRef, PayloadReader, Result,
};

/// The only wire mode.
pub const MODE_RUNS_AND_MAPPING: u8 = 0;

/// The compact codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompactCodec;

impl KeyCodec for CompactCodec {
    fn id(&self) -> CodecId {
        CodecId::Compact
    }

    fn wire_mode(&self) -> u8 {
        MODE_RUNS_AND_MAPPING
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let parts = VkParts::of(key.vk())?;
        let mut buf = Vec::new();
        codec_core::vk_layout::write(&parts, FieldEncoding::Raw, &mut buf)?;
        if let KeyRef::Proving(pk) = key {
            layout::write_pk(pk, &mut buf)?;
        }
        out.write_all(&buf)?;
        Ok(())
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        if context.mode != MODE_RUNS_AND_MAPPING {
            return Err(Error::UnsupportedMode {
                codec: CodecId::Compact,
                mode: context.mode,
            });
        }
        let vk_parts = codec_core::vk_layout::read(input, context, FieldEncoding::Raw)?;
        match context.kind {
            KeyKind::Verifying => context.assemble(vk_parts, None),
            KeyKind::Proving => {
                // The stored columns are parsed from memory: the rest of the payload in one
                // read (a compact payload is small beside the key it rebuilds; borrowed when
                // the payload is in memory) instead of millions of small reads, each through
                // the reader's buffer and checksum. Meanwhile the evaluation domain the
                // recomputation needs is built on another thread.
                let rest = input.read_rest("compact proving key data")?;
                let mut stored_input = PayloadReader::from_slice(&rest);
                let plan = VkPlan::new(context.cs.clone(), vk_parts, &context.limits)?;
                let (vk, stored) =
                    plan.finish_while(|shape| layout::read_pk(&mut stored_input, shape))?;
                match stored_input.remaining() {
                    0 => drop(rest),
                    count => return Err(Error::TrailingBytes { count }),
                }
                let parts = layout::recompute(&vk, stored)?;
                codec_core::circuit::assemble_pk(vk, parts).map(Key::Proving)
            }
        }
    }
}
