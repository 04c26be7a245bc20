//! What a load case does, as data: a [`Load`] is run in the harness's own process (a warm
//! one, whose allocator hands back memory freed by the previous load) or sent to a child
//! process of its own (fresh, as a prover's start is), and what it loaded is checked against
//! the original by digest.

use std::path::{Path, PathBuf};
use std::time::Instant;

use halo2_proofs::plonk::ProvingKey;
use halo2_proofs::poly::EvaluationDomain;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{Fr, G1Affine};
use keycodec::{
    open_params, Backend, KeyDigest, KeyOptions, KzgParams, Origin, ParamsOptions, Start,
    Validation,
};
use keycodec_core::backend_api::{PayloadReader, Span};
use keycodec_core::{KeyCodec, KeyCodecExt, Size};
use keycodec_rawbytes::RawBytesCodec;
use serde::{Deserialize, Serialize};

use crate::measure::{self, load_options, rss};
use crate::workload::Workload;

/// halo2's file layouts, as the cases name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Format {
    /// `SerdeFormat::RawBytes`: raw, each value checked.
    RawBytes,
    /// `SerdeFormat::RawBytesUnchecked`: raw, trusted.
    RawBytesUnchecked,
    /// `SerdeFormat::Processed`: compressed.
    Processed,
}

impl Format {
    /// halo2's own value.
    pub fn serde(self) -> SerdeFormat {
        match self {
            Format::RawBytes => SerdeFormat::RawBytes,
            Format::RawBytesUnchecked => SerdeFormat::RawBytesUnchecked,
            Format::Processed => SerdeFormat::Processed,
        }
    }
}

/// How values are treated, as the cases name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Values {
    /// Every value checked.
    Checked,
    /// Values trusted.
    Trusted,
    /// Checked, and the key's digest pinned.
    Pinned,
}

impl Values {
    /// The validation a keycodec load uses.
    pub fn validation(self) -> Validation {
        match self {
            Values::Trusted => Validation::Trusted,
            Values::Checked | Values::Pinned => Validation::Checked,
        }
    }
}

/// One load, as data (so that a child process can run it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Load {
    /// The proving key with a keycodec backend's codec of this wire mode.
    Key {
        /// Backend name.
        backend: String,
        /// Wire mode name.
        mode: String,
        /// Checked, trusted or pinned.
        values: Values,
    },
    /// The proving key with halo2's `ProvingKey::read` through a 1 MiB `BufReader`, as
    /// halo2-lib's snark-verifier-sdk calls it.
    NativeKey(Format),
    /// The KZG parameters with a backend's codec.
    Params {
        /// Backend name.
        backend: String,
        /// Wire mode name.
        mode: String,
        /// Checked or trusted.
        values: Values,
    },
    /// The parameters with halo2's `ParamsKZG::read_custom`.
    NativeParams(Format),
    /// keycodec's import of halo2's parameters file in this layout.
    ImportParams(Format),
    /// `open_params` of the (larger) parameters file, downsized to this `k`.
    Downsize(u32),
    /// keycodec's cold start: parameters and key from their files, checked.
    ColdStart {
        /// Backend name.
        backend: String,
    },
    /// halo2's: `ParamsKZG::read_custom` then `ProvingKey::read`, checked.
    NativeColdStart,
    /// The floor: the file read, nothing decoded (see [`floor`]).
    Floor {
        /// Bytes of each of the key's polynomials (a key file is read into memory allocated
        /// as a key's is: one vector each); `None` for parameters.
        polynomial_bytes: Option<u64>,
        /// `(degree, k)` of the key's evaluation domain, built on another thread meanwhile.
        domain: Option<(u32, u32)>,
    },
}

/// What every load of one run is measured against.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    /// `k` of the key.
    pub k: u32,
    /// The key's digest: pinned loads pin it, and every loaded key must have it.
    pub key: String,
    /// The parameters' digest.
    pub params: String,
    /// The downsized parameters' digest, when a case downsizes.
    pub downsized: Option<String>,
}

/// One measured load.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds the load took.
    pub seconds: f64,
    /// Whether it loaded the original.
    pub verified: bool,
    /// Rise of resident memory during the load, if measurable.
    pub rss_rise: Option<u64>,
    /// The process's memory in transparent huge pages right after the load (its key held).
    #[serde(default)]
    pub huge_pages: Option<u64>,
    /// The machine's compaction stalls during the load.
    #[serde(default)]
    pub compact_stalls: Option<u64>,
}

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
    let started = Instant::now();
    let loaded = execute::<C>(load, paths, circuit_params, target, buffer)?;
    let seconds = match loaded {
        // The floor times itself: the faster of its two ways.
        Loaded::Read(Floor { seconds, .. }) => seconds,
        _ => started.elapsed().as_secs_f64(),
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
                    limits: load_options(Validation::Checked, None, None, buffer).limits,
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
            let limits = load_options(Validation::Checked, None, None, buffer).limits;
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
        } => Loaded::Read(floor(first()?, *polynomial_bytes, *domain)?),
    })
}

/// Whether what `load` loaded is the original (by digest; a cold start must also have
/// loaded its key, not generated it).
fn check(load: &Load, loaded: &Loaded, target: &Target) -> Result<bool, String> {
    let key = |pk: &ProvingKey<G1Affine>| -> Result<bool, String> {
        Ok(KeyDigest::of_pk(pk).map_err(|e| e.to_string())? == digest(&target.key)?)
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

/// What any loader of a file must at least do: read it into fresh memory, while a key's
/// evaluation domain (`(degree, k)`) is built on another thread; nothing is decoded or
/// checked. A key file is read into memory allocated as a key's is, one vector per
/// polynomial (`polynomial_bytes` each), so that the allocator behaves as it does for a key,
/// handing back what the last key freed; parameters into one vector. Two ways, the faster
/// counting: over every core with keycodec's own bulk read (positioned reads into memory not
/// zeroed first, pages mapped a piece at a time), and, for files under
/// [`SMALL_FILE`] (where starting threads costs more than it saves), on one thread with
/// `read_to_end` into each vector's spare capacity. Returns the seconds and whether every
/// byte was read, and the memory read into (the faster way's).
///
/// # Errors
///
/// I/O errors, as text.
pub fn floor(
    path: &Path,
    polynomial_bytes: Option<u64>,
    domain: Option<(u32, u32)>,
) -> Result<Floor, String> {
    let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    let polynomial_bytes = polynomial_bytes.unwrap_or(len);
    let parallel = timed_with_domain(domain, || read_as_polynomials(path, len, polynomial_bytes))?;
    if len >= SMALL_FILE {
        return Ok(parallel);
    }
    let single = timed_with_domain(domain, || read_in_order(path, len, polynomial_bytes))?;
    Ok(if single.seconds < parallel.seconds {
        single
    } else {
        parallel
    })
}

/// A floor's read: its seconds, whether every byte was read, and the memory read into.
pub struct Floor {
    /// Seconds the read took (the domain's build beside it included).
    pub seconds: f64,
    /// Whether every byte was read (and the domain built).
    pub complete: bool,
    /// The memory read into, held until the floor is dropped.
    _held: Box<dyn std::any::Any>,
}

/// Below this, the floor also reads on one thread.
pub const SMALL_FILE: u64 = 256 << 20;

/// Times `read` while the domain is built on another thread.
fn timed_with_domain<T: 'static>(
    domain: Option<(u32, u32)>,
    read: impl FnOnce() -> Result<(bool, T), String>,
) -> Result<Floor, String> {
    let started = Instant::now();
    let (complete, held) = std::thread::scope(|scope| {
        let building = domain.map(|(degree, k)| {
            scope.spawn(move || {
                let domain = EvaluationDomain::<Fr>::new(degree, k);
                std::hint::black_box(&domain);
            })
        });
        let read = read();
        let built = building.is_none_or(|thread| thread.join().is_ok());
        read.map(|(complete, held)| (complete && built, held))
    })?;
    Ok(Floor {
        seconds: started.elapsed().as_secs_f64(),
        complete,
        _held: Box::new(held),
    })
}

/// Reads `path` on this thread into one vector per polynomial of `polynomial_bytes`.
fn read_in_order(
    path: &Path,
    len: u64,
    polynomial_bytes: u64,
) -> Result<(bool, Vec<Vec<u8>>), String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut vectors = Vec::new();
    let mut read = 0u64;
    while read < len {
        let want = polynomial_bytes.max(1).min(len - read);
        let mut piece = Vec::with_capacity(usize::try_from(want).map_err(|e| e.to_string())?);
        let got = (&mut file)
            .take(want)
            .read_to_end(&mut piece)
            .map_err(|e| e.to_string())?;
        if got == 0 {
            break;
        }
        read += got as u64;
        vectors.push(piece);
    }
    Ok((read == len, std::hint::black_box(vectors)))
}

/// Reads the `len` bytes of `path` as polynomials of `polynomial_bytes` bytes (whole
/// elements; the bytes after the last whole polynomial as bytes).
fn read_as_polynomials(
    path: &Path,
    len: u64,
    polynomial_bytes: u64,
) -> Result<(bool, keycodec_core::backend_api::SpanData), String> {
    let elements = usize::try_from(polynomial_bytes / 32).map_err(|e| e.to_string())?;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut reader = PayloadReader::from_file(&file, len, 1 << 12);
    let polynomial_bytes = elements as u64 * 32;
    let polynomials = len.checked_div(polynomial_bytes).unwrap_or(0);
    let rest = len - polynomials * polynomial_bytes;
    let mut spans: Vec<Span> = (0..polynomials)
        .map(|_| Span::Polynomial {
            count: elements,
            spare: 0,
        })
        .collect();
    spans.push(Span::Bytes(
        usize::try_from(rest).map_err(|e| e.to_string())?,
    ));
    let groups = [usize::try_from(polynomials).map_err(|e| e.to_string())?];
    let data = reader
        .read_spans(&spans, &groups, Validation::Trusted, |_, _| Ok(()), "floor")
        .map_err(|e| e.to_string())?;
    let read: u64 = data
        .groups
        .iter()
        .flatten()
        .map(|values| (values.len() * 32) as u64)
        .sum::<u64>()
        + data.bytes.len() as u64;
    Ok((read == len, std::hint::black_box(data)))
}

/// A load for a child process: everything it needs to run and check it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildRequest {
    /// The workload.
    pub circuit: crate::CircuitName,
    /// Its configuration, JSON.
    pub circuit_params: String,
    /// What to load.
    pub load: Load,
    /// From which files.
    pub paths: Vec<PathBuf>,
    /// The originals' digests.
    pub target: Target,
    /// Buffer bytes.
    pub buffer: u64,
}

/// Runs `request` in a new process of `exe` (this harness, `--child`); returns what it
/// measured.
///
/// # Errors
///
/// The child's failure or its error, as text.
pub fn run_in_child(exe: &Path, request: &ChildRequest) -> Result<Sample, String> {
    let json = serde_json::to_string(request).map_err(|e| e.to_string())?;
    let output = std::process::Command::new(exe)
        .arg("--child")
        .arg(json)
        .output()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    if !output.status.success() {
        return Err(format!(
            "a fresh-process load failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).map_err(|e| format!("a child's report: {e}: {stdout}"))
}

/// The child's side of [`run_in_child`]: runs the request and prints its [`Sample`] as JSON.
///
/// # Errors
///
/// The load's error, as text.
pub fn child<C: Workload>(request: &ChildRequest) -> Result<String, String> {
    let circuit_params = crate::workload::params_from_json::<C>(&request.circuit_params)?;
    let paths: Vec<&Path> = request.paths.iter().map(PathBuf::as_path).collect();
    let sample = run_here::<C>(
        &request.load,
        &paths,
        &circuit_params,
        &request.target,
        Size(request.buffer),
    )?;
    serde_json::to_string(&sample).map_err(|e| e.to_string())
}
