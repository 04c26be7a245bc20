//! What users do with a codec: save and load files, write and read streams and slices.
//! Provided once, for every [`KeyCodec`], by a blanket implementation.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use halo2_proofs::plonk::{Circuit, VerifyingKey};
use halo2curves::bn256::{Fr, G1Affine};

use crate::circuit::configure;
use crate::codec::KeyCodec;
use crate::container::{self, Decoded, Described, Input, Request};
use crate::error::{Error, IoContext, Result};
use crate::file::save_atomic;
use crate::ids::ArtifactKind;
use crate::ids::KeyDigest;
use crate::item::KzgParams;
use crate::item::{HaloKey, Item, ItemRef};
use crate::options::{LoadOptions, Recording, SaveOptions};
use crate::record::RecordableParams;
use crate::source::FileSource;

/// The operations users call on a codec: implemented for every [`KeyCodec`] (and for
/// `dyn KeyCodec`), so a backend never implements it.
///
/// Every operation needs the circuit type `C` and its parameters, as halo2's own
/// `ProvingKey::read` does: they fix the constraint system a key must match, whose
/// fingerprint the container records.
///
/// ```no_run
/// use keycodec_core::{KeyCodec, KeyCodecExt, LoadOptions, SaveOptions};
/// # use keycodec_core::halo2_proofs::plonk::{Circuit, ProvingKey};
/// # use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
/// fn roundtrip<C: Circuit<Fr, Params = ()>>(
///     codec: &dyn KeyCodec,
///     pk: &ProvingKey<G1Affine>,
/// ) -> keycodec_core::Result<ProvingKey<G1Affine>> {
///     codec.save::<C, _>("circuit.pk".as_ref(), pk, (), &SaveOptions::default())?;
///     codec.load::<C, _>("circuit.pk".as_ref(), (), &LoadOptions::default())
/// }
/// ```
pub trait KeyCodecExt: KeyCodec {
    /// Saves a key to `path` atomically and durably: a temporary file in the same folder is
    /// written, synced and renamed over `path`, then the folder is synced. On any error the
    /// temporary file is removed and `path` is untouched. Returns the key's digest, which the
    /// file also records: pin it in [`LoadOptions::expected_digest`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the operation and path, and the codec's encoding errors
    /// ([`Error::NotStorable`]).
    fn save<C: Circuit<Fr>, K: HaloKey>(
        &self,
        path: &Path,
        key: &K,
        circuit_params: C::Params,
        options: &SaveOptions,
    ) -> Result<KeyDigest>
    where
        C::Params: RecordableParams,
    {
        let circuit = match options.recording {
            Recording::Record => Described::of::<C>(circuit_params),
            Recording::Omit => Described::unrecorded::<C>(circuit_params),
        };
        save_atomic(path, options.buffers.file_write_capacity(), |writer| {
            container::write(self, ItemRef::Key(key.as_key_ref()), &circuit, writer)
        })
        .map_err(|err| err.at_path(path))
    }

    /// Saves KZG parameters to `path` as [`KeyCodecExt::save`] saves keys (atomically,
    /// durably), in a container of kind [`ArtifactKind::Params`]; returns their digest. Only
    /// codecs that store parameters ([`KeyCodec::stores_params`]) accept them.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::save`], and [`Error::KindNotSupported`].
    fn save_params(
        &self,
        path: &Path,
        params: &KzgParams,
        options: &SaveOptions,
    ) -> Result<KeyDigest> {
        save_atomic(path, options.buffers.file_write_capacity(), |writer| {
            container::write(self, ItemRef::Params(params), &Described::none(), writer)
        })
        .map_err(|err| err.at_path(path))
    }

    /// Loads KZG parameters from `path`, with the checks a key's load makes: every G1 point
    /// on the curve and both G2 points in their subgroup unless
    /// [`Validation::Trusted`](crate::Validation::Trusted), the checksum, the pin.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::load`].
    fn load_params(&self, path: &Path, options: &LoadOptions) -> Result<KzgParams> {
        let open = || {
            let file = File::open(path).during("open")?;
            self.load_params_from(&file, options)
        };
        open().map_err(|err: Error| err.at_path(path))
    }

    /// Loads KZG parameters from a file already open (its whole length), as
    /// [`KeyCodecExt::load_params`] does from a path: for a caller that checked the file it
    /// opened (hashed it) and must decode that file, not whatever the path names by then.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::load_params`], naming no path (the caller knows it).
    fn load_params_from(&self, file: &File, options: &LoadOptions) -> Result<KzgParams> {
        with_open_file(file, options, |input| {
            into_params(container::read(
                self,
                Request::of(ArtifactKind::Params),
                None,
                input,
                options,
            )?)
        })
    }

    /// Decodes KZG parameters from a container held in memory.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::read_slice`].
    fn read_params_slice(&self, bytes: &[u8], options: &LoadOptions) -> Result<KzgParams> {
        into_params(container::read(
            self,
            Request::of(ArtifactKind::Params),
            None,
            Input::Memory(bytes),
            options,
        )?)
    }

    /// Loads a key from `path`: the header is checked against the file's real length
    /// before anything is decoded; small reads go through a buffer of
    /// [`BufferConfig::file_read_capacity`](crate::BufferConfig::file_read_capacity),
    /// polynomial data straight into the key's memory from several threads. Every byte
    /// decoded is the byte checksummed: a file changed while it loads is refused (a
    /// checksum mismatch, a truncation) or, if the change came after the bytes were read,
    /// loads as it was.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::read_slice`], plus [`Error::Io`] naming the path.
    fn load<C: Circuit<Fr>, K: HaloKey>(
        &self,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        load_file::<C, K>(self, path, circuit_params, options, Request::of(K::KIND))
            .map(|(key, _)| key)
    }

    /// Loads a key from a file already open (its whole length), as [`KeyCodecExt::load`]
    /// does from a path: for a caller that looked at the file it opened (its header) and
    /// must decode that file, not whatever the path names by then.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::load`], naming no path (the caller knows it).
    fn load_from<C: Circuit<Fr>, K: HaloKey>(
        &self,
        file: &File,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        with_open_file(file, options, |input| {
            into_key(container::read(
                self,
                Request::of(K::KIND),
                Some(configure::<C>(circuit_params)),
                input,
                options,
            )?)
        })
    }

    /// Loads a key from `path` as [`KeyCodecExt::load`] does, and returns its digest too
    /// (computed while the polynomials are read, and checked against the digest the file
    /// records).
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::load`], plus [`Error::RecordedDigestMismatch`].
    fn load_with_digest<C: Circuit<Fr>, K: HaloKey>(
        &self,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<(K, KeyDigest)> {
        let request = Request {
            digest: true,
            ..Request::of(K::KIND)
        };
        let (key, digest) = load_file::<C, K>(self, path, circuit_params, options, request)?;
        let digest = digest.ok_or_else(|| Error::Internal("the digest was not computed".into()))?;
        Ok((key, digest))
    }

    /// Loads a verifying key from `path`, which holds either a verifying key or a proving key:
    /// from a proving key's container only its verifying key is decoded (a verifier needs
    /// nothing else), and its polynomials are not read when a pin
    /// ([`LoadOptions::expected_transcript`], or [`LoadOptions::expected_digest`] with the
    /// verifying key's digest) authenticates the verifying key, or when
    /// [`LoadOptions::checksum`] skips the checksum; otherwise they are read and hashed, not
    /// decoded, so that the whole payload's checksum is verified as always.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::load`].
    fn load_verifying_key<C: Circuit<Fr>>(
        &self,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<VerifyingKey<G1Affine>> {
        let request = Request {
            from_proving_key: true,
            ..Request::of(ArtifactKind::Verifying)
        };
        load_file::<C, VerifyingKey<G1Affine>>(self, path, circuit_params, options, request)
            .map(|(vk, _)| vk)
    }

    /// Writes a container (header and payload) at the writer's current position; returns the
    /// key's digest. The writer must be seekable: the header, written last, records the
    /// payload's length, its checksum and the key's digest.
    ///
    /// # Errors
    ///
    /// The writer's I/O errors and the codec's encoding errors.
    fn write<C: Circuit<Fr>, K: HaloKey>(
        &self,
        writer: &mut (impl Write + Seek),
        key: &K,
        circuit_params: C::Params,
    ) -> Result<KeyDigest>
    where
        C::Params: RecordableParams,
    {
        let circuit = Described::of::<C>(circuit_params);
        container::write(self, ItemRef::Key(key.as_key_ref()), &circuit, writer)
    }

    /// Encodes a container into a new vector.
    ///
    /// # Errors
    ///
    /// The codec's encoding errors.
    fn to_vec<C: Circuit<Fr>, K: HaloKey>(
        &self,
        key: &K,
        circuit_params: C::Params,
    ) -> Result<Vec<u8>>
    where
        C::Params: RecordableParams,
    {
        let mut cursor = std::io::Cursor::new(Vec::new());
        self.write::<C, K>(&mut cursor, key, circuit_params)?;
        Ok(cursor.into_inner())
    }

    /// Reads one container from a stream, checking header, circuit, lengths and checksum.
    /// The stream's length is unknown, so allocations grow with the data actually read; the
    /// stream may continue after the container.
    ///
    /// # Errors
    ///
    /// Any [`Error`] variant that describes bad input; see the crate docs.
    fn read<C: Circuit<Fr>, K: HaloKey>(
        &self,
        reader: &mut impl Read,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        let cs = configure::<C>(circuit_params);
        let decoded = container::read(
            self,
            Request::of(K::KIND),
            Some(cs),
            Input::Stream(reader),
            options,
        )?;
        into_key(decoded)
    }

    /// Decodes a container held in memory; the slice must hold exactly one container.
    ///
    /// # Errors
    ///
    /// As [`KeyCodecExt::read`], plus [`Error::LengthMismatch`] and [`Error::TrailingBytes`]
    /// when the slice's length is not the container's.
    fn read_slice<C: Circuit<Fr>, K: HaloKey>(
        &self,
        bytes: &[u8],
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        let cs = configure::<C>(circuit_params);
        let decoded = container::read(
            self,
            Request::of(K::KIND),
            Some(cs),
            Input::Memory(bytes),
            options,
        )?;
        into_key(decoded)
    }
}

impl<T: KeyCodec + ?Sized> KeyCodecExt for T {}

/// The key a load of a key decoded.
pub fn into_key<K: HaloKey>(decoded: Decoded) -> Result<K> {
    match decoded.item {
        Item::Key(key) => K::from_key(key),
        Item::Params(_) => Err(Error::Internal("parameters decoded for a key".into())),
    }
}

/// The parameters a load of parameters decoded.
pub fn into_params(decoded: Decoded) -> Result<KzgParams> {
    match decoded.item {
        Item::Params(params) => Ok(params),
        Item::Key(_) => Err(Error::Internal("a key decoded for parameters".into())),
    }
}

/// Opens `path` and reads it as a positioned source (small reads through a buffer of the
/// options' capacity); errors name the path.
fn with_file<T>(
    path: &Path,
    options: &LoadOptions,
    read: impl FnOnce(Input<'_>) -> Result<T>,
) -> Result<T> {
    let open = || {
        let file = File::open(path).during("open")?;
        with_open_file(&file, options, read)
    };
    open().map_err(|err: Error| err.at_path(path))
}

/// Reads `file` (its whole length) as a positioned source, small reads through a buffer of
/// the options' capacity; errors name no path.
fn with_open_file<T>(
    file: &File,
    options: &LoadOptions,
    read: impl FnOnce(Input<'_>) -> Result<T>,
) -> Result<T> {
    let len = file.metadata().during("read the metadata of")?.len();
    read(Input::At {
        source: &FileSource::new(file),
        len,
        buffer: options.buffers.file_read_capacity(),
    })
}

/// Loads a key from a file as `request` asks; its digest when computed.
fn load_file<C: Circuit<Fr>, K: HaloKey>(
    codec: &(impl KeyCodec + ?Sized),
    path: &Path,
    circuit_params: C::Params,
    options: &LoadOptions,
    request: Request,
) -> Result<(K, Option<KeyDigest>)> {
    let cs = configure::<C>(circuit_params);
    let decoded = read_file(codec, path, request, Some(cs), options)?;
    let digest = decoded.digest;
    Ok((into_key(decoded)?, digest))
}

/// Reads the container at `path` as `request` asks, for the circuit `cs` (none for
/// parameters); errors name the path.
pub fn read_file(
    codec: &(impl KeyCodec + ?Sized),
    path: &Path,
    request: Request,
    cs: Option<halo2_proofs::plonk::ConstraintSystem<Fr>>,
    options: &LoadOptions,
) -> Result<Decoded> {
    with_file(path, options, |input| {
        container::read(codec, request, cs, input, options)
    })
}
