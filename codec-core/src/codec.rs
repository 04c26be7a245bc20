//! The [`KeyCodec`] trait: one required method per direction, everything else provided.

use std::io::{Read, Seek, Write};
use std::path::Path;

use halo2_proofs::plonk::{Circuit, ConstraintSystem, ProvingKey, VerifyingKey};
use halo2curves::bn256::{Fr, G1Affine};

use crate::circuit;
use crate::container;
use crate::error::{Error, Result};
use crate::file;
use crate::header::{CodecId, KeyKind};
use crate::options::{LoadOptions, SaveOptions, Validation};
use crate::payload::PayloadReader;

/// How a codec wants files read by [`KeyCodec::load`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadMode {
    /// Read the file in order: small reads through a buffer of
    /// [`crate::BufferConfig::read_capacity`], bulk reads of field elements
    /// ([`PayloadReader::read_checked`]) straight into the key's memory, from several threads
    /// at explicit offsets on Unix (a `BufReader` elsewhere).
    Buffered,
    /// Memory-map the file and decode it as a slice (checksum verified before decoding);
    /// consumed parts of the mapping are released as decoding advances, so at most
    /// [`crate::RELEASE_STEP`] of the file stays resident beside the key.
    Mapped,
}

/// A borrowed key to encode.
#[derive(Clone, Copy, Debug)]
pub enum KeyRef<'a> {
    /// A proving key (its verifying key included).
    Proving(&'a ProvingKey<G1Affine>),
    /// A verifying key alone.
    Verifying(&'a VerifyingKey<G1Affine>),
}

impl KeyRef<'_> {
    /// Which kind of key this is.
    pub fn kind(&self) -> KeyKind {
        match self {
            KeyRef::Proving(_) => KeyKind::Proving,
            KeyRef::Verifying(_) => KeyKind::Verifying,
        }
    }

    /// The verifying key (a proving key's own, or this one).
    pub fn vk(&self) -> &VerifyingKey<G1Affine> {
        match self {
            KeyRef::Proving(pk) => pk.get_vk(),
            KeyRef::Verifying(vk) => vk,
        }
    }
}

/// A decoded key.
// The proving key is moved once, from decoder to caller: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Key {
    /// A proving key.
    Proving(ProvingKey<G1Affine>),
    /// A verifying key.
    Verifying(VerifyingKey<G1Affine>),
}

/// What a decoder is told besides the payload bytes.
#[derive(Debug)]
pub struct DecodeContext {
    /// The kind of key requested (and recorded in the header).
    pub kind: KeyKind,
    /// The codec's wire mode recorded in the header.
    pub mode: u8,
    /// The circuit size recorded in the header; `None` for headerless imports, where the
    /// payload's own `k` is the only one.
    pub k: Option<u32>,
    /// Check values, or trust them.
    pub validation: Validation,
    /// Limits from the load options.
    pub limits: crate::options::Limits,
    /// The circuit's freshly configured constraint system (selectors not yet converted).
    pub cs: ConstraintSystem<Fr>,
}

impl DecodeContext {
    /// Checks the `k` a payload declares: equal to the header's (when there is one) and
    /// within the field's and the caller's limits. Call it before anything sized by `2^k`.
    ///
    /// # Errors
    ///
    /// [`Error::Structure`] when payload and header disagree, [`Error::KOutOfRange`].
    pub fn check_payload_k(&self, k: u32) -> Result<()> {
        if let Some(header_k) = self.k {
            if k != header_k {
                return Err(Error::Structure {
                    what: "k in the payload against the header",
                    expected: u64::from(header_k),
                    found: u64::from(k),
                });
            }
        }
        circuit::check_k(k, &self.limits)
    }

    /// Builds a proving key whose polynomials `read_polys` decodes from `input`, checking the
    /// verifying key's parts against the circuit first and building its evaluation domain on
    /// another thread while the polynomials are read ([`circuit::VkPlan::finish_while`]).
    /// Before anything `2^k`-sized is allocated, the payload must hold at least
    /// [`FR_BYTES`](crate::field::FR_BYTES) per polynomial element: for backends that store
    /// every element (rawbytes, rkyv), so that a short forged file cannot claim a large key.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] when the payload is shorter than the polynomials, the errors of
    /// [`circuit::VkPlan::new`], `read_polys`'s, and those of [`circuit::assemble_pk`].
    pub fn assemble_proving_while_reading(
        &self,
        vk: circuit::VkParts,
        input: &mut PayloadReader<'_>,
        read_polys: impl FnOnce(&mut PayloadReader<'_>, &circuit::PkShape) -> Result<circuit::PkParts>,
    ) -> Result<Key> {
        let plan = circuit::VkPlan::new(self.cs.clone(), vk, &self.limits)?;
        input.ensure_available(
            plan.pk_shape().total_elements() * crate::field::FR_BYTES as u128,
            "proving key polynomials",
        )?;
        let (vk, polys) = plan.finish_while(|shape| read_polys(input, shape))?;
        circuit::assemble_pk(vk, polys).map(Key::Proving)
    }

    /// Builds the requested key from decoded parts, checking them against the circuit. The
    /// verifying key (whose evaluation domain costs O(2^k) memory) is assembled last, after
    /// the polynomials were read: only data actually present justifies that memory.
    ///
    /// # Errors
    ///
    /// [`Error::Structure`] and the other errors of [`circuit::assemble_vk`] and
    /// [`circuit::assemble_pk`]; [`Error::KindMismatch`] if `pk` does not match the
    /// requested kind (a backend bug).
    pub fn assemble(&self, vk: circuit::VkParts, pk: Option<circuit::PkParts>) -> Result<Key> {
        let vk = circuit::assemble_vk(self.cs.clone(), vk, &self.limits)?;
        match (self.kind, pk) {
            (KeyKind::Proving, Some(pk)) => circuit::assemble_pk(vk, pk).map(Key::Proving),
            (KeyKind::Verifying, None) => Ok(Key::Verifying(vk)),
            (kind, _) => Err(Error::KindMismatch {
                expected: kind,
                found: match kind {
                    KeyKind::Proving => KeyKind::Verifying,
                    KeyKind::Verifying => KeyKind::Proving,
                },
            }),
        }
    }
}

/// A halo2 key type that a [`KeyCodec`] can store: `ProvingKey<G1Affine>` or
/// `VerifyingKey<G1Affine>`. Sealed.
pub trait HaloKey: Sized + sealed::Sealed {
    /// The kind recorded in the header.
    const KIND: KeyKind;

    /// Borrows the key for encoding.
    fn as_key_ref(&self) -> KeyRef<'_>;

    /// Takes the key of this kind out of a decoded [`Key`].
    ///
    /// # Errors
    ///
    /// [`Error::KindMismatch`] if `key` is of the other kind (a backend bug).
    fn from_key(key: Key) -> Result<Self>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for halo2_proofs::plonk::ProvingKey<halo2curves::bn256::G1Affine> {}
    impl Sealed for halo2_proofs::plonk::VerifyingKey<halo2curves::bn256::G1Affine> {}
}

impl HaloKey for ProvingKey<G1Affine> {
    const KIND: KeyKind = KeyKind::Proving;

    fn as_key_ref(&self) -> KeyRef<'_> {
        KeyRef::Proving(self)
    }

    fn from_key(key: Key) -> Result<Self> {
        match key {
            Key::Proving(pk) => Ok(pk),
            Key::Verifying(_) => Err(Error::KindMismatch {
                expected: KeyKind::Proving,
                found: KeyKind::Verifying,
            }),
        }
    }
}

impl HaloKey for VerifyingKey<G1Affine> {
    const KIND: KeyKind = KeyKind::Verifying;

    fn as_key_ref(&self) -> KeyRef<'_> {
        KeyRef::Verifying(self)
    }

    fn from_key(key: Key) -> Result<Self> {
        match key {
            Key::Verifying(vk) => Ok(vk),
            Key::Proving(_) => Err(Error::KindMismatch {
                expected: KeyKind::Verifying,
                found: KeyKind::Proving,
            }),
        }
    }
}

/// A backend that stores halo2 keys (BN254, KZG) as a payload inside keycodec's container.
///
/// A backend implements the four required items; the container (header, checksums, length
/// checks), file handling and the key-typed conveniences are provided here, once, for all
/// backends. Decoding needs the circuit type and its parameters, as halo2's own
/// `ProvingKey::read` does: they fix the constraint system the key must match.
///
/// ```no_run
/// # use codec_core::{KeyCodec, LoadOptions, SaveOptions};
/// # use halo2_proofs::plonk::{Circuit, ProvingKey};
/// # use halo2curves::bn256::{Fr, G1Affine};
/// fn roundtrip<K: KeyCodec, C: Circuit<Fr, Params = ()>>(
///     codec: &K,
///     pk: &ProvingKey<G1Affine>,
/// ) -> codec_core::Result<ProvingKey<G1Affine>> {
///     codec.save::<C, _>("circuit.pk".as_ref(), pk, (), &SaveOptions::default())?;
///     codec.load::<C, _>("circuit.pk".as_ref(), (), &LoadOptions::default())
/// }
/// ```
pub trait KeyCodec {
    /// The id written into (and required from) the container header.
    fn id(&self) -> CodecId;

    /// The wire mode this codec writes (recorded in the header; decoders read any mode
    /// they know).
    fn wire_mode(&self) -> u8;

    /// Encodes a key's payload (the part after the container header).
    ///
    /// # Errors
    ///
    /// The writer's I/O errors, or backend errors.
    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()>;

    /// Decodes a payload written by [`KeyCodec::encode`] (in any wire mode this codec knows),
    /// reading only through `input` and checking every count before allocating.
    ///
    /// # Errors
    ///
    /// Any decode error; never panics on bad input.
    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key>;

    /// How [`KeyCodec::load`] reads a file. The default streams it through a `BufReader` of
    /// the configured capacity; a codec that decodes from borrowed bytes (rkyv) asks for a
    /// memory map instead, which also lets the checksum be verified before decoding.
    fn load_mode(&self) -> LoadMode {
        LoadMode::Buffered
    }

    /// The validation this codec applies given the caller's choice (a backend whose mode is
    /// itself "unchecked" returns [`Validation::Trusted`]).
    fn effective_validation(&self, requested: Validation) -> Validation {
        requested
    }

    /// Writes a container (header and payload) at the writer's current position. The writer
    /// must be seekable: the header, written last, records the payload's length and checksum.
    ///
    /// # Errors
    ///
    /// I/O errors and backend errors.
    fn write<C, K>(
        &self,
        writer: &mut (impl Write + Seek),
        key: &K,
        circuit_params: C::Params,
    ) -> Result<()>
    where
        Self: Sized,
        C: Circuit<Fr>,
        K: HaloKey,
    {
        let fingerprint = circuit::fingerprint::<C>(circuit_params);
        container::write(self, key.as_key_ref(), fingerprint, writer)
    }

    /// Encodes a container into a new vector.
    ///
    /// # Errors
    ///
    /// Backend errors.
    fn to_vec<C, K>(&self, key: &K, circuit_params: C::Params) -> Result<Vec<u8>>
    where
        Self: Sized,
        C: Circuit<Fr>,
        K: HaloKey,
    {
        let mut cursor = std::io::Cursor::new(Vec::new());
        self.write::<C, K>(&mut cursor, key, circuit_params)?;
        Ok(cursor.into_inner())
    }

    /// Reads one container from a stream, checking header, circuit, lengths and checksum.
    /// The stream's length is unknown, so allocations grow with the data actually read.
    ///
    /// # Errors
    ///
    /// Any [`Error`] variant that describes bad input; see the crate docs.
    fn read<C, K>(
        &self,
        reader: &mut impl Read,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K>
    where
        Self: Sized,
        C: Circuit<Fr>,
        K: HaloKey,
    {
        let cs = circuit::configure::<C>(circuit_params);
        container::read(self, K::KIND, cs, reader, None, options).and_then(K::from_key)
    }

    /// Decodes a container held in memory; the slice must hold exactly one container.
    ///
    /// # Errors
    ///
    /// As [`KeyCodec::read`], plus [`Error::TrailingBytes`] for bytes after the container.
    fn read_slice<C, K>(
        &self,
        bytes: &[u8],
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K>
    where
        Self: Sized,
        C: Circuit<Fr>,
        K: HaloKey,
    {
        let cs = circuit::configure::<C>(circuit_params);
        container::read_slice(self, K::KIND, cs, bytes, None, options).and_then(K::from_key)
    }

    /// Saves a key to `path` atomically and durably: a temporary file in the same folder is
    /// written, synced and renamed over `path`, then the folder is synced. On any error the
    /// temporary file is removed and `path` is untouched.
    ///
    /// # Errors
    ///
    /// I/O errors and backend errors.
    fn save<C, K>(
        &self,
        path: &Path,
        key: &K,
        circuit_params: C::Params,
        options: &SaveOptions,
    ) -> Result<()>
    where
        Self: Sized,
        C: Circuit<Fr>,
        K: HaloKey,
    {
        let fingerprint = circuit::fingerprint::<C>(circuit_params);
        file::save_atomic(path, options.buffers.file_write_capacity(), |writer| {
            container::write(self, key.as_key_ref(), fingerprint, writer)
        })
    }

    /// Loads a key from `path`, checking the header against the file's real length before
    /// decoding anything.
    ///
    /// # Errors
    ///
    /// As [`KeyCodec::read_slice`], plus I/O errors opening the file.
    fn load<C, K>(&self, path: &Path, circuit_params: C::Params, options: &LoadOptions) -> Result<K>
    where
        Self: Sized,
        C: Circuit<Fr>,
        K: HaloKey,
    {
        let cs = circuit::configure::<C>(circuit_params);
        let key = match self.load_mode() {
            #[cfg(unix)]
            LoadMode::Buffered => {
                let file = std::fs::File::open(path)?;
                let buffer = options.buffers.file_read_capacity();
                container::read_file(self, K::KIND, cs, &file, buffer, options)
            }
            #[cfg(not(unix))]
            LoadMode::Buffered => {
                let (mut reader, len) = file::open_buffered(path, options.buffers.read_capacity)?;
                container::read(self, K::KIND, cs, &mut reader, Some(len), options)
            }
            LoadMode::Mapped => {
                let mapped = file::MappedFile::open(path)?;
                let release = |offset: usize, len: usize| mapped.release(offset, len);
                container::read_slice(self, K::KIND, cs, mapped.bytes(), Some(&release), options)
            }
        };
        key.and_then(K::from_key)
    }
}
