//! A keycodec backend that stores halo2 keys with serde and bincode, the approach of the seed's
//! "derive serde for proving key".
//!
//! halo2-axiom's key fields are private, so the payload is a serde mirror of the key's data
//! built from its accessors: when saving, the mirror *borrows* every polynomial (nothing is
//! cloned); when loading, the mirror owns the decoded vectors, which are moved into
//! `ProvingKey::from_parts` after every count and length has been checked against the
//! circuit.
//!
//! # Layout: serde values bincode can move in bulk
//!
//! The verifying key's commitments go through halo2curves' own serde (compressed points,
//! decompressed and so checked on load). A polynomial is a sequence of byte strings, each the
//! canonical encodings (`to_repr`, 32 bytes per element) of up to 32,768 elements (1 MiB):
//! bincode writes a byte string with one length and one write, and reads it with one read,
//! and the conversions run in parallel. (The seed's derive, a `Vec<Fr>` through halo2curves'
//! serde, makes one serde call per *byte*: measured at k = 22, 18 s to save and 23 to 27 s to
//! load; see the README.) The payload is 32 bytes per scalar plus 8 bytes of length per MiB,
//! about the size of halo2's `RawBytes`.
//!
//! Loads are always value-checked: decoding a canonical encoding is a range check and a
//! conversion into Montgomery form, so [`keycodec_core::Validation::Trusted`] has nothing to
//! skip. A raw-limb mode would skip the conversions, but it would be `codec-rawbytes` with
//! extra framing; it is not offered.
//!
//! # bincode 1.3.3
//!
//! bincode is marked unmaintained (RUSTSEC-2025-0141) and its 3.0.0 release is a tombstone
//! that does not compile. This crate pins 1.3.3, the serde-based release the seed measured,
//! whose format is stable. Decoding is bounded with bincode's byte limit (the declared
//! payload length); serde never pre-allocates more than 1 MiB for a declared sequence length;
//! and byte strings are read by this crate's own `BincodeRead`, which refuses any longer
//! than a chunk before allocating. A forged length prefix allocates nothing of its size.

#![forbid(unsafe_code)]

mod mirror;
mod reader;
mod scalars;

use std::io::{BufReader, BufWriter, Write};

use bincode::Options;
use keycodec_core::backend_api::{
    ArtifactKind, CodecId, DecodeContext, Error, IoContext, Key, KeyCodec, KeyRef, PayloadReader,
    Result, Validation, WireMode,
};
use reader::ChunkReader;

/// This backend's id in the container header.
pub const ID: CodecId = CodecId::BINCODE;

/// The only wire mode: bincode 1.3.3, fixed-width little-endian integers, polynomials as
/// 1 MiB byte strings of canonical scalars.
pub const MODE_SERDE: WireMode = WireMode::new(0, "serde");

/// Buffer between bincode's small reads and writes (lengths, the verifying key) and the
/// payload stream: a local buffer of a concrete type keeps each of those a memcpy instead of
/// a call through `dyn Read`/`dyn Write`.
const STAGING: usize = 1 << 16;

/// The serde + bincode codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct BincodeCodec;

fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
}

impl KeyCodec for BincodeCodec {
    fn reads_in_order(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "bincode"
    }

    fn id(&self) -> CodecId {
        ID
    }

    fn wire_modes(&self) -> &'static [WireMode] {
        &[MODE_SERDE]
    }

    fn wire_mode(&self) -> WireMode {
        MODE_SERDE
    }

    /// Always checked: halo2curves' `Deserialize` checks every value.
    fn effective_validation(&self, _mode: WireMode, _requested: Validation) -> Validation {
        Validation::Checked
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let mut writer = BufWriter::with_capacity(STAGING, out);
        let vk = mirror::VkRef::of(key.vk())?;
        match key {
            KeyRef::Verifying(_) => options().serialize_into(&mut writer, &vk),
            KeyRef::Proving(pk) => {
                options().serialize_into(&mut writer, &mirror::PkRef::of(vk, pk))
            }
        }
        .map_err(|err| bincode_error(*err, "write"))?;
        writer.flush().during("write")
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        let limited = options().with_limit(input.remaining());
        let mut reader = BufReader::with_capacity(STAGING, &mut *input);
        let key = match context.kind {
            // Parameters never reach here: this codec stores none.
            ArtifactKind::Verifying | ArtifactKind::Params => limited
                .deserialize_from_custom::<_, mirror::VkOwned>(ChunkReader::new(&mut reader))
                .map_err(|err| bincode_error(*err, "read"))
                .and_then(|vk| context.assemble_vk(vk.into_parts(context)?)),
            ArtifactKind::Proving => limited
                .deserialize_from_custom::<_, mirror::PkOwned>(ChunkReader::new(&mut reader))
                .map_err(|err| bincode_error(*err, "read"))
                .and_then(|pk| {
                    let (vk, pk) = pk.into_parts(context)?;
                    context.assemble_pk(vk, pk)
                }),
        }?;
        // Bytes the local buffer read ahead but bincode did not consume are left over, unless
        // the payload continues (a verifying key read from a proving key's payload).
        if context.payload_kind != context.kind {
            return Ok(key);
        }
        match reader.buffer().len() {
            0 => Ok(key),
            count => Err(Error::TrailingBytes {
                count: count as u64 + input.remaining(),
            }),
        }
    }
}

/// Maps bincode's errors onto the core's: an early end is truncation, the byte limit is a
/// limit, and everything else (invalid values, bad lengths, bad tags) keeps bincode's message
/// as the source.
fn bincode_error(err: bincode::ErrorKind, operation: &'static str) -> Error {
    match err {
        bincode::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            Error::Truncated {
                context: "bincode payload",
            }
        }
        bincode::ErrorKind::Io(io) => Error::io(operation, io),
        bincode::ErrorKind::SizeLimit => Error::Truncated {
            context: "bincode payload (read past the declared payload length)",
        },
        other => Error::Backend {
            codec: "bincode",
            source: Box::new(other),
        },
    }
}
