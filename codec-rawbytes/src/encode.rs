//! Writes halo2's key layout with few, large writes.

use std::io::Write;

use codec_core::circuit::VkParts;
use codec_core::field::{write_fr_slice, FieldEncoding};
use codec_core::halo2curves::bn256::Fr;
use codec_core::{KeyRef, Result};

/// halo2-axiom's verifying-key version byte.
pub(crate) const VK_VERSION: u8 = 0x02;

/// Writes `key` exactly as halo2-axiom 0.5.3's `write` does in the matching `SerdeFormat`.
pub(crate) fn write_key(
    key: KeyRef<'_>,
    encoding: FieldEncoding,
    out: &mut dyn Write,
) -> Result<()> {
    write_vk(&VkParts::of(key.vk())?, encoding, out)?;
    if let KeyRef::Proving(pk) = key {
        for poly in [pk.l0(), pk.l_last(), pk.l_active_row()] {
            write_poly(poly.values(), encoding, out)?;
        }
        write_poly_list(pk.fixed_values().iter().map(|p| p.values()), encoding, out)?;
        write_poly_list(pk.fixed_polys().iter().map(|p| p.values()), encoding, out)?;
        let permutation = pk.permutation();
        write_poly_list(
            permutation.permutations().iter().map(|p| p.values()),
            encoding,
            out,
        )?;
        write_poly_list(
            permutation.polys().iter().map(|p| p.values()),
            encoding,
            out,
        )?;
    }
    Ok(())
}

fn write_vk(parts: &VkParts, encoding: FieldEncoding, out: &mut dyn Write) -> Result<()> {
    out.write_all(&[VK_VERSION])?;
    codec_core::vk_layout::write(parts, encoding, out)
}

fn write_poly(values: &[Fr], encoding: FieldEncoding, out: &mut dyn Write) -> Result<()> {
    out.write_all(&u32_len(values.len())?.to_be_bytes())?;
    write_fr_slice(out, values, encoding)?;
    Ok(())
}

fn write_poly_list<'a>(
    polys: impl ExactSizeIterator<Item = &'a [Fr]>,
    encoding: FieldEncoding,
    out: &mut dyn Write,
) -> Result<()> {
    out.write_all(&u32_len(polys.len())?.to_be_bytes())?;
    for values in polys {
        write_poly(values, encoding, out)?;
    }
    Ok(())
}

/// halo2 stores lengths as `u32`; a longer vector cannot be written in its layout.
fn u32_len(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| codec_core::Error::LimitExceeded {
        what: "length in halo2's u32 length field",
        requested: len as u64,
        limit: u64::from(u32::MAX),
    })
}
