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
//!
//! It also stores KZG parameters ([`KeyCodecExt::save_params`](keycodec_core::KeyCodecExt)):
//! the payload is halo2's own parameters file, so [`RawBytesCodec::import_params`] reads the
//! files `ParamsKZG::write_custom` writes (`kzg_bn254_22.srs`) and
//! [`RawBytesCodec::export_params`] writes them.

#![forbid(unsafe_code)]

mod decode;
mod encode;

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use keycodec_core::backend_api::circuit::configure;
use keycodec_core::backend_api::field::FieldEncoding;
use keycodec_core::backend_api::{
    read_params, write_params, CodecId, DecodeContext, Error, IoContext, Key, KeyCodec, KeyRef,
    KzgParams, PayloadReader, Result, Validation, WireMode,
};
use keycodec_core::halo2_proofs::plonk::Circuit;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_core::transport::FileSource;
use keycodec_core::{ArtifactKind, HaloKey, LoadOptions};

/// This backend's id in the container header.
pub const ID: CodecId = CodecId::RAWBYTES;
/// Wire mode of halo2's `RawBytes` (and `RawBytesUnchecked`) layout.
pub const MODE_RAW_BYTES: WireMode = WireMode::new(0, "RawBytes");
/// Wire mode of halo2's `Processed` layout.
pub const MODE_PROCESSED: WireMode = WireMode::new(1, "Processed");

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
    /// As [`RawBytesCodec::import`], plus [`Error::TrailingBytes`] and [`Error::Io`] naming
    /// the path.
    pub fn import_file<C: Circuit<Fr>, K: HaloKey>(
        &self,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        let import = || {
            let file = File::open(path).during("open")?;
            let context = self.import_context::<C>(K::KIND, circuit_params, options);
            headerless(&file, options, "key file length", |payload| {
                self.decode(payload, &context)
            })
            .and_then(K::from_key)
        };
        import().map_err(|err| err.at_path(path))
    }

    /// Writes parameters exactly as halo2's `ParamsKZG::write_custom(.., format)` does (the
    /// file halo2's `read_custom` and `ParamsKZG::read` read), in this codec's format.
    ///
    /// # Errors
    ///
    /// The writer's I/O errors.
    pub fn export_params(&self, params: &KzgParams, writer: &mut impl Write) -> Result<()> {
        self.encode_params(params, writer)
    }

    /// Reads a headerless halo2 parameters file (as `ParamsKZG::write_custom(.., format)`
    /// writes it, `kzg_bn254_22.srs` and the like; the format is this codec's) with every
    /// check this crate makes: its `k` against [`Limits::max_k`](keycodec_core::Limits) before
    /// anything is allocated, every point unless trusted (`RawBytesUnchecked` trusts them),
    /// compressed points decompressed on every core. The stream's length is unknown, so
    /// allocations grow with the data actually read.
    ///
    /// # Errors
    ///
    /// [`Error::KOutOfRange`], [`Error::Truncated`], [`Error::InvalidPoint`]...
    pub fn import_params(
        &self,
        reader: &mut impl Read,
        options: &LoadOptions,
    ) -> Result<KzgParams> {
        let context = self.params_context(options);
        let mut payload = PayloadReader::new(reader, options.limits.max_payload_bytes, false);
        let params = self.decode_params(&mut payload, &context)?;
        keycodec_core::test_setup::refuse_test_setup(&params, options.test_setup)?;
        Ok(params)
    }

    /// Reads a headerless halo2 parameters file; unlike [`RawBytesCodec::import_params`], the
    /// file's length bounds every allocation up front and bytes after the parameters are an
    /// error.
    ///
    /// # Errors
    ///
    /// As [`RawBytesCodec::import_params`], plus [`Error::TrailingBytes`] and [`Error::Io`]
    /// naming the path.
    pub fn import_params_file(&self, path: &Path, options: &LoadOptions) -> Result<KzgParams> {
        let import = || {
            let file = File::open(path).during("open")?;
            self.import_params_from(&file, options)
        };
        import().map_err(|err| err.at_path(path))
    }

    /// [`RawBytesCodec::import_params_file`] of a file already open (its whole length): for a
    /// caller that checked the file it opened and must decode that file.
    ///
    /// # Errors
    ///
    /// As [`RawBytesCodec::import_params_file`], naming no path.
    pub fn import_params_from(&self, file: &File, options: &LoadOptions) -> Result<KzgParams> {
        let context = self.params_context(options);
        let params = headerless(file, options, "parameters file length", |payload| {
            self.decode_params(payload, &context)
        })?;
        keycodec_core::test_setup::refuse_test_setup(&params, options.test_setup)?;
        Ok(params)
    }

    fn params_context(&self, options: &LoadOptions) -> DecodeContext {
        DecodeContext {
            kind: ArtifactKind::Params,
            payload_kind: ArtifactKind::Params,
            mode: self.wire_mode(),
            k: options.expected_k,
            validation: self.effective_validation(self.wire_mode(), options.validation),
            limits: options.limits,
            cs: Default::default(),
        }
    }

    fn import_context<C: Circuit<Fr>>(
        &self,
        kind: ArtifactKind,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> DecodeContext {
        DecodeContext {
            kind,
            payload_kind: kind,
            mode: self.wire_mode(),
            k: options.expected_k,
            validation: self.effective_validation(self.wire_mode(), options.validation),
            limits: options.limits,
            cs: configure::<C>(circuit_params),
        }
    }
}

impl KeyCodec for RawBytesCodec {
    fn name(&self) -> &'static str {
        "rawbytes"
    }

    fn id(&self) -> CodecId {
        ID
    }

    fn wire_modes(&self) -> &'static [WireMode] {
        &[MODE_RAW_BYTES, MODE_PROCESSED]
    }

    fn wire_mode(&self) -> WireMode {
        match self.format {
            SerdeFormat::Processed => MODE_PROCESSED,
            SerdeFormat::RawBytes | SerdeFormat::RawBytesUnchecked => MODE_RAW_BYTES,
        }
    }

    fn effective_validation(&self, mode: WireMode, requested: Validation) -> Validation {
        if mode == MODE_PROCESSED {
            // Canonical scalars and compressed points are checked by decoding them.
            Validation::Checked
        } else if matches!(self.format, SerdeFormat::RawBytesUnchecked) {
            Validation::Trusted
        } else {
            requested
        }
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        encode::write_key(key, encoding_of(self.wire_mode()), out)
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        decode::read_key(input, context, encoding_of(context.mode))
    }

    fn stores_params(&self) -> bool {
        true
    }

    /// halo2's own parameters layout (`ParamsKZG::write_custom`) in this codec's format.
    fn encode_params(&self, params: &KzgParams, out: &mut dyn Write) -> Result<()> {
        write_params(params, encoding_of(self.wire_mode()), out)
    }

    fn decode_params(
        &self,
        input: &mut PayloadReader<'_>,
        context: &DecodeContext,
    ) -> Result<KzgParams> {
        read_params(input, encoding_of(context.mode), context.validation, |k| {
            context.check_payload_k(k)
        })
    }
}

/// The byte layout of a wire mode (one of [`KeyCodec::wire_modes`]: the container checked).
fn encoding_of(mode: WireMode) -> FieldEncoding {
    if mode == MODE_PROCESSED {
        FieldEncoding::Canonical
    } else {
        FieldEncoding::Raw
    }
}
/// The one framing of a headerless halo2 file (a key or parameters): the file's length,
/// within [`Limits::max_payload_bytes`](keycodec_core::Limits), bounds every allocation up front;
/// `decode` reads through a reader of exactly that length; bytes left after it are an error.
fn headerless<T>(
    file: &File,
    options: &LoadOptions,
    what: &'static str,
    decode: impl FnOnce(&mut PayloadReader<'_>) -> Result<T>,
) -> Result<T> {
    let len = file.metadata().during("read the metadata of")?.len();
    if len > options.limits.max_payload_bytes {
        return Err(Error::LimitExceeded {
            what,
            requested: len,
            limit: options.limits.max_payload_bytes,
        });
    }
    let source = FileSource::new(file);
    let mut payload = PayloadReader::from_file(&source, len, options.buffers.file_read_capacity());
    let decoded = decode(&mut payload)?;
    match payload.remaining() {
        0 => Ok(decoded),
        count => Err(Error::TrailingBytes { count }),
    }
}
