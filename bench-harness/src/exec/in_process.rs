//! A load run in this process: timed, with the memory it took, then what it loaded checked
//! against the originals (untimed).

use std::path::Path;
use std::time::Instant;

use halo2_proofs::plonk::ProvingKey;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::G1Affine;
use keycodec::{
    open_params, Backend, KeyDigest, KeyOptions, KzgParams, Origin, ParamsOptions, ParamsPin,
    Start, Validation,
};
use keycodec_core::{KeyCodec, KeyCodecExt, Size};
use keycodec_rawbytes::RawBytesCodec;

use super::floor_read::{floor, Floor};
use super::{KeyValues, Load, Sample, Target, Values};
use crate::measure::{self, cpu, load_options, rss};
use crate::workload::Workload;

/// What a load returned (moved once, to be checked: boxing would buy nothing).
#[allow(clippy::large_enum_variant)]
enum Loaded {
    Key(ProvingKey<G1Affine>),
    Params(KzgParams),
    Start(KzgParams, ProvingKey<G1Affine>, Origin),
    /// A floor (its memory held as a load's key is, until dropped).
    Read(Floor),
}

/// Runs `load` as a server that reloads the same key does: twice untimed first, the first
/// copy freed while the second is still held (a server replacing its key with a new load),
/// then timed (see [`run_here`]) with the second still held, so that the timed load meets
/// the allocator as such a server's reload does, whatever ran before it: the memory of a
/// copy of the same size just freed.
///
/// # Errors
///
/// The loader's error, as text.
pub fn run_reloading<C: Workload>(
    load: &Load,
    paths: &[&Path],
    circuit_params: &C::Params,
    target: &Target,
    buffer: Size,
) -> Result<Sample, String> {
    let first = execute::<C>(load, paths, circuit_params, target, buffer)?;
    let held = execute::<C>(load, paths, circuit_params, target, buffer)?;
    drop(first);
    let sample = run_here::<C>(load, paths, circuit_params, target, buffer);
    drop(held);
    sample
}

/// Runs `load` on `paths` in this process, then checks what it loaded (untimed).
///
/// # Errors
///
/// The loader's error, as text.
pub fn run_here<C: Workload>(
    load: &Load,
    paths: &[&Path],
    circuit_params: &C::Params,
    target: &Target,
    buffer: Size,
) -> Result<Sample, String> {
    let measurable = rss::reset_peak();
    let before = rss::current();
    let stalls_before = rss::compact_stalls();
    let cpu_before = cpu::now();
    let started = Instant::now();
    let loaded = execute::<C>(load, paths, circuit_params, target, buffer)?;
    let (seconds, way, cpu) = match loaded {
        // The floor times itself: the fastest of the ways it took.
        Loaded::Read(Floor { seconds, way, .. }) => (seconds, Some(way), None),
        _ => (
            started.elapsed().as_secs_f64(),
            None,
            cpu::now()
                .zip(cpu_before)
                .map(|(after, before)| after.since(before)),
        ),
    };
    let compact_stalls = rss::compact_stalls()
        .zip(stalls_before)
        .map(|(after, before)| after.saturating_sub(before));
    let huge_pages = rss::anon_huge_pages();
    let rss_rise = match (measurable, before, rss::peak()) {
        (true, Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    let verified = check(load, &loaded, target)?;
    Ok(Sample {
        seconds,
        verified,
        rss_rise,
        huge_pages,
        compact_stalls,
        cached_before: None,
        way,
        cpu,
    })
}

fn digest(text: &str) -> Result<KeyDigest, String> {
    text.parse()
        .map_err(|e: keycodec::ParseDigestError| e.to_string())
}

/// The codec of `backend` that writes wire mode `mode`.
pub fn codec(backend: &str, mode: &str) -> Result<&'static dyn KeyCodec, String> {
    let backend: Backend = backend.parse().map_err(|e| format!("{e}"))?;
    backend
        .codecs()
        .map_err(|e| e.to_string())?
        .iter()
        .copied()
        .find(|codec| codec.wire_mode().name() == mode)
        .ok_or_else(|| format!("backend {backend} writes no mode {mode}"))
}

/// Runs one load of `paths` (nothing checked: [`check`] does that, untimed).
///
/// Long on purpose: one arm per kind of load, each the few calls it makes.
fn execute<C: Workload>(
    load: &Load,
    paths: &[&Path],
    circuit_params: &C::Params,
    target: &Target,
    buffer: Size,
) -> Result<Loaded, String> {
    let first = || paths.first().copied().ok_or("no file to load");
    let k = target.k;
    Ok(match load {
        Load::Key {
            backend,
            mode,
            values,
        } => {
            let pin = match values {
                Values::Pinned => Some(digest(&target.key)?),
                _ => None,
            };
            let options = load_options(values.validation(), pin, Some(k), buffer);
            Loaded::Key(
                codec(backend, mode)?
                    .load::<C, _>(first()?, circuit_params.clone(), &options)
                    .map_err(|e| e.to_string())?,
            )
        }
        Load::NativeKey(format) => Loaded::Key(measure::read_key_native::<C>(
            first()?,
            format.serde(),
            circuit_params.clone(),
            buffer,
        )?),
        // Pinned: as a prover opens them, by the digest its configuration pins (which proves
        // every point, instead of the curve equation of each).
        Load::Params {
            values: Values::Pinned,
            ..
        } => Loaded::Params(
            open_params(
                first()?,
                &ParamsOptions {
                    pin: Some(ParamsPin::Digest(digest(&target.params)?)),
                    limits: measure::load_limits(),
                    ..ParamsOptions::default()
                },
            )
            .map_err(|e| e.to_string())?,
        ),
        Load::Params {
            backend,
            mode,
            values,
        } => Loaded::Params(
            codec(backend, mode)?
                .load_params(
                    first()?,
                    &load_options(values.validation(), None, None, buffer),
                )
                .map_err(|e| e.to_string())?,
        ),
        Load::NativeParams(format) => Loaded::Params(measure::read_params_native(
            first()?,
            format.serde(),
            buffer,
        )?),
        Load::ImportParams(format) => Loaded::Params(
            RawBytesCodec::new(format.serde())
                .import_params_file(
                    first()?,
                    &load_options(Validation::Checked, None, None, buffer),
                )
                .map_err(|e| e.to_string())?,
        ),
        Load::Downsize(to) => Loaded::Params(
            open_params(
                first()?,
                &ParamsOptions {
                    k: Some(*to),
                    limits: measure::load_limits(),
                    ..ParamsOptions::default()
                },
            )
            .map_err(|e| e.to_string())?,
        ),
        Load::ColdStart { backend } => {
            let [params_path, pk_path] = paths else {
                return Err("a cold start reads two files".into());
            };
            let backend: Backend = backend
                .parse()
                .map_err(|e: keycodec::ParseBackendError| e.to_string())?;
            let limits = measure::load_limits();
            let prover = Start {
                key_options: KeyOptions {
                    limits,
                    backend: Some(backend),
                    ..KeyOptions::default()
                },
                params_options: ParamsOptions {
                    limits,
                    ..ParamsOptions::default()
                },
                ..Start::new(*params_path, *pk_path, k)
            };
            let circuit = C::with_params(circuit_params.clone());
            let start = prover.run(&circuit).map_err(|e| e.to_string())?;
            Loaded::Start(start.params, start.pk, start.origin)
        }
        Load::NativeColdStart => {
            let [params_path, pk_path] = paths else {
                return Err("a cold start reads two files".into());
            };
            let params = measure::read_params_native(params_path, SerdeFormat::RawBytes, buffer)?;
            let pk = measure::read_key_native::<C>(
                pk_path,
                SerdeFormat::RawBytes,
                circuit_params.clone(),
                buffer,
            )?;
            Loaded::Start(params, pk, Origin::Loaded)
        }
        Load::Floor {
            polynomial_bytes,
            domain,
            visit,
        } => Loaded::Read(floor(first()?, *polynomial_bytes, *domain, *visit)?),
    })
}

/// Whether what `load` loaded is the original (by digest; a cold start must also have
/// loaded its key, not generated it).
fn check(load: &Load, loaded: &Loaded, target: &Target) -> Result<bool, String> {
    let key = |pk: &ProvingKey<G1Affine>| -> Result<bool, String> {
        Ok(match &target.key_values {
            Some(values) => KeyValues::of(pk)? == *values,
            None => KeyDigest::of_pk(pk).map_err(|e| e.to_string())? == digest(&target.key)?,
        })
    };
    let params = |params: &KzgParams, expected: &str| -> Result<bool, String> {
        Ok(KeyDigest::of_params(params).map_err(|e| e.to_string())? == digest(expected)?)
    };
    match loaded {
        Loaded::Key(pk) => key(pk),
        Loaded::Params(loaded) => match load {
            Load::Downsize(_) => match &target.downsized {
                Some(downsized) => params(loaded, downsized),
                None => Err("a downsize without the downsized digest".into()),
            },
            _ => params(loaded, &target.params),
        },
        Loaded::Start(loaded, pk, origin) => {
            Ok(*origin == Origin::Loaded && params(loaded, &target.params)? && key(pk)?)
        }
        Loaded::Read(floor) => Ok(floor.complete),
    }
}
