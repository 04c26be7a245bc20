//! KZG parameters for a prover: opened from a keycodec container or from halo2's own file
//! (`kzg_bn254_22.srs`, as `ParamsKZG::write_custom` writes it in any `SerdeFormat`), pinned
//! by their digest or by the SHA-256 of their file as published, and fitted to a circuit's
//! `k`. A pinned file is opened once: the bytes hashed are the bytes decoded, and a file
//! rewritten while it is read is refused.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::header::{Header, HEADER_LEN, MAGIC};
use keycodec_core::{
    downsize, ArtifactKind, Error, KeyCodecExt, KeyDigest, KzgParams, Limits, LoadOptions, Result,
    SaveOptions, TestSetup, Validation,
};

use crate::backend::Backend;
use crate::location::Location;

/// A pin on KZG parameters: parameters that are not these are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamsPin {
    /// Their digest ([`KeyDigest::of_params`], what `save_params` returns and a container
    /// records), whatever file they come from.
    Digest(KeyDigest),
    /// The SHA-256 of their file as published (ezkl's, halo2-lib's and openvm's
    /// `kzg_bn254_{k}.srs` come with one): checked on the file before anything read from it
    /// is used, and for a local file again after it is decoded (it may have been rewritten in
    /// place meanwhile): twice the hashing of the file at every open, so a prover that starts
    /// often imports the file once (`keycodec params import`) and pins its digest.
    Sha256([u8; 32]),
}

impl ParamsPin {
    /// A SHA-256 pin from its 64 hex digits (nothing else: no sign, no prefix).
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] for anything but 64 hex digits.
    pub fn sha256(hex: &str) -> Result<Self> {
        keycodec_core::hex::decode::<32>(hex)
            .map(ParamsPin::Sha256)
            .ok_or_else(|| Error::Malformed(format!("`{hex}` is no SHA-256 (64 hex digits)")))
    }
}

/// How parameters are opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParamsOptions {
    /// Whether every point is checked (`Checked`, the default: coordinates below the modulus
    /// and on the curve) or trusted. With a pin, the pin checks them instead.
    pub validation: Validation,
    /// Other parameters than these are refused. A pin proves every point: parameters that
    /// match it are the ones pinned (by their digest, or by their published file's SHA-256),
    /// so their points are not checked one by one (on two cores, the curve equation of every
    /// point costs more than reading the file), and the parameters pinned are taken to be
    /// valid: pin what `save_params` returned, a checked load's digest, or a file's published
    /// hash.
    pub pin: Option<ParamsPin>,
    /// The circuit's `k`: larger parameters are downsized to it, smaller ones refused
    /// ([`Error::KMismatch`]). `None` takes them as they are.
    pub k: Option<u32>,
    /// The largest `k` and file accepted ([`Limits::max_k`], [`Limits::max_payload_bytes`]),
    /// and the memory budget.
    pub limits: Limits,
    /// Whether parameters made from a known public seed (halo2-base's `gen_srs`: see
    /// `keycodec_core::test_setup`) are accepted: for tests only. Default
    /// [`TestSetup::Refused`]: they are refused with [`Error::TestSetup`].
    pub test_setup: TestSetup,
}

impl ParamsOptions {
    /// The load options their file is read with (`k` is checked after: it may be downsized).
    pub(crate) fn load(&self) -> LoadOptions {
        LoadOptions {
            validation: self.validation,
            limits: self.limits,
            test_setup: self.test_setup,
            ..LoadOptions::default()
        }
    }
}

/// Opens KZG parameters at `at`: a keycodec container (any backend that stores them, from
/// its header) or halo2's headerless file in any `SerdeFormat` (the format follows from the
/// file's length), every point checked unless `options.validation` trusts them or
/// `options.pin` proves them (see [`ParamsOptions::pin`]); an object
/// (feature `remote`) goes through its cache (downloaded and checked once, then a local load:
/// see `remote::fetch_params`). `options.pin` refuses other parameters; `options.k` fits
/// them to a circuit: larger ones are downsized to `2^k` points (halo2's `downsize`:
/// `2^(k-1) * k` scalar multiplications on every core, slow at large `k`; an object's
/// downsized parameters are cached, and a prover that starts often from a file should
/// downsize once with `keycodec params downsize`), smaller ones refused.
///
/// # Errors
///
/// I/O and decode errors naming the file; [`Error::FileHashMismatch`] or
/// [`Error::DigestMismatch`] for parameters that are not the pinned ones; [`Error::KMismatch`]
/// when the file's `k` is smaller than `options.k`; [`Error::FileChanged`] for a file rewritten
/// while it was read; [`Error::TestSetup`] for a public seed's parameters;
/// [`Error::NotCompiled`] for a halo2 file without the rawbytes backend.
pub fn open_params(at: impl Into<Location>, options: &ParamsOptions) -> Result<KzgParams> {
    match at.into() {
        Location::File(path) => {
            let params = read_pinned(&path, options)?;
            fit(params, options.k, &path)
        }
        #[cfg(feature = "remote")]
        Location::Object(object) => crate::remote::cache::fetch_params(&object, options, &|_| {})
            .map(|fetched| fetched.params),
    }
}

/// Saves KZG parameters to `at` with `backend` (one that stores parameters: rawbytes,
/// bincode or rkyv), as [`crate::save_key`] saves a key (atomically; an object as one
/// upload); returns their digest, the pin ([`ParamsPin::Digest`]) to open them with.
///
/// # Errors
///
/// [`Error::KindNotSupported`] for a backend that stores no parameters;
/// [`Error::NotCompiled`]; [`Error::Io`] naming the file; an object's store errors.
pub fn save_params(
    at: impl Into<Location>,
    params: &KzgParams,
    backend: Backend,
) -> Result<KeyDigest> {
    let codec = backend.codec()?;
    match at.into() {
        Location::File(path) => codec.save_params(&path, params, &SaveOptions::default()),
        #[cfg(feature = "remote")]
        Location::Object(object) => object.remote.save_params(codec, &object.path, params),
    }
}

/// The parameters in the file at `path`, pinned by `options.pin` (its `k` not applied).
pub(crate) fn read_pinned(path: &Path, options: &ParamsOptions) -> Result<KzgParams> {
    let read = || {
        let file = File::open(path).map_err(|err| Error::io("open", err))?;
        read_pinned_file(&file, path, options, Shared::Yes)
    };
    read().map_err(|err: Error| err.at_path(path))
}

/// Whether others may write a file while it is read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shared {
    /// A file anyone may rewrite in place (a deploy's `cp`): a SHA-256 pin is checked again
    /// after the decode, so bytes changed between the hash and the decode are caught even
    /// where the file's times are too coarse to show it.
    Yes,
    /// A private file (a download in the cache, locked): hashed once.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    No,
}

/// The parameters in the open `file` (named `path` in errors), pinned by `options.pin`: the
/// SHA-256 is of the bytes this file holds, which are the bytes decoded; a file whose length
/// or times move while it is read (or, `Shared::Yes`, whose SHA-256 is no longer the pin after
/// the decode) is refused.
pub(crate) fn read_pinned_file(
    file: &File,
    path: &Path,
    options: &ParamsOptions,
    shared: Shared,
) -> Result<KzgParams> {
    let before = keycodec_core::FileStamp::of(file)?;
    if let Some(ParamsPin::Sha256(expected)) = options.pin {
        let found = sha256_of(file)?;
        if found != expected {
            return Err(Error::FileHashMismatch {
                file: path.display().to_string(),
                expected: keycodec_core::hex::encode(&expected),
                found: keycodec_core::hex::encode(&found),
            });
        }
    }
    // A pin proves the points (see `ParamsOptions::pin`): only its check is needed. A
    // container checks a digest pin as it is read (each vector hashed as it lands); halo2's
    // file is hashed after.
    let mut load = options.load();
    if options.pin.is_some() {
        load.validation = Validation::Trusted;
    }
    let container = is_container(file)?;
    if let (Some(ParamsPin::Digest(expected)), true) = (options.pin, container) {
        load.expected_digest = Some(expected);
    }
    let params = decode(file, &load)?;
    let rehashed = match options.pin {
        Some(ParamsPin::Sha256(expected)) if shared == Shared::Yes => sha256_of(file)? == expected,
        _ => true,
    };
    if !rehashed || keycodec_core::FileStamp::of(file)? != before {
        return Err(Error::FileChanged {
            path: path.to_path_buf(),
        });
    }
    if let (Some(ParamsPin::Digest(expected)), false) = (options.pin, container) {
        let found = KeyDigest::of_params(&params)?;
        if found != expected {
            return Err(Error::DigestMismatch {
                kind: ArtifactKind::Params,
                path: Some(path.to_path_buf()),
                expected,
                found,
            });
        }
    }
    Ok(params)
}

/// `params` fitted to `k`: downsized when larger, refused when smaller.
pub(crate) fn fit(params: KzgParams, k: Option<u32>, at: &Path) -> Result<KzgParams> {
    match k {
        Some(k) if k > params.k() => Err(Error::KMismatch {
            expected: k,
            found: params.k(),
        }),
        Some(k) if k < params.k() => downsize(params, k).map_err(|err| err.at_path(at)),
        _ => Ok(params),
    }
}

/// Whether `file` starts with a container's magic bytes (a headerless halo2 file does not).
pub(crate) fn is_container(file: &File) -> Result<bool> {
    let mut magic = [0u8; MAGIC.len()];
    Ok(read_prefix(file, &mut magic)? == magic.len() && magic == MAGIC)
}

/// Decodes the parameters of a container or a headerless halo2 file.
fn decode(file: &File, options: &LoadOptions) -> Result<KzgParams> {
    let mut first = [0u8; HEADER_LEN];
    let got = read_prefix(file, &mut first)?;
    let first = first.get(..got).unwrap_or_default();
    if first.starts_with(&MAGIC) {
        let header = Header::from_bytes(first)?;
        Backend::of_id(header.codec)
            .ok_or(Error::UnknownCodec {
                found: header.codec,
            })?
            .codec()?
            .load_params_from(file, options)
    } else {
        import_halo2(file, options)
    }
}

#[cfg(feature = "rawbytes")]
fn import_halo2(file: &File, options: &LoadOptions) -> Result<KzgParams> {
    let format = format_of(file)?;
    keycodec_rawbytes::RawBytesCodec::new(format).import_params_from(file, options)
}

#[cfg(not(feature = "rawbytes"))]
fn import_halo2(_file: &File, _options: &LoadOptions) -> Result<KzgParams> {
    Err(Error::NotCompiled {
        what: "reading halo2's parameters files".into(),
        feature: "rawbytes",
    })
}

/// The `SerdeFormat` halo2's parameters file at `path` was written in: its `k` (first 4
/// bytes) says how many points it holds, and its length how large each is (raw: 64-byte G1,
/// 128-byte G2; compressed: 32 and 64).
///
/// # Errors
///
/// [`Error::Malformed`] when the length fits neither, and I/O errors naming the file.
#[cfg_attr(not(feature = "rawbytes"), allow(dead_code, unreachable_pub))]
pub fn halo2_params_format(path: &Path) -> Result<SerdeFormat> {
    let read = || format_of(&File::open(path).map_err(|err| Error::io("open", err))?);
    read().map_err(|err: Error| err.at_path(path))
}

#[cfg_attr(not(feature = "rawbytes"), allow(dead_code))]
fn format_of(file: &File) -> Result<SerdeFormat> {
    let len = file
        .metadata()
        .map_err(|err| Error::io("read the metadata of", err))?
        .len();
    let mut k = [0u8; 4];
    if read_prefix(file, &mut k)? < k.len() {
        return Err(Error::Truncated {
            context: "parameters k",
        });
    }
    let k = u32::from_le_bytes(k);
    match halo2_lengths(k) {
        Some([raw, _]) if len == raw => Ok(SerdeFormat::RawBytes),
        Some([_, compressed]) if len == compressed => Ok(SerdeFormat::Processed),
        Some([raw, compressed]) => Err(Error::Malformed(format!(
            "{len} bytes is no halo2 parameters file for k = {k} (raw: {raw}, compressed: {compressed})"
        ))),
        None => Err(Error::Malformed(format!(
            "{len} bytes is no halo2 parameters file: it starts with k = {k}"
        ))),
    }
}

/// The lengths of halo2's parameters file for `k` (`k`, `g` and `g_lagrange`, `g2` and
/// `s_g2`): raw and compressed; `None` past any `k` a field allows.
fn halo2_lengths(k: u32) -> Option<[u64; 2]> {
    if k > 40 {
        return None;
    }
    let points = 2u64 << k;
    Some([4 + points * 64 + 2 * 128, 4 + points * 32 + 2 * 64])
}

/// The `k` of a parameters file whose first bytes are `first` (at least a container header's
/// or halo2's 4 bytes, when the file has them), and the length the file must have: what a
/// server's claim of its size is checked against before any disk or memory is sized from it.
///
/// # Errors
///
/// A container's header errors, [`Error::KindMismatch`] for a container of a key,
/// [`Error::KOutOfRange`] past `limits.max_k`, [`Error::LimitExceeded`] past
/// `limits.max_payload_bytes`, [`Error::Malformed`] for a declared length the layout does not
/// have, [`Error::Truncated`] for fewer than 4 bytes.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) fn expected_length(first: &[u8], limits: &Limits) -> Result<(u32, Vec<u64>)> {
    let bounded = |k: u32| {
        if k == 0 || k > limits.max_k {
            return Err(Error::KOutOfRange {
                k,
                max: limits.max_k,
            });
        }
        halo2_lengths(k).ok_or(Error::KOutOfRange {
            k,
            max: limits.max_k,
        })
    };
    let lengths = if first.starts_with(&MAGIC) {
        let header = Header::from_bytes(first)?;
        if header.kind != ArtifactKind::Params {
            return Err(Error::KindMismatch {
                expected: ArtifactKind::Params,
                found: header.kind,
            });
        }
        let layouts = bounded(header.k)?;
        if !layouts.contains(&header.payload_len) {
            return Err(Error::Malformed(format!(
                "the header declares a {}-byte payload; parameters for k = {} have {} or {}",
                header.payload_len, header.k, layouts[0], layouts[1]
            )));
        }
        let header_len = Header::len_of(first)? as u64;
        (header.k, vec![header_len + header.payload_len])
    } else {
        let k: [u8; 4] =
            first
                .get(..4)
                .and_then(|k| k.try_into().ok())
                .ok_or(Error::Truncated {
                    context: "parameters k",
                })?;
        let k = u32::from_le_bytes(k);
        (k, bounded(k)?.to_vec())
    };
    if let Some(&longest) = lengths.1.iter().max() {
        if longest > limits.max_payload_bytes {
            return Err(Error::LimitExceeded {
                what: "parameters file length",
                requested: longest,
                limit: limits.max_payload_bytes,
            });
        }
    }
    Ok(lengths)
}

/// Reads the first bytes of `file` into `buf` (fewer at its end); returns how many.
fn read_prefix(file: &File, buf: &mut [u8]) -> Result<usize> {
    let mut reader = file;
    reader.rewind().map_err(|err| Error::io("read", err))?;
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|rest| !rest.is_empty()) {
        match reader.read(rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(Error::io("read", err)),
        }
    }
    Ok(got)
}

/// The SHA-256 of everything `file` holds, read from its start.
pub(crate) fn sha256_of(file: &File) -> Result<[u8; 32]> {
    use sha2::Digest as _;
    let mut reader = file;
    reader.rewind().map_err(|err| Error::io("read", err))?;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => hasher.update(buffer.get(..n).unwrap_or_default()),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(Error::io("read", err)),
        }
    }
    Ok(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_pins_parse_from_hex_and_nothing_else() {
        let hex_text = "00".repeat(31) + "ff";
        let mut expected = [0u8; 32];
        expected[31] = 0xff;
        assert_eq!(
            ParamsPin::sha256(&hex_text).ok(),
            Some(ParamsPin::Sha256(expected))
        );
        for bad in [
            "",
            "00",
            &"zz".repeat(32),
            &"0".repeat(65),
            &"+0".repeat(32),
        ] {
            assert!(ParamsPin::sha256(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_size_claim_is_bounded_by_k_and_the_layout() {
        let limits = Limits::default();
        // halo2's file for k = 4: raw or compressed.
        let (k, lengths) = expected_length(&4u32.to_le_bytes(), &limits).unwrap_or_default();
        assert_eq!(
            (k, lengths),
            (4, vec![4 + 32 * 64 + 256, 4 + 32 * 32 + 128])
        );
        // A k past the limit, or none at all, is refused before any size is believed.
        let tight = Limits {
            max_k: 10,
            ..limits
        };
        assert!(matches!(
            expected_length(&11u32.to_le_bytes(), &tight),
            Err(Error::KOutOfRange { k: 11, max: 10 })
        ));
        assert!(expected_length(&u32::MAX.to_le_bytes(), &limits).is_err());
        assert!(matches!(
            expected_length(&[1, 2], &limits),
            Err(Error::Truncated { .. })
        ));
    }
}
