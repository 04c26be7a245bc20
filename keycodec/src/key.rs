//! The one way to load a key and the one way to save it, wherever it is: a file, or (feature
//! `remote`) an object through the machine's cache.

use keycodec_core::record::RecordableParams;
use std::fs::File;

use keycodec_core::backend_api::circuit::configure;
use keycodec_core::halo2_proofs::plonk::Circuit;
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_core::record::CircuitRecord;
use keycodec_core::transport::{into_key, read, FileSource, Input, Request};
use keycodec_core::{Error, KeyCodecExt, KeyDigest, LoadOptions, Result, SaveOptions};

use crate::backend::Backend;
use crate::location::Location;
use crate::options::{Key, KeyOptions};

/// Loads the key at `at` for the circuit `C` with `circuit_params` (what halo2's
/// `ProvingKey::read` needs too: they fix the constraint system the key must match), with
/// whichever backend wrote it (its header names it; [`KeyOptions::backend`] may restrict
/// it), every check the options ask for, and their pin.
///
/// A verifying key loads from a verifying key's container or from a proving key's (without
/// decoding its polynomials).
///
/// A file is opened once: the header read is the header of the bytes decoded. An object
/// (feature `remote`) is loaded through its cache directory, the machine's one cache: a warm
/// entry is a file load with every check (with a digest pin, no request is made at all); a
/// miss downloads one version of the object once per machine, loading it as it lands, and the
/// entry takes its name only once the key has loaded.
///
/// # Errors
///
/// [`Error::Io`] naming the file; header errors ([`Error::BadMagic`], [`Error::UnknownCodec`],
/// [`Error::CodecNotAllowed`], [`Error::KindMismatch`], [`Error::KMismatch`],
/// [`Error::CircuitMismatch`] for another circuit); damage ([`Error::PayloadChecksum`],
/// [`Error::Truncated`], ...); the pin's ([`Error::DigestMismatch`],
/// [`Error::TranscriptMismatch`]); the limits'; an object's store and transport errors.
pub fn load_key<C: Circuit<Fr>, K: Key>(
    at: impl Into<Location>,
    circuit_params: C::Params,
    options: &KeyOptions,
) -> Result<K> {
    match at.into() {
        Location::File(path) => {
            let load = || {
                let file = File::open(&path).map_err(|err| Error::io("open", err))?;
                load_open_file::<C, K>(&file, circuit_params, &options.load())
            };
            load().map_err(|err| err.at_path(&path))
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => {
            let (backend, info) = crate::remote::cache::key::backend_of(&object, options, K::KIND)?;
            crate::remote::cache::key::load_cached::<C, K>(
                &object.remote,
                backend.codec()?,
                &object.path,
                &object.cache,
                circuit_params,
                &options.load(),
                info,
            )
            .map(|(key, _)| key)
        }
    }
}

/// The circuit recorded in the key's container at `at`, for [`load_key`] with
/// [`Recorded`](crate::Recorded) and no circuit code:
///
/// ```no_run
/// # fn main() -> keycodec::Result<()> {
/// use keycodec::halo2_proofs::plonk::ProvingKey;
/// use keycodec::halo2curves::bn256::G1Affine;
/// use keycodec::{load_key, read_record, KeyDigest, KeyOptions, KeyPin, Recorded};
/// # let digest: KeyDigest = "00".repeat(32).parse().unwrap();
/// let path = std::path::Path::new("circuit.pk");
/// let record = read_record(path)?;
/// // A record authenticates nothing: pin the key.
/// let pinned = KeyOptions { pin: Some(KeyPin::Digest(digest)), ..KeyOptions::default() };
/// let pk: ProvingKey<G1Affine> = load_key::<Recorded, _>(path, record, &pinned)?;
/// # Ok(()) }
/// ```
///
/// Keys saved by this version record their circuit (those whose constraint system halo2's
/// public API can build again: every circuit tried, halo2-lib's among them).
///
/// # Errors
///
/// [`Error::NotRecorded`] for a container without a record (saved by an earlier version, or
/// of a circuit that could not be recorded: load it with its circuit type); the header's
/// errors; a damaged record ([`Error::PayloadChecksum`], [`Error::Malformed`]); I/O and store
/// errors.
pub fn read_record(at: impl Into<Location>) -> Result<CircuitRecord> {
    match at.into() {
        Location::File(path) => {
            let read = || {
                let file = File::open(&path).map_err(|err| Error::io("open", err))?;
                let (header, header_len) = keycodec_core::header::read_header(&file)?;
                keycodec_core::header::read_record_section(&file, &header, header_len as u64)?
                    .ok_or(Error::NotRecorded)
            };
            read().map_err(|err| err.at_path(&path))
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => {
            let read = || {
                let info = object.remote.head(&object.path)?;
                let header = object.remote.header_of(&object.path, &info)?;
                if header.record_len == 0 {
                    return Err(Error::NotRecorded);
                }
                // Bounded by the header's decoding.
                let len = header.record_section_len();
                let start = info.size.checked_sub(len).ok_or(Error::Truncated {
                    context: "the circuit's record",
                })?;
                let mut bytes = vec![0u8; len as usize];
                object
                    .remote
                    .read_range(&object.path, &info, &mut bytes, start)?;
                CircuitRecord::from_section(&bytes)
            };
            read().map_err(|err| err.in_object(&object.name()))
        }
    }
}

/// The key in the open `file`, with the backend its header names (if `options` allow it).
pub(crate) fn load_open_file<C: Circuit<Fr>, K: Key>(
    file: &File,
    circuit_params: C::Params,
    options: &LoadOptions,
) -> Result<K> {
    let backend = Backend::of_open_file(file)?;
    if !options.codecs.contains(backend.id()) {
        return Err(Error::CodecNotAllowed {
            found: backend.id(),
        });
    }
    let len = file
        .metadata()
        .map_err(|err| Error::io("read the metadata of", err))?
        .len();
    let source = FileSource::new(file);
    let input = Input::At {
        source: &source,
        len,
        buffer: options.buffers.file_read_capacity(),
    };
    let cs = configure::<C>(circuit_params);
    into_key(read(
        backend.codec()?,
        Request::for_key(K::KIND),
        Some(cs),
        input,
        options,
    )?)
}

/// Saves `key` of the circuit `C` with `circuit_params` to `at` with
/// [`KeyOptions::backend`] (rawbytes when `None`) and returns its digest (the pin to ship with
/// the prover: [`KeyPin::Digest`](crate::KeyPin::Digest)). A file is written atomically and
/// durably (a temporary file in the same folder, synced, renamed over `at`, the folder
/// synced): on any error `at` is untouched. An object (feature `remote`) is uploaded as one
/// multipart upload, visible only once complete; the cache is not written.
///
/// # Errors
///
/// [`Error::DigestMismatch`] / [`Error::TranscriptMismatch`] when the options pin another key
/// (nothing is written); [`Error::NotCompiled`] for a backend compiled out; the codec's
/// ([`Error::NotStorable`]); [`Error::Io`] naming the file; an object's store errors.
pub fn save_key<C: Circuit<Fr>, K: Key>(
    at: impl Into<Location>,
    key: &K,
    circuit_params: C::Params,
    options: &KeyOptions,
) -> Result<KeyDigest>
where
    C::Params: RecordableParams,
{
    let at = at.into();
    options.check_pin(key, &at.to_string())?;
    let codec = options.save_backend()?;
    match at {
        Location::File(path) => {
            codec.save::<C, K>(&path, key, circuit_params, &SaveOptions::default())
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => {
            object
                .remote
                .save::<C, K>(codec, &object.path, key, circuit_params)
        }
    }
}
