//! What one run of the harness measures: the files it writes and the loads ("cases") it times,
//! each case knowing the rows it is compared with.
//!
//! Every run writes every file, then times every case once, in an order rotated run by run
//! (`stats::rotation`), so that compared rows see the same moments of a noisy machine and
//! their ratios can be taken run by run (`stats::paired_ratio`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use halo2_proofs::plonk::ProvingKey;
use halo2_proofs::poly::commitment::Params as _;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::G1Affine;
use keycodec::start::{cold_start, open_params, Origin, StartOptions};
use keycodec::{
    Backend, BufferConfig, KeyCodec, KeyCodecExt, KeyDigest, Params, RawBytesCodec, SaveOptions,
    Size, Validation,
};
use serde::Serialize;

use crate::fixture::Workload;
use crate::measure::{self, load_options, Reader, Writer};

/// The reference rows: halo2's own writer and reader.
pub const HALO2_NATIVE: &str = "halo2-native";

/// The rows that bound every loader from below (`measure::floor`).
pub const FLOOR: &str = "floor";

/// The backends the harness knows, by the names `--backends` takes: keycodec's backend list
/// and halo2's own reader.
pub fn backend_names() -> Vec<&'static str> {
    Backend::compiled()
        .map(Backend::name)
        .chain([HALO2_NATIVE])
        .collect()
}

/// What a row loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A proving key.
    Pk,
    /// KZG parameters.
    Params,
    /// A prover's cold start: parameters and proving key.
    ColdStart,
    /// A proving key in object storage (`--remote`).
    Remote,
}

/// The artifacts measured, and what the plan includes.
pub struct Inputs<'a> {
    /// The benchmark key.
    pub pk: &'a ProvingKey<G1Affine>,
    /// Its digest, for the pinned rows.
    pub pin: KeyDigest,
    /// The parameters it was generated with.
    pub params: &'a Params,
    /// Where the files go.
    pub scratch: &'a Path,
    /// The backends selected (`--backends`).
    pub backends: &'a [String],
    /// Every wire mode, pinned rows, halo2's `Processed` rows, the `Processed` parameter
    /// import and a cold start per backend (`--full`); otherwise each backend's default
    /// mode, checked and trusted, and the fast rows.
    pub full: bool,
    /// The row that opens the parameters downsized to k - 1 (`--downsize`).
    pub downsize: bool,
}

/// Measures one write: the seconds taken.
pub(crate) type Write<'a> = Box<dyn Fn(&Path, Size) -> Result<f64, String> + 'a>;

/// Measures one write of something that is not a local file: seconds, and its size.
pub(crate) type Upload<'a> = Box<dyn Fn(Size) -> Result<(f64, u64), String> + 'a>;

/// Removes what a write wrote.
pub(crate) type Remove<'a> = Box<dyn Fn() -> Result<(), String> + 'a>;

/// Measures one load of the case's files: seconds, and whether what it loaded was right.
pub(crate) type Load<'a> = Box<dyn Fn(&[&Path], Size) -> Result<(f64, bool), String> + 'a>;

/// Something every run writes: a file, or an object in object storage.
pub struct File<'a> {
    /// What the progress bar calls it.
    pub name: String,
    /// Where the file is (for an object: where nothing is).
    pub path: PathBuf,
    write: Upload<'a>,
    remove: Remove<'a>,
}

impl File<'_> {
    /// Writes it with `buffer`; returns the seconds taken and the bytes written.
    ///
    /// # Errors
    ///
    /// The writer's error, as text.
    pub fn write(&self, buffer: Size) -> Result<(f64, u64), String> {
        (self.write)(buffer)
    }

    /// Removes it, if it is there.
    ///
    /// # Errors
    ///
    /// The file system's or the store's error, as text.
    pub fn remove(&self) -> Result<(), String> {
        (self.remove)()
    }
}

/// One timed load: a row of the table.
pub struct Case<'a> {
    /// What it loads.
    pub kind: Kind,
    /// Backend name as the table shows it.
    pub backend: &'static str,
    /// The file layout.
    pub mode: &'static str,
    /// `checked`, `trusted` or `pinned` (checked, digest pinned).
    pub validation: &'static str,
    /// The files it reads (indices into [`Plan::files`]).
    pub files: Vec<usize>,
    /// The case it is compared with, if any: halo2's own way to load the same thing (for a
    /// remote load, downloading the object and then loading the file).
    pub reference: Option<usize>,
    /// The floor case of its kind, if any.
    pub floor: Option<usize>,
    /// Whether the row shows its file's saves: it reads the one file, in the layout its
    /// backend wrote (not an import, a downsize or a floor).
    pub shows_write: bool,
    load: Load<'a>,
}

impl Case<'_> {
    /// Loads and checks; returns the seconds the load took and whether it loaded the
    /// original.
    ///
    /// # Errors
    ///
    /// The loader's error, as text.
    pub fn run(&self, paths: &[&Path], buffer: Size) -> Result<(f64, bool), String> {
        (self.load)(paths, buffer)
    }
}

/// The files and cases of one run.
pub struct Plan<'a> {
    /// Written first in every run.
    pub files: Vec<File<'a>>,
    /// Then timed, one after the other.
    pub cases: Vec<Case<'a>>,
}

impl<'a> Plan<'a> {
    /// A plan with nothing in it.
    pub(crate) fn empty() -> Self {
        Plan {
            files: Vec::new(),
            cases: Vec::new(),
        }
    }

    /// Compares `case` with `reference` (see [`Case::reference`]) and `floor`.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn compare(&mut self, case: usize, reference: Option<usize>, floor: Option<usize>) {
        if let Some(case) = self.cases.get_mut(case) {
            case.reference = reference;
            case.floor = floor;
        }
    }
    pub(crate) fn file(&mut self, name: String, write: Write<'a>, scratch: &Path) -> usize {
        let path = scratch.join(&name);
        let (written, removed) = (path.clone(), path.clone());
        self.files.push(File {
            name,
            path,
            write: Box::new(move |buffer| {
                let seconds = write(&written, buffer)?;
                let bytes = std::fs::metadata(&written)
                    .map_err(|e| e.to_string())?
                    .len();
                Ok((seconds, bytes))
            }),
            remove: Box::new(move || match std::fs::remove_file(&removed) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err.to_string()),
                _ => Ok(()),
            }),
        });
        self.files.len() - 1
    }

    /// Adds something that is not a local file (an object in object storage).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn object(&mut self, name: String, write: Upload<'a>, remove: Remove<'a>) -> usize {
        self.files.push(File {
            name,
            path: PathBuf::new(),
            write,
            remove,
        });
        self.files.len() - 1
    }

    pub(crate) fn case(
        &mut self,
        (kind, backend, mode, validation): (Kind, &'static str, &'static str, &'static str),
        files: Vec<usize>,
        load: Load<'a>,
    ) -> usize {
        self.cases.push(Case {
            kind,
            backend,
            mode,
            validation,
            reference: None,
            floor: None,
            shows_write: files.len() == 1 && backend != FLOOR,
            files,
            load,
        });
        self.cases.len() - 1
    }

    /// Marks a case as reading a file another writer wrote (an import, a downsize).
    pub(crate) fn without_write(&mut self, case: usize) {
        if let Some(case) = self.cases.get_mut(case) {
            case.shows_write = false;
        }
    }

    /// Links every case to halo2's case of the same kind and validation (a pinned row to
    /// the checked one; where halo2 has no such row, its checked one), and to its kind's
    /// floor.
    fn link(&mut self, references: &[(Kind, &'static str, &'static str, usize)]) {
        let floors: Vec<(Kind, usize)> = self
            .cases
            .iter()
            .enumerate()
            .filter(|(_, case)| case.backend == FLOOR)
            .map(|(index, case)| (case.kind, index))
            .collect();
        for (index, case) in self.cases.iter_mut().enumerate() {
            if case.backend == FLOOR || case.backend == HALO2_NATIVE {
                case.floor = floors
                    .iter()
                    .find(|(kind, floor)| *kind == case.kind && *floor != index)
                    .map(|(_, floor)| *floor);
                continue;
            }
            let validation = match case.validation {
                "pinned" => "checked",
                other => other,
            };
            let find = |validation: &str| {
                references
                    .iter()
                    .find(|(kind, mode, v, _)| {
                        *kind == case.kind && *v == validation && reference_mode(case) == *mode
                    })
                    .map(|(.., reference)| *reference)
            };
            case.reference = find(validation).or_else(|| find("checked"));
            case.floor = floors
                .iter()
                .find(|(kind, _)| *kind == case.kind)
                .map(|(_, floor)| *floor);
        }
    }
}

/// The halo2 layout a case is compared with: keycodec's compressed layout, and its import
/// of halo2's compressed parameters, with halo2's read of its compressed files; everything
/// else with halo2's raw layout.
fn reference_mode(case: &Case<'_>) -> &'static str {
    if case.mode == IMPORT_PROCESSED || case.mode == "Processed" {
        "Processed"
    } else {
        "RawBytes"
    }
}

/// halo2's file layouts measured, for keys and parameters alike: its raw layout, and with
/// `--full` its compressed one.
fn native_formats(full: bool) -> &'static [SerdeFormat] {
    if full {
        &[SerdeFormat::RawBytes, SerdeFormat::Processed]
    } else {
        &[SerdeFormat::RawBytes]
    }
}

/// halo2's reads of a file in `format`, by validation: checked, and for its raw layout also
/// unchecked (`trusted`).
fn native_reads(format: SerdeFormat) -> Vec<(&'static str, SerdeFormat)> {
    let mut reads = vec![("checked", format)];
    if matches!(format, SerdeFormat::RawBytes) {
        reads.push(("trusted", SerdeFormat::RawBytesUnchecked));
    }
    reads
}

/// The mode name of keycodec's import of a halo2 `Processed` parameters file.
pub const IMPORT_PROCESSED: &str = "import Processed";

/// The plan for workload `C` at the key's `k`.
pub fn plan<'a, C: Workload>(inputs: &Inputs<'a>) -> Plan<'a> {
    let mut plan = Plan::empty();
    let k = inputs.pk.get_vk().get_domain().k();
    let scratch = inputs.scratch;
    let selected = |name: &str| inputs.backends.iter().any(|b| b == name);
    let backends: Vec<Backend> = Backend::compiled().filter(|b| selected(b.name())).collect();
    let codecs_of = |backend: Backend| -> Vec<&'static dyn KeyCodec> {
        if inputs.full {
            backend.codecs().map(<[_]>::to_vec).unwrap_or_default()
        } else {
            backend.codec().map(|codec| vec![codec]).unwrap_or_default()
        }
    };
    let mut references = Vec::new();

    // Proving keys.
    let pk = inputs.pk;
    let mut key_files = Vec::new();
    for &backend in &backends {
        for codec in codecs_of(backend) {
            let writer = Writer::Codec(codec);
            let file = plan.file(
                format!("{}-{}.key", backend.name(), writer.mode()),
                Box::new(move |path, buffer| measure::write::<C>(writer, path, pk, buffer)),
                scratch,
            );
            if backend
                .codec()
                .is_ok_and(|default| default.wire_mode() == codec.wire_mode())
            {
                key_files.push((backend, file));
            }
            let mut reads = vec![("checked", Reader::Codec(codec, Validation::Checked, None))];
            if codec.effective_validation(codec.wire_mode(), Validation::Trusted)
                == Validation::Trusted
            {
                reads.push(("trusted", Reader::Codec(codec, Validation::Trusted, None)));
            }
            if inputs.full {
                reads.push((
                    "pinned",
                    Reader::Codec(codec, Validation::Checked, Some(inputs.pin)),
                ));
            }
            for (validation, reader) in reads {
                plan.case(
                    (Kind::Pk, backend.name(), writer.mode(), validation),
                    vec![file],
                    read_key::<C>(reader, pk, k),
                );
            }
        }
    }
    let mut native_key = None;
    if selected(HALO2_NATIVE) {
        for &format in native_formats(inputs.full) {
            let writer = Writer::Native(format);
            let file = plan.file(
                format!("{HALO2_NATIVE}-{}.key", writer.mode()),
                Box::new(move |path, buffer| measure::write::<C>(writer, path, pk, buffer)),
                scratch,
            );
            if matches!(format, SerdeFormat::RawBytes) {
                native_key = Some(file);
            }
            for (validation, read_format) in native_reads(format) {
                let case = plan.case(
                    (Kind::Pk, HALO2_NATIVE, writer.mode(), validation),
                    vec![file],
                    read_key::<C>(Reader::Native(read_format), pk, k),
                );
                references.push((Kind::Pk, writer.mode(), validation, case));
            }
        }
    }
    if let Some(&file) = key_files.first().map(|(_, f)| f).or(native_key.as_ref()) {
        let degree = u32::try_from(pk.get_vk().cs().degree()).unwrap_or(u32::MAX);
        plan.case(
            (Kind::Pk, FLOOR, "read + domain", "-"),
            vec![file],
            Box::new(move |paths, _buffer| {
                let path = paths.first().ok_or("floor: no file")?;
                measure::floor(path, Some((degree, k)))
            }),
        );
    }

    // Parameters.
    let params = inputs.params;
    let mut params_files = Vec::new();
    for &backend in &backends {
        for codec in codecs_of(backend).into_iter().filter(|c| c.stores_params()) {
            let mode = codec.wire_mode().name();
            let file = plan.file(
                format!("{}-{mode}.params", backend.name()),
                Box::new(move |path, buffer| {
                    let started = Instant::now();
                    let save = SaveOptions {
                        buffers: BufferConfig::both(buffer),
                    };
                    codec
                        .save_params(path, params, &save)
                        .map_err(|e| e.to_string())?;
                    Ok(started.elapsed().as_secs_f64())
                }),
                scratch,
            );
            params_files.push(file);
            let mut validations = vec![("checked", Validation::Checked)];
            if codec.effective_validation(codec.wire_mode(), Validation::Trusted)
                == Validation::Trusted
            {
                validations.push(("trusted", Validation::Trusted));
            }
            for (name, validation) in validations {
                plan.case(
                    (Kind::Params, backend.name(), mode, name),
                    vec![file],
                    timed_params(params, move |path, buffer| {
                        codec
                            .load_params(path, &load_options(validation, None, None, buffer))
                            .map_err(|e| e.to_string())
                    }),
                );
            }
        }
    }
    let mut native_params = None;
    if selected(HALO2_NATIVE) {
        for &format in native_formats(inputs.full) {
            let mode = measure::format_name(format);
            let file = plan.file(
                format!("{HALO2_NATIVE}-{mode}.params"),
                Box::new(move |path, buffer| {
                    measure::write_params_native(path, params, format, buffer)
                }),
                scratch,
            );
            if matches!(format, SerdeFormat::RawBytes) {
                native_params = Some(file);
            }
            for (validation, read_format) in native_reads(format) {
                let case = plan.case(
                    (Kind::Params, HALO2_NATIVE, mode, validation),
                    vec![file],
                    timed_params(params, move |path, buffer| {
                        measure::read_params_native(path, read_format, buffer)
                    }),
                );
                references.push((Kind::Params, mode, validation, case));
            }
            if matches!(format, SerdeFormat::Processed) && selected("rawbytes") {
                // keycodec's import of halo2's compressed file: decompressed on every core.
                let case = plan.case(
                    (Kind::Params, "rawbytes", IMPORT_PROCESSED, "checked"),
                    vec![file],
                    timed_params(params, move |path, buffer| {
                        RawBytesCodec::new(SerdeFormat::Processed)
                            .import_params_file(
                                path,
                                &load_options(Validation::Checked, None, None, buffer),
                            )
                            .map_err(|e| e.to_string())
                    }),
                );
                plan.without_write(case);
            }
        }
    }
    if let Some(&file) = params_files.first().or(native_params.as_ref()) {
        plan.case(
            (Kind::Params, FLOOR, "read", "-"),
            vec![file],
            Box::new(move |paths, _buffer| {
                let path = paths.first().ok_or("floor: no file")?;
                measure::floor(path, None)
            }),
        );
    }
    if inputs.downsize && k > 1 {
        if let Some(&file) = params_files.first() {
            // One large file for every smaller circuit: halo2's downsize recomputes
            // `g_lagrange` for the smaller domain.
            let mut smaller = params.clone();
            smaller.downsize(k - 1);
            let case = plan.case(
                (Kind::Params, "rawbytes", "downsize k-1", "checked"),
                vec![file],
                timed_params_owned(smaller, move |path, buffer| {
                    open_params(
                        path,
                        Some(k - 1),
                        &load_options(Validation::Checked, None, None, buffer),
                    )
                    .map_err(|e| e.to_string())
                }),
            );
            plan.without_write(case);
        }
    }

    // Cold starts: parameters and key, checked.
    if let (Some(native_key), Some(native_params)) = (native_key, native_params) {
        let case = plan.case(
            (Kind::ColdStart, HALO2_NATIVE, "RawBytes", "checked"),
            vec![native_params, native_key],
            Box::new(move |paths, buffer| {
                let [params_path, pk_path] = paths else {
                    return Err("cold start: two files".into());
                };
                let started = Instant::now();
                let loaded_params =
                    measure::read_params_native(params_path, SerdeFormat::RawBytes, buffer)?;
                let (loaded, _) =
                    measure::read::<C>(Reader::Native(SerdeFormat::RawBytes), pk_path, k, buffer)?;
                let seconds = started.elapsed().as_secs_f64();
                let right = measure::params_equal(params, &loaded_params)
                    && measure::keys_equal(pk, &loaded);
                Ok((seconds, right))
            }),
        );
        references.push((Kind::ColdStart, "RawBytes", "checked", case));
    }
    if let Some(&params_file) = params_files.first() {
        let cold_backends = key_files
            .iter()
            .filter(|(backend, _)| inputs.full || backend.codec().is_ok_and(|c| c.stores_params()));
        for &(backend, key_file) in cold_backends {
            let Ok(codec) = backend.codec() else { continue };
            plan.case(
                (
                    Kind::ColdStart,
                    backend.name(),
                    codec.wire_mode().name(),
                    "checked",
                ),
                vec![params_file, key_file],
                Box::new(move |paths, buffer| {
                    let [params_path, pk_path] = paths else {
                        return Err("cold start: two files".into());
                    };
                    let options = StartOptions {
                        load: load_options(Validation::Checked, None, None, buffer),
                        ..StartOptions::default()
                    };
                    let started = Instant::now();
                    let start = cold_start(codec, params_path, pk_path, k, &C::at(k), &options)
                        .map_err(|e| e.to_string())?;
                    let seconds = started.elapsed().as_secs_f64();
                    let right = start.origin == Origin::Loaded
                        && measure::params_equal(params, &start.params)
                        && measure::keys_equal(pk, &start.pk);
                    Ok((seconds, right))
                }),
            );
        }
    }

    plan.link(&references);
    plan
}

/// Times a key load and compares what it loaded with the original.
pub(crate) fn read_key<'a, C: Workload>(
    reader: Reader,
    pk: &'a ProvingKey<G1Affine>,
    k: u32,
) -> Load<'a> {
    Box::new(move |paths, buffer| {
        let path = paths.first().ok_or("no file")?;
        let (loaded, seconds) = measure::read::<C>(reader, path, k, buffer)?;
        Ok((seconds, measure::keys_equal(pk, &loaded)))
    })
}

/// Times a parameters load and compares what it loaded with the original.
fn timed_params<'a>(
    original: &'a Params,
    load: impl Fn(&Path, Size) -> Result<Params, String> + 'a,
) -> Load<'a> {
    Box::new(move |paths, buffer| {
        let path = paths.first().ok_or("no file")?;
        let started = Instant::now();
        let loaded = load(path, buffer)?;
        let seconds = started.elapsed().as_secs_f64();
        Ok((seconds, measure::params_equal(original, &loaded)))
    })
}

/// [`timed_params`] against parameters the plan owns.
fn timed_params_owned<'a>(
    expected: Params,
    load: impl Fn(&Path, Size) -> Result<Params, String> + 'a,
) -> Load<'a> {
    Box::new(move |paths, buffer| {
        let path = paths.first().ok_or("no file")?;
        let started = Instant::now();
        let loaded = load(path, buffer)?;
        let seconds = started.elapsed().as_secs_f64();
        Ok((seconds, measure::params_equal(&expected, &loaded)))
    })
}
