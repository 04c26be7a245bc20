//! A keycodec backend that speaks halo2's own key layouts.
//!
//! The payload of a [`RawBytesCodec`] container is byte for byte what halo2-axiom's
//! `pk.write(&mut w, format)` (or `vk.write`) writes, so:
//! - existing headerless halo2 key files (as snark-verifier-sdk, ezkl and axiom-sdk write
//!   them) can be imported with [`RawBytesCodec::import`] and saved as checked containers;
//! - a payload can be exported with [`RawBytesCodec::export`] for halo2's own `read`.
//!
//! Unlike halo2's reader, decoding never panics: every length and count is checked against
//! the circuit and the bytes available before anything is allocated, and every value is
//! checked unless the caller trusts the file.
//!
//! halo2's three `SerdeFormat`s map to this codec as follows:
//!
//! | `SerdeFormat` | wire mode | values checked on load |
//! |---|---|---|
//! | `RawBytes` | 0 (Montgomery limbs, uncompressed points) | yes, unless `Validation::Trusted` |
//! | `RawBytesUnchecked` | 0 (the same bytes) | no |
//! | `Processed` | 1 (canonical scalars, compressed points) | always |
//!
//! Loading accepts either wire mode whatever the codec's own format: the header says which.

mod decode;
mod encode;

use std::io::{Read, Write};
use std::path::Path;

use codec_core::circuit::configure;
use codec_core::field::FieldEncoding;
use codec_core::halo2_proofs::plonk::Circuit;
use codec_core::halo2_proofs::SerdeFormat;
use codec_core::halo2curves::bn256::Fr;
use codec_core::{
    CodecId, DecodeContext, Error, HaloKey, Key, KeyCodec, KeyRef, LoadOptions, PayloadReader,
    Result, Validation,
};

/// Wire mode of halo2's `RawBytes` (and `RawBytesUnchecked`) layout.
pub const MODE_RAW_BYTES: u8 = 0;
/// Wire mode of halo2's `Processed` layout.
pub const MODE_PROCESSED: u8 = 1;

/// The halo2-compatible codec. See the crate docs for the modes.
#[derive(Clone, Copy, Debug)]
pub struct RawBytesCodec {
    format: SerdeFormat,
}

impl Default for RawBytesCodec {
    /// halo2's `RawBytes`: the fastest layout, checked on load.
    fn default() -> Self {
        RawBytesCodec::new(SerdeFormat::RawBytes)
    }
}

impl RawBytesCodec {
    /// A codec writing `format`. `RawBytesUnchecked` writes the same bytes as `RawBytes` and
    /// loads without value checks, as halo2's own reader does.
    pub const fn new(format: SerdeFormat) -> Self {
        RawBytesCodec { format }
    }

    /// The halo2 format this codec writes.
    pub fn format(&self) -> SerdeFormat {
        self.format
    }

    /// Writes a key's payload alone, exactly as halo2's `pk.write(.., format)` /
    /// `vk.write(.., format)` would, for halo2's own reader or other tools.
    ///
    /// # Errors
    ///
    /// The writer's I/O errors.
    pub fn export<K: HaloKey>(&self, key: &K, writer: &mut impl Write) -> Result<()> {
        self.encode(key.as_key_ref(), writer)
    }

    /// Reads a headerless halo2 key (as `pk.write(.., format)` writes it; the format is this
    /// codec's), with every check this crate makes: nothing panics on a bad file. There is no
    /// checksum to compare, so use [`Validation::Checked`] for files from outside. Reads exactly
    /// one key; the stream may continue after it.
    ///
    /// # Errors
    ///
    /// Decode errors as for containers ([`Error::Truncated`], [`Error::Structure`],
    /// [`Error::InvalidFieldElement`], ...).
    pub fn import<C: Circuit<Fr>, K: HaloKey>(
        &self,
        reader: &mut impl Read,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        let context = self.import_context::<C>(K::KIND, circuit_params, options);
        let mut payload = PayloadReader::new(reader, options.limits.max_payload_bytes, false);
        self.decode(&mut payload, &context).and_then(K::from_key)
    }

    /// Reads a headerless halo2 key file; unlike [`RawBytesCodec::import`], the file's length
    /// bounds every allocation up front and bytes after the key are an error.
    ///
    /// # Errors
    ///
    /// As [`RawBytesCodec::import`], plus [`Error::TrailingBytes`] and I/O errors.
    pub fn import_file<C: Circuit<Fr>, K: HaloKey>(
        &self,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        let (mut reader, len) =
            codec_core::file::open_buffered(path, options.buffers.read_capacity)?;
        if len > options.limits.max_payload_bytes {
            return Err(Error::LimitExceeded {
                what: "key file length",
                requested: len,
                limit: options.limits.max_payload_bytes,
            });
        }
        let context = self.import_context::<C>(K::KIND, circuit_params, options);
        let mut payload = PayloadReader::new(&mut reader, len, true);
        let key = self.decode(&mut payload, &context)?;
        match payload.remaining() {
            0 => K::from_key(key),
            count => Err(Error::TrailingBytes { count }),
        }
    }

    fn import_context<C: Circuit<Fr>>(
        &self,
        kind: codec_core::KeyKind,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> DecodeContext {
        DecodeContext {
            kind,
            mode: self.wire_mode(),
            k: options.expected_k,
            validation: self.effective_validation(options.validation),
            limits: options.limits,
            cs: configure::<C>(circuit_params),
        }
    }
}

/// The byte layout of a wire mode.
fn encoding_of(mode: u8) -> Result<FieldEncoding> {
    match mode {
        MODE_RAW_BYTES => Ok(FieldEncoding::Raw),
        MODE_PROCESSED => Ok(FieldEncoding::Canonical),
        mode => Err(Error::UnsupportedMode {
            codec: CodecId::RawBytes,
            mode,
        }),
    }
}

impl KeyCodec for RawBytesCodec {
    fn id(&self) -> CodecId {
        CodecId::RawBytes
    }

    fn wire_mode(&self) -> u8 {
        match self.format {
            SerdeFormat::Processed => MODE_PROCESSED,
            SerdeFormat::RawBytes | SerdeFormat::RawBytesUnchecked => MODE_RAW_BYTES,
        }
    }

    fn effective_validation(&self, requested: Validation) -> Validation {
        match self.format {
            SerdeFormat::RawBytesUnchecked => Validation::Trusted,
            SerdeFormat::RawBytes | SerdeFormat::Processed => requested,
        }
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let encoding = encoding_of(self.wire_mode())?;
        encode::write_key(key, encoding, out)
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        let encoding = encoding_of(context.mode)?;
        decode::read_key(input, context, encoding)
    }
}
