//! A prover's cold start in one call: the KZG parameters and the proving key, each loaded
//! when it is there and is the right one (the pinned one, when pinned), and the key generated
//! with halo2's keygen and saved atomically when it is not (the `gen_pk` pattern of
//! snark-verifier-sdk, without its torn files and its trust in whatever file is there).
//!
//! Each artifact is at a [`Location`]: a file, or (feature `remote`) an object in S3 or at an
//! HTTP(S) URL, loaded through a local cache directory. Each has its own pin: the key's digest
//! ([`StartOptions::key_pin`]), and the parameters' digest or the SHA-256 of their file as
//! published ([`ParamsPin`], the hash a project documents beside `kzg_bn254_22.srs`).

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use codec_core::halo2_proofs::plonk::{
    keygen_pk, keygen_vk_custom, Circuit, ProvingKey, VerifyingKey,
};
use codec_core::halo2_proofs::poly::commitment::Params as _;
use codec_core::halo2curves::bn256::{Fr, G1Affine};
use codec_core::header::MAGIC;
use codec_core::{
    downsize, lock_beside, Error, HaloKey, KeyCodec, KeyCodecExt, KeyDigest, KeyKind, LoadOptions,
    Params, Result, SaveOptions,
};

use crate::Backend;

/// Where a cold start finds an artifact.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Location {
    /// A file on this machine.
    File(PathBuf),
    /// An object in object storage, loaded through the cache directory `cache` (see
    /// `keycodec::remote`): a key in S3, or parameters in S3 or at an HTTP(S) URL.
    #[cfg(feature = "remote")]
    Object {
        /// The store.
        remote: std::sync::Arc<crate::remote::Remote>,
        /// The object.
        path: crate::remote::object_store::path::Path,
        /// The local cache directory (created if missing).
        cache: PathBuf,
    },
}

impl Location {
    /// The object a URL names (`s3://bucket/path`, configured from the environment as the
    /// AWS tools are; `https://host/path` and `http://host/path` for files any web server
    /// serves, read only), loaded through the cache directory `cache`.
    ///
    /// # Errors
    ///
    /// As [`Remote::from_url`](crate::remote::Remote::from_url).
    #[cfg(feature = "remote")]
    pub fn url(url: &str, cache: impl Into<PathBuf>) -> Result<Self> {
        let (remote, path) = crate::remote::Remote::from_url(url)?;
        Ok(Location::Object {
            remote: std::sync::Arc::new(remote),
            path,
            cache: cache.into(),
        })
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Self {
        Location::File(path.to_path_buf())
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Self {
        Location::File(path)
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Self {
        Location::File(path.clone())
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            #[cfg(feature = "remote")]
            Location::Object { remote, path, .. } => f.write_str(&remote.name(path)),
        }
    }
}

/// A pin on KZG parameters: parameters that are not these are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamsPin {
    /// Their digest ([`KeyDigest::of_params`], what `save_params` returns and a container
    /// records), whatever file they come from.
    Digest(KeyDigest),
    /// The SHA-256 of their file as published (ezkl's, halo2-lib's and openvm's
    /// `kzg_bn254_{k}.srs` come with one): the file is refused before anything is read from
    /// it.
    Sha256([u8; 32]),
}

impl ParamsPin {
    /// A SHA-256 pin from its 64 hex digits.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] for anything but 64 hex digits.
    pub fn sha256(hex: &str) -> Result<Self> {
        let hex = hex.trim();
        let malformed = || Error::Malformed(format!("`{hex}` is no SHA-256 (64 hex digits)"));
        if hex.len() != 64 {
            return Err(malformed());
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| malformed())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| malformed())?;
        }
        Ok(ParamsPin::Sha256(bytes))
    }
}

/// Lowercase hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Where a key came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its file was there, and was the right key.
    Loaded,
    /// Its file was missing, damaged or another key: it was generated and saved.
    Generated,
}

/// How a cold start loads, pins, saves and generates.
#[derive(Clone, Copy, Debug, Default)]
pub struct StartOptions {
    /// How artifacts are loaded (validation, integrity, limits, buffers). `expected_k` is set
    /// from the circuit's `k`. Its `expected_digest`, if set, pins the key (as `key_pin` does,
    /// which wins), never the parameters.
    pub load: LoadOptions,
    /// The key's digest (what a save returns, `keycodec digest FILE` prints): a file holding
    /// another key is regenerated over, and a generated key with another digest is an error.
    pub key_pin: Option<KeyDigest>,
    /// The parameters' pin: other parameters are refused.
    pub params_pin: Option<ParamsPin>,
    /// How generated keys are saved.
    pub save: SaveOptions,
    /// Whether keygen compresses selectors (halo2-axiom's `keygen_vk` does not).
    pub compress_selectors: bool,
}

impl StartOptions {
    /// The options a key is loaded with: pinned to the key's pin, for `k`.
    fn key_load(&self, k: u32) -> LoadOptions {
        LoadOptions {
            expected_k: Some(k),
            expected_digest: self.key_pin.or(self.load.expected_digest),
            ..self.load
        }
    }
}

/// Loads the proving key at `location` if it is there and is this circuit's key for
/// `params`'s `k` (and the pinned one, if [`StartOptions::key_pin`] pins one); otherwise
/// generates it with halo2's keygen, saves it atomically with `codec` (for an object: into
/// the cache, then uploads it), and returns it.
///
/// Two processes (or threads) starting at once are safe: the first that finds no usable key
/// takes a lock (`.{name}.keycodec.lock` beside the key, or beside its cached copy) and
/// generates; the others wait for the lock, then load what it saved. No one ever reads a torn
/// file: saves are atomic, and an object appears only once its upload is complete. (Two
/// machines sharing an object may both generate: keygen is deterministic, so the object holds
/// the same key either way.)
///
/// # Errors
///
/// I/O and object storage errors other than a missing file or object, halo2's keygen errors
/// (as [`Error::Internal`]), a generated key whose digest is not the pinned one
/// ([`Error::DigestMismatch`], naming the key's file: nothing is saved), and the save's
/// errors.
pub fn load_or_generate_pk<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    location: impl Into<Location>,
    params: &Params,
    circuit: &C,
    options: &StartOptions,
) -> Result<(ProvingKey<G1Affine>, Origin)> {
    let generate = || {
        let vk = keygen_vk_custom(params, circuit, options.compress_selectors).map_err(keygen)?;
        keygen_pk(params, vk, circuit).map_err(keygen)
    };
    key_at(
        codec,
        &location.into(),
        params.k(),
        circuit,
        options,
        generate,
    )
}

/// Loads the verifying key at `location` (a verifying key's container, or a proving key's,
/// whose verifying key is read without its polynomials) if it is this circuit's for
/// `params`'s `k` (and the pinned one); otherwise generates it, saves it with `codec`, and
/// returns it. As [`load_or_generate_pk`] for locking and pins.
///
/// # Errors
///
/// As [`load_or_generate_pk`].
pub fn load_or_generate_vk<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    location: impl Into<Location>,
    params: &Params,
    circuit: &C,
    options: &StartOptions,
) -> Result<(VerifyingKey<G1Affine>, Origin)> {
    let generate = || keygen_vk_custom(params, circuit, options.compress_selectors).map_err(keygen);
    key_at(
        codec,
        &location.into(),
        params.k(),
        circuit,
        options,
        generate,
    )
}

/// A key of kind `K` at `location` for `2^k` rows: loaded when usable, otherwise generated,
/// checked against the pin and saved.
fn key_at<C: Circuit<Fr>, K: StartKey>(
    codec: &dyn KeyCodec,
    location: &Location,
    k: u32,
    circuit: &C,
    options: &StartOptions,
    generate: impl FnOnce() -> Result<K>,
) -> Result<(K, Origin)> {
    let load = options.key_load(k);
    match location {
        Location::File(path) => {
            let attempt = || K::load_file::<C>(codec, path, circuit.params(), &load);
            if let Some(key) = usable(attempt())? {
                return Ok((key, Origin::Loaded));
            }
            let _lock = lock_beside(path)?;
            // Another process may have generated it while this one waited.
            if let Some(key) = usable(attempt())? {
                return Ok((key, Origin::Loaded));
            }
            let key = pinned(generate()?, &load, path)?;
            codec.save::<C, _>(path, &key, circuit.params(), &options.save)?;
            Ok((key, Origin::Generated))
        }
        #[cfg(feature = "remote")]
        Location::Object {
            remote,
            path: object,
            cache,
        } => crate::fetch::key_object(codec, remote, object, cache, circuit, &load, |at| {
            pinned(generate()?, &load, at)
        }),
    }
}

/// A key a cold start loads or generates: a proving key, or a verifying key (read from
/// either kind of container).
pub(crate) trait StartKey: HaloKey {
    /// Its digest, for the pin.
    fn digest(&self) -> Result<KeyDigest>;

    /// Loads it from a file.
    fn load_file<C: Circuit<Fr>>(
        codec: &dyn KeyCodec,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<Self>;
}

impl StartKey for ProvingKey<G1Affine> {
    fn digest(&self) -> Result<KeyDigest> {
        KeyDigest::of_pk(self)
    }

    fn load_file<C: Circuit<Fr>>(
        codec: &dyn KeyCodec,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<Self> {
        codec.load::<C, Self>(path, circuit_params, options)
    }
}

impl StartKey for VerifyingKey<G1Affine> {
    fn digest(&self) -> Result<KeyDigest> {
        KeyDigest::of_vk(self)
    }

    fn load_file<C: Circuit<Fr>>(
        codec: &dyn KeyCodec,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<Self> {
        codec.load_verifying_key::<C>(path, circuit_params, options)
    }
}

/// `key`, unless the load pins another digest ([`Error::DigestMismatch`] naming `at`).
pub(crate) fn pinned<K: StartKey>(key: K, load: &LoadOptions, at: &Path) -> Result<K> {
    if let Some(expected) = load.expected_digest {
        let found = key.digest()?;
        if found != expected {
            return Err(Error::DigestMismatch {
                kind: K::KIND,
                path: Some(at.to_path_buf()),
                expected,
                found,
            });
        }
    }
    Ok(key)
}

/// Opens KZG parameters at `location`: a keycodec container (any backend that stores them,
/// from its header), or a headerless file as halo2's `ParamsKZG::write_custom` writes it in
/// any `SerdeFormat` (`kzg_bn254_22.srs`; the format follows from the file's length), with
/// every point checked unless `options.validation` trusts them; an object (feature `remote`)
/// goes through its cache (see `keycodec::remote`'s `fetch_params`: downloaded and checked
/// once, then a local load). `pin` refuses other parameters: a SHA-256 pin before anything is
/// read from the file, a digest pin once they are loaded (`options.expected_digest` is not
/// used: pins are per artifact). With `k` smaller than the file's, the parameters are
/// downsized to `2^k` points (halo2's `downsize`: `g` truncated, `g_lagrange` recomputed),
/// so one large file serves every smaller circuit. Downsizing costs a scalar multiplication
/// of a G1 point per FFT butterfly, `2^(k-1) * k` of them, on every core: slow at large `k`
/// (see `docs/performance.md`); an object's downsized parameters are cached, and a prover
/// that starts often from a file should downsize once (`keycodec params downsize`).
///
/// # Errors
///
/// I/O and decode errors naming the file; [`Error::FileHashMismatch`] or
/// [`Error::DigestMismatch`] for parameters that are not the pinned ones; [`Error::KMismatch`]
/// when the file's `k` is smaller than `k`; [`Error::NotCompiled`] for a halo2 file without
/// the rawbytes backend, or an object without the remote feature.
pub fn open_params(
    location: impl Into<Location>,
    k: Option<u32>,
    pin: Option<ParamsPin>,
    options: &LoadOptions,
) -> Result<Params> {
    let options = LoadOptions {
        expected_digest: None,
        ..*options
    };
    match location.into() {
        Location::File(path) => {
            if let Some(ParamsPin::Sha256(expected)) = pin {
                check_sha256(&path, &expected)?;
            }
            let params = read_params_file(&path, &options)?;
            if let Some(ParamsPin::Digest(expected)) = pin {
                check_params_digest(&params, expected, &path)?;
            }
            match k {
                Some(k) if k != params.k() => downsize(params, k).map_err(|err| err.at_path(&path)),
                _ => Ok(params),
            }
        }
        #[cfg(feature = "remote")]
        Location::Object {
            remote,
            path,
            cache,
        } => crate::fetch::fetch_params(&remote, &path, &cache, k, pin, &options, &|_| {})
            .map(|fetched| fetched.params),
    }
}

/// Reads parameters from a container or a headerless halo2 file.
pub(crate) fn read_params_file(path: &Path, options: &LoadOptions) -> Result<Params> {
    if is_container(path)? {
        Backend::of_file(path)?.codec()?.load_params(path, options)
    } else {
        import_halo2_params(path, options)
    }
}

/// Fails unless `params` have the digest `expected` ([`Error::DigestMismatch`] naming `at`).
pub(crate) fn check_params_digest(params: &Params, expected: KeyDigest, at: &Path) -> Result<()> {
    let found = KeyDigest::of_params(params)?;
    if found != expected {
        return Err(Error::DigestMismatch {
            kind: KeyKind::Params,
            path: Some(at.to_path_buf()),
            expected,
            found,
        });
    }
    Ok(())
}

/// Fails unless the file at `path` has the SHA-256 `expected` ([`Error::FileHashMismatch`]).
pub(crate) fn check_sha256(path: &Path, expected: &[u8; 32]) -> Result<()> {
    let found = sha256_of(path)?;
    if &found != expected {
        return Err(Error::FileHashMismatch {
            file: path.display().to_string(),
            expected: hex(expected),
            found: hex(&found),
        });
    }
    Ok(())
}

/// The SHA-256 of the file at `path`.
pub(crate) fn sha256_of(path: &Path) -> Result<[u8; 32]> {
    use sha2::Digest as _;
    let hash = || {
        let mut file = File::open(path).map_err(|err| Error::io("open", err))?;
        let mut hasher = sha2::Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => hasher.update(buffer.get(..n).unwrap_or_default()),
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(Error::io("read", err)),
            }
        }
        Ok(hasher.finalize().into())
    };
    hash().map_err(|err: Error| err.at_path(path))
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
/// ([`open_params`], downsized to `k`, pinned by [`StartOptions::params_pin`]) and the proving
/// key ([`load_or_generate_pk`], pinned by [`StartOptions::key_pin`]) are loaded at the same
/// time, each with every core it can use, from files or objects; the key is generated (after
/// the parameters, which keygen needs) only if it is missing, another circuit's or `k`'s, or
/// not the pinned one.
///
/// # Errors
///
/// Those of [`open_params`] and [`load_or_generate_pk`], each naming its artifact and file.
pub fn cold_start<C: Circuit<Fr>>(
    codec: &dyn KeyCodec,
    params: impl Into<Location>,
    key: impl Into<Location>,
    k: u32,
    circuit: &C,
    options: &StartOptions,
) -> Result<ColdStart> {
    let (params_at, key_at) = (params.into(), key.into());
    let open = || {
        open_params(
            params_at.clone(),
            Some(k),
            options.params_pin,
            &options.load,
        )
    };
    let load = options.key_load(k);
    let load_key = || match &key_at {
        Location::File(path) => {
            codec.load::<C, ProvingKey<G1Affine>>(path, circuit.params(), &load)
        }
        #[cfg(feature = "remote")]
        Location::Object {
            remote,
            path,
            cache,
        } => crate::fetch::cached_key::<C, ProvingKey<G1Affine>>(
            codec, remote, path, cache, circuit, &load,
        ),
    };
    let (params, key) = std::thread::scope(|scope| {
        let params = std::thread::Builder::new()
            .name("keycodec-params".into())
            .spawn_scoped(scope, open);
        let key = load_key();
        let params = match params {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the parameters thread panicked".into()))),
            // No thread to spare: one after the other.
            Err(_) => open(),
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
    let (pk, origin) = load_or_generate_pk(codec, key_at, &params, circuit, options)?;
    Ok(ColdStart { params, pk, origin })
}

/// `Some` of a loaded value, `None` when it is missing or is not the right key (it will be
/// generated), the error when something else failed (it would fail again).
pub(crate) fn usable<T>(loaded: Result<T>) -> Result<Option<T>> {
    match loaded {
        Ok(value) => Ok(Some(value)),
        Err(err) if is_missing(err.cause()) => Ok(None),
        Err(err) => match err.cause() {
            Error::Io { .. }
            | Error::Internal(_)
            | Error::OutOfMemory { .. }
            | Error::NotCompiled { .. }
            | Error::KindNotSupported { .. }
            | Error::ObjectStore { .. }
            | Error::ObjectChanged { .. } => Err(err),
            _ => Ok(None),
        },
    }
}

/// Whether `err` says the file or object is not there.
fn is_missing(err: &Error) -> bool {
    match err {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        #[cfg(feature = "remote")]
        Error::ObjectStore { source, .. } => source
            .downcast_ref::<crate::remote::object_store::Error>()
            .is_some_and(|err| matches!(err, crate::remote::object_store::Error::NotFound { .. })),
        _ => false,
    }
}

fn keygen(err: codec_core::halo2_proofs::plonk::Error) -> Error {
    Error::Internal(format!("halo2's keygen failed: {err:?}"))
}

/// Whether `path` starts with keycodec's magic bytes.
pub(crate) fn is_container(path: &Path) -> Result<bool> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_pins_parse_from_hex() {
        let hex_text = "00".repeat(31) + "ff";
        let pin = ParamsPin::sha256(&hex_text).ok();
        let mut expected = [0u8; 32];
        expected[31] = 0xff;
        assert_eq!(pin, Some(ParamsPin::Sha256(expected)));
        assert_eq!(hex(&expected), hex_text);
        for bad in ["", "00", &"zz".repeat(32), &"0".repeat(65)] {
            assert!(ParamsPin::sha256(bad).is_err(), "{bad}");
        }
    }
}
