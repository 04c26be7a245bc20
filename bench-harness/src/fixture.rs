//! The benchmark's key: a [`Workload`] circuit at `k` (the seed's StandardPlonk by default),
//! built fast and cached with the circuit's configuration.
//!
//! The proving key is cached as a keycodec container (rawbytes), so a stale or corrupt cache
//! (another circuit, another `k`, an older container version, a flipped bit) is refused by
//! the container's own checks and rebuilt, never used. The original every load is checked
//! against is the key halo2's keygen produced, not a load of it: its digest is computed from
//! keygen's key and stored beside the cache, and the cached key is loaded pinned to it (a
//! rawbytes decode that differed from keygen's key is refused, and the key rebuilt). The parameters are cached too, behind
//! a checksum, so that a rebuilt key does not pay for them twice.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use halo2_proofs::plonk::{keygen_pk, keygen_vk, ProvingKey};
use halo2_proofs::poly::commitment::Params;
use halo2_proofs::poly::kzg::commitment::ParamsKZG;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{Bn256, G1Affine};
use indicatif::{ProgressBar, ProgressStyle};
use keycodec::Validation;
use keycodec_core::{KeyCodecExt, LoadOptions, SaveOptions};
use keycodec_rawbytes::RawBytesCodec;
use twox_hash::XxHash3_64;

use crate::params::fast_setup;
use crate::workload::{params_from_json, params_to_json, Workload};

/// Seed of the benchmark's toxic secret.
pub const SEED: u64 = 0x6b65_7963_6f64_6563;

/// Magic of the cached parameter file (followed by an XXH3-64 of the rest).
const PARAMS_MAGIC: &[u8; 8] = b"KCPARAMS";

/// The benchmark key and how it was obtained.
pub struct Fixture<C: Workload> {
    /// `k` of the key.
    pub k: u32,
    /// The proving key.
    pub pk: ProvingKey<G1Affine>,
    /// The digest of the key keygen produced (computed from it when it was built).
    pub keygen_digest: keycodec::KeyDigest,
    /// The circuit's configuration, which every load of the key needs.
    pub circuit_params: C::Params,
    /// What happened: loaded from cache, or built (and why).
    pub origin: String,
    /// Seconds spent obtaining the key.
    pub seconds: f64,
}

/// Where the cached key of workload `C` at `k` lives.
pub fn pk_cache_path<C: Workload>(cache_dir: &Path, k: u32) -> PathBuf {
    cache_dir.join(format!("{}-k{k}.pk", C::NAME))
}

/// Where the digest of the key keygen produced is kept (hex), beside the cached key.
fn digest_cache_path<C: Workload>(cache_dir: &Path, k: u32) -> PathBuf {
    cache_dir.join(format!("{}-k{k}.keygen-digest", C::NAME))
}

/// Where the cached configuration of workload `C` at `k` lives (JSON), beside its key.
pub fn circuit_cache_path<C: Workload>(cache_dir: &Path, k: u32) -> PathBuf {
    cache_dir.join(format!("{}-k{k}.circuit.json", C::NAME))
}

fn params_cache_path(cache_dir: &Path, k: u32) -> PathBuf {
    cache_dir.join(format!("params-kzg-bn254-k{k}-seed{SEED:x}.bin"))
}

/// Loads the cached key for `k` (with its circuit's configuration), or builds (and caches)
/// both.
///
/// # Errors
///
/// I/O errors creating the cache, or a keygen failure.
pub fn load_or_build<C: Workload>(cache_dir: &Path, k: u32) -> Result<Fixture<C>, String> {
    let started = Instant::now();
    std::fs::create_dir_all(cache_dir)
        .map_err(|e| format!("creating {}: {e}", cache_dir.display()))?;
    let path = pk_cache_path::<C>(cache_dir, k);
    let circuit_path = circuit_cache_path::<C>(cache_dir, k);
    let key_cached = path.exists();
    // Said only where there is a key to load: a first run goes straight to building one.
    let loading = key_cached.then(|| spinner(format!("loading cached k={k} key")));
    let digest_path = digest_cache_path::<C>(cache_dir, k);
    let keygen_digest = std::fs::read_to_string(&digest_path)
        .ok()
        .and_then(|hex| hex.trim().parse::<keycodec::KeyDigest>().ok());
    let cached = match (std::fs::read_to_string(&circuit_path), keygen_digest) {
        (Ok(json), Some(keygen_digest)) if key_cached => {
            let options = LoadOptions {
                expected_k: Some(k),
                validation: Validation::Trusted,
                expected_digest: Some(keygen_digest),
                ..LoadOptions::default()
            };
            Some(params_from_json::<C>(&json).and_then(|circuit_params| {
                RawBytesCodec::default()
                    .load::<C, ProvingKey<G1Affine>>(&path, circuit_params.clone(), &options)
                    .map(|pk| (pk, circuit_params, keygen_digest))
                    .map_err(|e| e.to_string())
            }))
        }
        (Ok(_), None) if key_cached => Some(Err("no keygen digest beside it".to_owned())),
        _ => None,
    };
    if let Some(loading) = loading {
        loading.finish_and_clear();
    }
    let reason = match cached {
        Some(Ok((pk, circuit_params, keygen_digest))) => {
            return Ok(Fixture {
                k,
                pk,
                keygen_digest,
                circuit_params,
                origin: format!("cached ({})", path.display()),
                seconds: started.elapsed().as_secs_f64(),
            })
        }
        Some(Err(err)) => format!("cache refused ({err}), rebuilt"),
        None => "no cache, built".to_owned(),
    };
    let params = load_or_build_params(cache_dir, k)?;
    let keygen = spinner(format!(
        "halo2 keygen_vk + keygen_pk of {} at k={k}",
        C::NAME
    ));
    let circuit = C::keygen(k);
    let circuit_params = circuit.params();
    let vk = keygen_vk(&params, &circuit).map_err(|e| format!("keygen_vk: {e:?}"))?;
    let pk = keygen_pk(&params, vk, &circuit).map_err(|e| format!("keygen_pk: {e:?}"))?;
    drop((params, circuit));
    let keygen_digest = keycodec::KeyDigest::of_pk(&pk).map_err(|e| e.to_string())?;
    keygen.set_message(format!("caching the key at {}", path.display()));
    RawBytesCodec::default()
        .save::<C, _>(&path, &pk, circuit_params.clone(), &SaveOptions::default())
        .map_err(|e| format!("caching the key: {e}"))?;
    std::fs::write(&circuit_path, params_to_json::<C>(&circuit_params)?)
        .map_err(|e| format!("caching the circuit's configuration: {e}"))?;
    std::fs::write(&digest_path, format!("{keygen_digest}\n"))
        .map_err(|e| format!("caching the keygen digest: {e}"))?;
    keygen.finish_and_clear();
    Ok(Fixture {
        k,
        pk,
        keygen_digest,
        circuit_params,
        origin: reason,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Loads the cached KZG parameters for `k` (those the key was generated with), or builds
/// (and caches) them.
///
/// # Errors
///
/// I/O errors writing the cache.
pub fn load_or_build_params(cache_dir: &Path, k: u32) -> Result<ParamsKZG<Bn256>, String> {
    let path = params_cache_path(cache_dir, k);
    if let Some(params) = read_params(&path, k) {
        return Ok(params);
    }
    let points = 2u64 << k;
    let bar = ProgressBar::new(points).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} points ({eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("KZG parameters k={k} (fixed-base tables)"));
    let params = fast_setup(k, SEED, &|done| bar.inc(done));
    bar.finish_and_clear();
    write_params(&path, &params).map_err(|e| format!("caching parameters: {e}"))?;
    Ok(params)
}

/// Reads cached parameters if the file is complete, for this `k`, and matches its checksum.
fn read_params(path: &Path, k: u32) -> Option<ParamsKZG<Bn256>> {
    let mut file = BufReader::with_capacity(1 << 20, File::open(path).ok()?);
    let mut head = [0u8; 16];
    file.read_exact(&mut head).ok()?;
    let (magic, checksum) = head.split_at(8);
    if magic != PARAMS_MAGIC {
        return None;
    }
    let mut body = Vec::new();
    file.read_to_end(&mut body).ok()?;
    if XxHash3_64::oneshot(&body).to_le_bytes() != checksum {
        return None;
    }
    // The checksum matched what this harness wrote: skip the per-point checks.
    let params =
        ParamsKZG::<Bn256>::read_custom(&mut body.as_slice(), SerdeFormat::RawBytesUnchecked)
            .ok()?;
    (params.k() == k).then_some(params)
}

fn write_params(path: &Path, params: &ParamsKZG<Bn256>) -> std::io::Result<()> {
    let mut body = Vec::new();
    params.write_custom(&mut body, SerdeFormat::RawBytes)?;
    let mut file = BufWriter::with_capacity(1 << 20, File::create(path)?);
    file.write_all(PARAMS_MAGIC)?;
    file.write_all(&XxHash3_64::oneshot(&body).to_le_bytes())?;
    file.write_all(&body)?;
    file.flush()
}

/// A spinner with a message, ticking on its own.
pub fn spinner(message: String) -> ProgressBar {
    // A log (output not a terminal) gets the phase as a line: the spinner draws nothing there.
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("{message}");
    }
    let bar = ProgressBar::new_spinner();
    bar.set_message(message);
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}
