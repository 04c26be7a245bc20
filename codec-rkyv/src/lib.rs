//! A keycodec backend that stores halo2 keys as rkyv archives.
//!
//! # Layout: one archive per section
//!
//! The payload is a sequence of *sections*, each an independent rkyv archive:
//! the verifying key's data first (`k`, the selector-compression flag, commitments as raw
//! 64-byte points, selectors packed 8 per byte), then, for a proving key, one section per
//! polynomial in halo2's order (`l0`, `l_last`, `l_active_row`, the fixed values, the fixed
//! polynomials, the permutation's values and polynomials). A polynomial is archived as a
//! vector of 32-byte elements holding the element's Montgomery limbs, little-endian (the
//! same bytes as halo2's `RawBytes`); how many sections follow is fixed by the circuit.
//!
//! Each section is framed as `[archive length: u64 LE][8 zero bytes][archive][zero padding
//! to 16 bytes]`, so every archive starts 16-byte aligned relative to the file (the container
//! header is 128 bytes, 96 or 64 in older versions: all multiples of 16). Sectioning keeps saves from copying the whole key: one polynomial is
//! archived at a time. rkyv's relative pointers are 64-bit (feature `pointer_width_64`), so a
//! single polynomial may exceed 2 GiB (k >= 26).
//!
//! # Loading
//!
//! A polynomial section as this codec writes it is the elements' bytes followed by the
//! archive's 16-byte root. Loading reads the elements straight into the key's vector (with
//! parallel positioned reads from a file, range-checked while in cache), then the root into
//! the same allocation right behind them, and validates the whole archive in place with
//! `rkyv::access` (bytecheck): the root must point at exactly those elements. No buffer
//! holds a second copy of the key. Any other valid archive (a section of another length) is
//! read into an aligned buffer, validated there and converted. The verifying key's section
//! is read into an aligned buffer (borrowed in place when the payload is in memory and
//! aligned).
//!
//! # Validation
//!
//! [`Validation::Checked`](keycodec_core::Validation::Checked) (the default) checks every field element (below the modulus) and
//! every commitment (on the curve): bytecheck checks structure, not values.
//! [`Validation::Trusted`](keycodec_core::Validation::Trusted) skips the value checks. It does not skip bytecheck: validating a
//! section's structure is a bounds check of one relative pointer and one length (elements are
//! plain bytes), so skipping it would save nothing measurable and would make a forged file
//! undefined behaviour instead of an error.

#![forbid(unsafe_code)]

use std::io::Write;

use keycodec_core::backend_api::field::{encode_fr_chunk, encode_g1, FieldEncoding};
use keycodec_core::backend_api::parts::polynomials;
use keycodec_core::backend_api::{
    CodecId, DecodeContext, Error, Key, KeyCodec, KeyRef, PayloadReader, Result, VkParts, WireMode,
};
use keycodec_core::halo2curves::bn256::G1Affine;

mod read;
mod section;

use read::{read_pk_polys, read_vk_parts};
use section::{archive, write_poly_section, write_section, PolyRef, PolySection, VkSection};

/// This backend's id in the container header.
pub const ID: CodecId = CodecId::RKYV;

/// The only wire mode: sectioned archives, 64-bit relative pointers.
pub const MODE_SECTIONS: WireMode = WireMode::new(0, "sections");

/// The rkyv codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct RkyvCodec;

impl KeyCodec for RkyvCodec {
    fn name(&self) -> &'static str {
        "rkyv"
    }

    fn id(&self) -> CodecId {
        ID
    }

    fn wire_modes(&self) -> &'static [WireMode] {
        &[MODE_SECTIONS]
    }

    fn wire_mode(&self) -> WireMode {
        MODE_SECTIONS
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let parts = VkParts::of(key.vk())?;
        let raw_point = |point: &G1Affine| -> Result<[u8; 64]> {
            encode_g1(point, FieldEncoding::Raw)
                .try_into()
                .map_err(|_| Error::Internal("a raw point is not 64 bytes".into()))
        };
        let section = VkSection {
            k: parts.k,
            compress_selectors: parts.compress_selectors,
            fixed_commitments: parts
                .fixed_commitments
                .iter()
                .map(raw_point)
                .collect::<Result<_>>()?,
            permutation_commitments: parts
                .permutation_commitments
                .iter()
                .map(raw_point)
                .collect::<Result<_>>()?,
            selectors: parts.selectors,
        };
        write_section(out, &archive(&section)?)?;
        if let KeyRef::Proving(pk) = key {
            // One polynomial at a time, its archive written as rkyv serializes it: the save
            // never holds a second copy of the key, nor one of a polynomial where `Fr`'s
            // memory is its raw encoding (raw_view); elsewhere the elements are encoded into
            // a buffer reused across polynomials.
            let mut elements: PolySection = Vec::new();
            for values in polynomials(pk) {
                let poly = match keycodec_core::backend_api::raw_view::as_raw_elements(values) {
                    Some(raw) => PolyRef(raw),
                    None => {
                        encode_fr_chunk(values, FieldEncoding::Raw, &mut elements);
                        PolyRef(&elements)
                    }
                };
                write_poly_section(out, &poly)?;
            }
        }
        Ok(())
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        let vk = read_vk_parts(input, context)?;
        // Every element takes 32 bytes here too, as `assemble` requires.
        context.assemble(vk, input, |input, shape| {
            read_pk_polys(input, shape, context.validation)
        })
    }
}
