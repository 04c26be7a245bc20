//! A prover's cold start in one call: the KZG parameters and the proving key, each loaded
//! when its file is there and is the right one, and the key generated with halo2's keygen
//! and saved atomically when it is not (the `gen_pk` pattern of snark-verifier-sdk, without
//! its torn files and its trust in whatever file is there).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use codec_core::halo2_proofs::plonk::{
    keygen_pk, keygen_vk_custom, Circuit, ProvingKey, VerifyingKey,
};
use codec_core::halo2_proofs::poly::commitment::Params as _;
use codec_core::halo2curves::bn256::{Fr, G1Affine};
use codec_core::header::MAGIC;
use codec_core::{
    downsize, lock_beside, Error, KeyCodec, KeyCodecExt, KeyDigest, LoadOptions, Params, Result,
    SaveOptions,
};

use crate::Backend;

/// Where a key came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its file was there, and was the right key.
    Loaded,
    /// Its file was missing, damaged or another key: it was generated and saved.
    Generated,
}

/// How a cold start loads, saves and generates.
#[derive(Clone, Copy, Debug, Default)]
pub struct StartOptions {
    /// How files are loaded. `expected_k` is set from the parameters; a pin
    /// (`expected_digest`) makes a file with another key be regenerated, and a generated key
    /// with another digest an error.
    pub load: LoadOptions,
    /// How generated keys are saved.
    pub save: SaveOptions,
    /// Whether keygen compresses selectors (halo2-axiom's `keygen_vk` does not).
    pub compress_selectors: bool,
}

/// Loads the proving key at `path` if it is there and is this circuit's key for `params`'s
/// `k` (and the pin's, if `options.load` pins one); otherwise generates it with halo2's keygen,
/// saves it atomically with `codec`, and returns it.
///
/// Two processes (or threads) starting at once are safe: the first that finds no usable file
/// takes a lock (`.{name}.keycodec.lock` beside the key) and generates; the others wait for
/// the lock, then load what it saved. No one ever reads a torn file: saves are atomic.
///
/// # Errors
///
/// I/O errors other than a missing file, halo2's keygen errors (as [`Error::Internal`]), a
/// generated key whose digest is not the pinned one ([`Error::DigestMismatch`]: nothing is
/// saved), and the save's errors.
pub fn load_or_generate_pk<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    path: &Path,
    params: &Params,
    circuit: &C,
    options: &StartOptions,
) -> Result<(ProvingKey<G1Affine>, Origin)> {
    let load = LoadOptions {
        expected_k: Some(params.k()),
        ..options.load
    };
    let attempt = || codec.load::<C, ProvingKey<G1Affine>>(path, circuit.params(), &load);
    if let Some(pk) = usable(attempt())? {
        return Ok((pk, Origin::Loaded));
    }
    let _lock = lock_beside(path)?;
    // Another process may have generated it while this one waited.
    if let Some(pk) = usable(attempt())? {
        return Ok((pk, Origin::Loaded));
    }
    let vk = keygen_vk_custom(params, circuit, options.compress_selectors).map_err(keygen)?;
    let pk = keygen_pk(params, vk, circuit).map_err(keygen)?;
    if let Some(expected) = load.expected_digest {
        let found = KeyDigest::of_pk(&pk)?;
        if found != expected {
            return Err(Error::DigestMismatch { expected, found });
        }
    }
    codec.save::<C, _>(path, &pk, circuit.params(), &options.save)?;
    Ok((pk, Origin::Generated))
}

/// Loads the verifying key at `path` (a verifying key's container, or a proving key's, whose
/// verifying key is read without its polynomials) if it is this circuit's for `params`'s `k`;
/// otherwise generates it, saves it at `path` with `codec`, and returns it. As
/// [`load_or_generate_pk`] for locking and pins.
///
/// # Errors
///
/// As [`load_or_generate_pk`].
pub fn load_or_generate_vk<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    path: &Path,
    params: &Params,
    circuit: &C,
    options: &StartOptions,
) -> Result<(VerifyingKey<G1Affine>, Origin)> {
    let load = LoadOptions {
        expected_k: Some(params.k()),
        ..options.load
    };
    let attempt = || codec.load_verifying_key::<C>(path, circuit.params(), &load);
    if let Some(vk) = usable(attempt())? {
        return Ok((vk, Origin::Loaded));
    }
    let _lock = lock_beside(path)?;
    if let Some(vk) = usable(attempt())? {
        return Ok((vk, Origin::Loaded));
    }
    let vk = keygen_vk_custom(params, circuit, options.compress_selectors).map_err(keygen)?;
    if let Some(expected) = load.expected_digest {
        let found = KeyDigest::of_vk(&vk)?;
        if found != expected {
            return Err(Error::DigestMismatch { expected, found });
        }
    }
    codec.save::<C, _>(path, &vk, circuit.params(), &options.save)?;
    Ok((vk, Origin::Generated))
}

/// Loads KZG parameters from `path`: a keycodec container (any backend that stores them,
/// from its header), or a headerless file as halo2's `ParamsKZG::write_custom` writes it in
/// any `SerdeFormat` (`kzg_bn254_22.srs`; the format follows from the file's length), with
/// every point checked unless `options.validation` trusts them. With `k` smaller than the
/// file's, the parameters are downsized to `2^k` points (halo2's `downsize`: `g` truncated,
/// `g_lagrange` recomputed), so one large file serves every smaller circuit. Downsizing
/// costs a scalar multiplication of a G1 point per FFT butterfly, `2^(k-1) * k` of them,
/// on every core: slow at large `k` (see `docs/performance.md`); a prover that starts often
/// should downsize once (`keycodec params downsize`) and open the result.
///
/// # Errors
///
/// I/O and decode errors naming the path; [`Error::KMismatch`] when the file's `k` is
/// smaller than `k`; [`Error::NotCompiled`] for a halo2 file without the rawbytes backend.
pub fn open_params(path: &Path, k: Option<u32>, options: &LoadOptions) -> Result<Params> {
    let params = if is_container(path)? {
        Backend::of_file(path)?
            .codec()?
            .load_params(path, options)?
    } else {
        import_halo2_params(path, options)?
    };
    match k {
        Some(k) if k != params.k() => downsize(params, k).map_err(|err| err.at_path(path)),
        _ => Ok(params),
    }
}

/// What a prover needs to start: its parameters and its proving key.
#[derive(Debug)]
pub struct ColdStart {
    /// The KZG parameters, downsized to the key's `k`.
    pub params: Params,
    /// The proving key.
    pub pk: ProvingKey<G1Affine>,
    /// Whether the key was loaded or generated.
    pub origin: Origin,
}

/// The whole cold start of a prover whose circuit has `2^k` rows: the parameters
/// ([`open_params`], downsized to `k`) and the proving key ([`load_or_generate_pk`]) are
/// loaded at the same time, each with every core it can use; the key is generated (after
/// the parameters, which keygen needs) only if its file is missing or wrong.
///
/// # Errors
///
/// Those of [`open_params`] and [`load_or_generate_pk`].
pub fn cold_start<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    params_path: &Path,
    pk_path: &Path,
    k: u32,
    circuit: &C,
    options: &StartOptions,
) -> Result<ColdStart> {
    let load = LoadOptions {
        expected_k: Some(k),
        ..options.load
    };
    let load_key = || codec.load::<C, ProvingKey<G1Affine>>(pk_path, circuit.params(), &load);
    let (params, key) = std::thread::scope(|scope| {
        let params = std::thread::Builder::new()
            .name("keycodec-params".into())
            .spawn_scoped(scope, || open_params(params_path, Some(k), &options.load));
        let key = load_key();
        let params = match params {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the parameters thread panicked".into()))),
            // No thread to spare: one after the other.
            Err(_) => open_params(params_path, Some(k), &options.load),
        };
        (params, key)
    });
    let params = params?;
    if let Some(pk) = usable(key)? {
        return Ok(ColdStart {
            params,
            pk,
            origin: Origin::Loaded,
        });
    }
    let (pk, origin) = load_or_generate_pk(codec, pk_path, &params, circuit, options)?;
    Ok(ColdStart { params, pk, origin })
}

/// `Some` of a loaded value, `None` when the file is missing or is not the right key (it
/// will be generated), the error when something else failed (it would fail again).
fn usable<T>(loaded: Result<T>) -> Result<Option<T>> {
    match loaded {
        Ok(value) => Ok(Some(value)),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(
            err @ (Error::Io { .. }
            | Error::Internal(_)
            | Error::OutOfMemory { .. }
            | Error::NotCompiled { .. }
            | Error::KindNotSupported { .. }),
        ) => Err(err),
        Err(_) => Ok(None),
    }
}

fn keygen(err: codec_core::halo2_proofs::plonk::Error) -> Error {
    Error::Internal(format!("halo2's keygen failed: {err:?}"))
}

/// Whether `path` starts with keycodec's magic bytes.
fn is_container(path: &Path) -> Result<bool> {
    let mut magic = [0u8; 8];
    let mut file = File::open(path).map_err(|err| Error::io("open", err).at_path(path))?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(magic == MAGIC),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(err) => Err(Error::io("read", err).at_path(path)),
    }
}

/// A headerless halo2 parameters file, its format told by its length.
#[cfg(feature = "rawbytes")]
fn import_halo2_params(path: &Path, options: &LoadOptions) -> Result<Params> {
    let format = halo2_params_format(path)?;
    codec_rawbytes::RawBytesCodec::new(format).import_params_file(path, options)
}

#[cfg(not(feature = "rawbytes"))]
fn import_halo2_params(path: &Path, _options: &LoadOptions) -> Result<Params> {
    Err(Error::NotCompiled {
        what: format!("reading halo2's parameters file {}", path.display()),
        feature: "rawbytes",
    })
}

/// The `SerdeFormat` a halo2 parameters file was written in: its `k` (first 4 bytes) says how
/// many points it holds, and its length how large each is (raw: 64-byte G1, 128-byte G2;
/// compressed: 32 and 64).
///
/// # Errors
///
/// [`Error::Malformed`] when the length fits neither.
#[cfg(feature = "rawbytes")]
pub fn halo2_params_format(path: &Path) -> Result<codec_core::halo2_proofs::SerdeFormat> {
    use codec_core::halo2_proofs::SerdeFormat;
    let mut file = File::open(path).map_err(|err| Error::io("open", err).at_path(path))?;
    let len = file
        .metadata()
        .map_err(|err| Error::io("read the metadata of", err).at_path(path))?
        .len();
    let mut k = [0u8; 4];
    file.read_exact(&mut k)
        .map_err(|err| Error::from_read(err, "parameters k").at_path(path))?;
    let k = u32::from_le_bytes(k);
    let points = 2u128 << k.min(64);
    let raw = 4 + points * 64 + 2 * 128;
    let compressed = 4 + points * 32 + 2 * 64;
    match u128::from(len) {
        n if n == raw => Ok(SerdeFormat::RawBytes),
        n if n == compressed => Ok(SerdeFormat::Processed),
        _ => Err(Error::Malformed(format!(
            "{}: {len} bytes is no halo2 parameters file for k = {k} (raw: {raw}, compressed: {compressed})",
            path.display()
        ))),
    }
}
