//! Writes halo2's key layout with few, large writes.

use std::io::Write;

use keycodec_core::backend_api::field::{write_fr_slice, FieldEncoding};
use keycodec_core::backend_api::parts::groups;
use keycodec_core::backend_api::{Error, IoContext, KeyRef, Result, VkParts};
use keycodec_core::halo2curves::bn256::Fr;

/// halo2-axiom's verifying-key version byte.
pub(crate) const VK_VERSION: u8 = 0x02;

/// Writes `key` exactly as halo2-axiom 0.5.3's `write` does in the matching `SerdeFormat`.
pub(crate) fn write_key(
    key: KeyRef<'_>,
    encoding: FieldEncoding,
    out: &mut dyn Write,
) -> Result<()> {
    out.write_all(&[VK_VERSION]).during("write")?;
    keycodec_core::backend_api::vk_layout::write(&VkParts::of(key.vk())?, encoding, out)?;
    if let KeyRef::Proving(pk) = key {
        for (group, polys) in groups(pk) {
            if group.is_list() {
                out.write_all(&u32_len(polys.len())?.to_be_bytes())
                    .during("write")?;
            }
            for values in polys {
                write_poly(values, encoding, out)?;
            }
        }
    }
    Ok(())
}

fn write_poly(values: &[Fr], encoding: FieldEncoding, out: &mut dyn Write) -> Result<()> {
    out.write_all(&u32_len(values.len())?.to_be_bytes())
        .during("write")?;
    write_fr_slice(out, values, encoding).during("write")
}

/// halo2 stores lengths as `u32`; a longer vector cannot be written in its layout.
fn u32_len(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| Error::LimitExceeded {
        what: "length in halo2's u32 length field",
        requested: len as u64,
        limit: u64::from(u32::MAX),
    })
}
