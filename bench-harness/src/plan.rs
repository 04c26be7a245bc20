//! What one run of the harness measures: the files it writes (every run: saves are sampled
//! as often as loads) and the loads ("cases") it times, each case knowing the rows it is
//! compared with.
//!
//! Every run writes every file, then times every case once (the floors four times), in an
//! order rotated run by run (`stats::rotation`), so that compared rows see the same moments
//! of a noisy machine and their ratios can be taken run by run (`stats::paired`). Each load
//! runs in one of two states: `warm`, in the harness's own process as a server reloading its
//! key (`exec::run_reloading`: the allocator hands back the memory of a copy just freed);
//! `fresh`, in a child process of its own (a prover's start).

use std::path::{Path, PathBuf};

use halo2_proofs::plonk::ProvingKey;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::G1Affine;
use keycodec::{Backend, KzgParams, Validation};
use keycodec_core::{KeyCodec, Size};
use serde::Serialize;

use crate::exec::{self, ChildRequest, Format, Load, Sample, Target, Values};
use crate::measure::{self, Writer, Written};
use crate::workload::Workload;

/// The reference rows: halo2's own writer and reader.
pub const HALO2_NATIVE: &str = "halo2-native";

/// What a durable save row of `backend` timed: halo2's write and its sync, or keycodec's
/// durable save.
pub fn durable_save_name(backend: &str) -> &'static str {
    match backend {
        HALO2_NATIVE => "write + sync",
        _ => "durable save",
    }
}

/// The rows that bound every loader from below ([`exec::floor`]).
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
    /// A prover's cold start from storage: parameters by URL and the key in object storage,
    /// through a cache (`--remote`).
    RemoteStart,
}

/// The process a load runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The harness's own process reloading ([`exec::run_reloading`]): its allocator hands
    /// back the memory of a copy of the same key just freed (a server replacing its key).
    Warm,
    /// A new process for the load alone (a prover's start).
    Fresh,
}

impl State {
    /// The name the table shows.
    pub fn name(self) -> &'static str {
        match self {
            State::Warm => "warm",
            State::Fresh => "fresh",
        }
    }
}

/// How fresh-process loads are run: this harness's binary (`--child`), and the workload's
/// name and configuration it needs.
pub struct ChildSpec {
    /// The harness binary.
    pub exe: PathBuf,
    /// The workload.
    pub circuit: crate::CircuitName,
    /// Its configuration, JSON.
    pub circuit_params: String,
}

/// The artifacts measured, and what the plan includes.
pub struct Inputs<'a, C: Workload> {
    /// The benchmark key.
    pub pk: &'a ProvingKey<G1Affine>,
    /// Its circuit's configuration.
    pub circuit_params: &'a C::Params,
    /// The digests every load is checked against (and the key's, which pinned loads pin).
    pub target: Target,
    /// The parameters it was generated with.
    pub params: &'a KzgParams,
    /// Where the files go.
    pub scratch: &'a Path,
    /// The backends selected (`--backends`).
    pub backends: &'a [String],
    /// Every wire mode, pinned rows, halo2's `Processed` rows, the `Processed` parameter
    /// import and a cold start per backend (`--full`); otherwise each backend's default
    /// mode, checked and trusted.
    pub full: bool,
    /// The row that opens the parameters downsized to k - 1 (`--downsize`).
    pub downsize: bool,
    /// Each backend's key without its record too, loaded checked (`--record-cost`).
    pub record_cost: bool,
    /// The states loads run in.
    pub states: &'a [State],
    /// How fresh loads run.
    pub child: &'a ChildSpec,
}

/// Measures one write of a file or object: its timings, and its size.
pub(crate) type Write<'a> = Box<dyn Fn(Size) -> Result<(Written, u64), String> + 'a>;

/// Writes a file at a path with a buffer of this size.
pub(crate) type WriteFile<'a> = Box<dyn Fn(&Path, Size) -> Result<Written, String> + 'a>;

/// Removes what a write wrote.
pub(crate) type Remove<'a> = Box<dyn Fn() -> Result<(), String> + 'a>;

/// Measures one load of the case's files.
pub(crate) type Run<'a> = Box<dyn Fn(&[&Path], Size) -> Result<Sample, String> + 'a>;

/// Something every run writes: a file, or an object in object storage.
pub struct File<'a> {
    /// What it holds.
    pub kind: Kind,
    /// Who writes it.
    pub backend: &'static str,
    /// Its layout.
    pub mode: &'static str,
    /// Where the file is (for an object: where nothing is).
    pub path: PathBuf,
    /// The file whose durable write this one's is compared with (halo2's of the same kind).
    pub reference: Option<usize>,
    /// Whether its saves are rows of the saves table (the files loads are measured on;
    /// not a remote load's local copy).
    pub shown: bool,
    write: Write<'a>,
    remove: Remove<'a>,
}

impl File<'_> {
    /// What the progress bar calls it.
    pub fn name(&self) -> String {
        format!("{} {}", self.backend, self.mode)
    }

    /// Writes it with `buffer`; returns its timings and the bytes written.
    ///
    /// # Errors
    ///
    /// The writer's error, as text.
    pub fn write(&self, buffer: Size) -> Result<(Written, u64), String> {
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
    /// The process it runs in.
    pub state: State,
    /// The files it reads (indices into [`Plan::files`]).
    pub files: Vec<usize>,
    /// The case it is compared with, if any: halo2's own way to load the same thing in the
    /// same state (for a remote load, downloading the object and then loading the file).
    pub reference: Option<usize>,
    /// The floor of its file in its state, if any (none for a row reading two files).
    pub floor: Option<usize>,
    /// Times the case runs each run (floors run more often: a floor must be a floor).
    pub visits: usize,
    run: Run<'a>,
}

impl Case<'_> {
    /// Loads and checks what it loaded.
    ///
    /// # Errors
    ///
    /// The loader's error, as text.
    pub fn run(&self, paths: &[&Path], buffer: Size) -> Result<Sample, String> {
        (self.run)(paths, buffer)
    }
}

/// Samples a floor takes per run.
pub const FLOOR_VISITS: usize = 4;

/// The files and cases of one run.
pub struct Plan<'a> {
    /// Written first in every run.
    pub files: Vec<File<'a>>,
    /// Then timed, one after the other.
    pub cases: Vec<Case<'a>>,
}

/// A row's identity: kind, backend, layout, values, state.
type Identity = (Kind, &'static str, &'static str, &'static str, State);

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

    /// Adds a file in `scratch`, written by `write`.
    pub(crate) fn file(
        &mut self,
        (kind, backend, mode): (Kind, &'static str, &'static str),
        write: WriteFile<'a>,
        scratch: &Path,
    ) -> usize {
        let path = scratch.join(format!("{backend}-{mode}.{kind:?}").to_lowercase());
        let (written, removed) = (path.clone(), path.clone());
        self.files.push(File {
            kind,
            backend,
            mode,
            path,
            reference: None,
            shown: true,
            write: Box::new(move |buffer| {
                let timings = write(&written, buffer)?;
                let bytes = std::fs::metadata(&written)
                    .map_err(|e| e.to_string())?
                    .len();
                Ok((timings, bytes))
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
    pub(crate) fn object(
        &mut self,
        (kind, backend, mode): (Kind, &'static str, &'static str),
        write: Write<'a>,
        remove: Remove<'a>,
    ) -> usize {
        self.files.push(File {
            kind,
            backend,
            mode,
            path: PathBuf::new(),
            reference: None,
            shown: true,
            write,
            remove,
        });
        self.files.len() - 1
    }

    /// Hides a file's saves from the saves table (a remote load's local copy).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn hide(&mut self, file: usize) {
        if let Some(file) = self.files.get_mut(file) {
            file.shown = false;
        }
    }

    /// Adds a case.
    pub(crate) fn case(&mut self, identity: Identity, files: Vec<usize>, run: Run<'a>) -> usize {
        let (kind, backend, mode, validation, state) = identity;
        self.cases.push(Case {
            kind,
            backend,
            mode,
            validation,
            state,
            files,
            reference: None,
            floor: None,
            visits: if backend == FLOOR { FLOOR_VISITS } else { 1 },
            run,
        });
        self.cases.len() - 1
    }

    /// Links every case to halo2's case of the same kind, layout class, validation and state
    /// (a pinned row to the checked one; where halo2 has no such row, its checked one), and to
    /// the floor of the same file in the same state; every file to halo2's raw file of its kind.
    fn link(&mut self) {
        let references: Vec<(Identity, usize)> = self
            .cases
            .iter()
            .enumerate()
            .filter(|(_, case)| case.backend == HALO2_NATIVE)
            .map(|(index, case)| {
                (
                    (case.kind, "", case.mode, case.validation, case.state),
                    index,
                )
            })
            .collect();
        let floors: Vec<(Kind, State, Vec<usize>, usize)> = self
            .cases
            .iter()
            .enumerate()
            .filter(|(_, case)| case.backend == FLOOR)
            .map(|(index, case)| (case.kind, case.state, case.files.clone(), index))
            .collect();
        for (index, case) in self.cases.iter_mut().enumerate() {
            case.floor = floors
                .iter()
                .find(|(kind, state, files, floor)| {
                    *kind == case.kind
                        && *state == case.state
                        && *files == case.files
                        && *floor != index
                })
                .map(|(.., floor)| *floor);
            if case.backend == FLOOR || case.backend == HALO2_NATIVE {
                continue;
            }
            let find = |validation: &str| {
                references
                    .iter()
                    .find(|((kind, _, mode, v, state), _)| {
                        *kind == case.kind
                            && *state == case.state
                            && *v == validation
                            && reference_mode(case.mode) == *mode
                    })
                    .map(|(_, reference)| *reference)
            };
            let validation = match case.validation {
                "pinned" => "checked",
                other => other,
            };
            case.reference = find(validation).or_else(|| find("checked"));
        }
        let native_files: Vec<(Kind, usize)> = self
            .files
            .iter()
            .enumerate()
            .filter(|(_, file)| file.backend == HALO2_NATIVE && file.mode == "RawBytes")
            .map(|(index, file)| (file.kind, index))
            .collect();
        for (index, file) in self.files.iter_mut().enumerate() {
            file.reference = native_files
                .iter()
                .find(|(kind, native)| *kind == file.kind && *native != index)
                .map(|(_, native)| *native);
        }
    }
}

/// The halo2 layout a case is compared with: keycodec's compressed layout, and its import
/// of halo2's compressed parameters, with halo2's read of its compressed files; everything
/// else with halo2's raw layout.
fn reference_mode(mode: &str) -> &'static str {
    if mode == IMPORT_PROCESSED || mode == "Processed" {
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
/// unchecked (`trusted`: `RawBytesUnchecked`, as snark-verifier-sdk's `read_pk` reads).
fn native_reads(format: SerdeFormat) -> Vec<(&'static str, Format)> {
    match format {
        SerdeFormat::Processed => vec![("checked", Format::Processed)],
        _ => vec![
            ("checked", Format::RawBytes),
            ("trusted", Format::RawBytesUnchecked),
        ],
    }
}

/// The mode name of keycodec's import of a halo2 `Processed` parameters file.
pub const IMPORT_PROCESSED: &str = "import Processed";

/// The table's name of a values setting.
fn values_name(values: Values) -> &'static str {
    match values {
        Values::Checked => "checked",
        Values::Trusted => "trusted",
        Values::Pinned => "pinned",
    }
}

/// Adds `load` of `files` in every state of `inputs` as one case each; returns them.
fn cases_of<'a, C: Workload>(
    plan: &mut Plan<'a>,
    inputs: &Inputs<'a, C>,
    (kind, backend, mode, validation): (Kind, &'static str, &'static str, &'static str),
    files: Vec<usize>,
    load: &Load,
) -> Vec<usize> {
    let mut cases = Vec::new();
    for &state in inputs.states {
        let run: Run<'a> = match state {
            State::Warm => {
                let (load, params, target) =
                    (load.clone(), inputs.circuit_params, inputs.target.clone());
                Box::new(move |paths, buffer| {
                    exec::run_reloading::<C>(&load, paths, params, &target, buffer)
                })
            }
            State::Fresh => {
                let (load, child, target) = (load.clone(), inputs.child, inputs.target.clone());
                Box::new(move |paths, buffer| {
                    let request = ChildRequest {
                        circuit: child.circuit,
                        circuit_params: child.circuit_params.clone(),
                        load: load.clone(),
                        paths: paths.iter().map(|path| path.to_path_buf()).collect(),
                        target: target.clone(),
                        buffer: buffer.0,
                    };
                    exec::run_in_child(&child.exe, &request)
                })
            }
        };
        cases.push(plan.case((kind, backend, mode, validation, state), files.clone(), run));
    }
    cases
}

/// Adds a floor of every `kind` file in the plan so far, one case per state: each row is
/// compared with the floor of the file it reads (a 47 MB compact file with reading 47 MB,
/// not another backend's 1.1 GB). A floor row's mode column names the file it reads.
fn floors<'a, C: Workload>(plan: &mut Plan<'a>, inputs: &Inputs<'a, C>, kind: Kind, load: &Load) {
    let files: Vec<(usize, &'static str)> = plan
        .files
        .iter()
        .enumerate()
        .filter(|(_, file)| file.kind == kind)
        .map(|(index, file)| (index, file_label(file.backend, file.mode)))
        .collect();
    for (file, label) in files {
        cases_of(plan, inputs, (kind, FLOOR, label, "-"), vec![file], load);
    }
}

/// `backend mode`, the name of a file's floor row. A plan is built once per key size and
/// names a handful of files, so the few bytes leaked live as long as the report that shows
/// them would anyway.
fn file_label(backend: &'static str, mode: &'static str) -> &'static str {
    Box::leak(format!("{backend} {mode}").into_boxed_str())
}

/// A file of `backend`'s key saved without the circuit's record, and its checked load's rows:
/// beside the rows of the same key with its record, what the record costs a load.
fn without_record<'a, C: Workload>(
    plan: &mut Plan<'a>,
    inputs: &Inputs<'a, C>,
    backend: Backend,
    codec: &'static dyn KeyCodec,
) {
    let (pk, circuit_params) = (inputs.pk, inputs.circuit_params);
    let writer = Writer::CodecWithoutRecord(codec);
    let label: &'static str = Box::leak(format!("{} no record", writer.mode()).into_boxed_str());
    let file = plan.file(
        (Kind::Pk, backend.name(), label),
        Box::new(move |path, buffer| {
            measure::write::<C>(writer, path, pk, circuit_params.clone(), buffer)
        }),
        inputs.scratch,
    );
    let load = Load::Key {
        backend: backend.name().to_owned(),
        mode: writer.mode().to_owned(),
        values: Values::Checked,
    };
    cases_of(
        plan,
        inputs,
        (
            Kind::Pk,
            backend.name(),
            label,
            values_name(Values::Checked),
        ),
        vec![file],
        &load,
    );
}

/// The plan for workload `C` at the key's `k`.
///
/// Long on purpose: one block per table (keys, parameters, cold starts), each its files and
/// then its rows, in the order the report prints them.
pub fn plan<'a, C: Workload>(inputs: &Inputs<'a, C>) -> Plan<'a> {
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
    let is_default = |backend: Backend, codec: &dyn KeyCodec| {
        backend
            .codec()
            .is_ok_and(|default| default.wire_mode() == codec.wire_mode())
    };

    // Proving keys.
    let (pk, circuit_params) = (inputs.pk, inputs.circuit_params);
    let mut key_files = Vec::new();
    for &backend in &backends {
        for codec in codecs_of(backend) {
            let writer = Writer::Codec(codec);
            let mode = writer.mode();
            let file = plan.file(
                (Kind::Pk, backend.name(), mode),
                Box::new(move |path, buffer| {
                    measure::write::<C>(writer, path, pk, circuit_params.clone(), buffer)
                }),
                scratch,
            );
            if is_default(backend, codec) {
                key_files.push((backend, file));
                if inputs.record_cost {
                    without_record::<C>(&mut plan, inputs, backend, codec);
                }
            }
            let mut reads = vec![Values::Checked];
            if codec.effective_validation(codec.wire_mode(), Validation::Trusted)
                == Validation::Trusted
            {
                reads.push(Values::Trusted);
            }
            if inputs.full {
                reads.push(Values::Pinned);
            }
            for values in reads {
                let load = Load::Key {
                    backend: backend.name().to_owned(),
                    mode: mode.to_owned(),
                    values,
                };
                cases_of(
                    &mut plan,
                    inputs,
                    (Kind::Pk, backend.name(), mode, values_name(values)),
                    vec![file],
                    &load,
                );
            }
        }
    }
    let mut native_key = None;
    if selected(HALO2_NATIVE) {
        for &format in native_formats(inputs.full) {
            let writer = Writer::Native(format);
            let mode = writer.mode();
            let file = plan.file(
                (Kind::Pk, HALO2_NATIVE, mode),
                Box::new(move |path, buffer| {
                    measure::write::<C>(writer, path, pk, circuit_params.clone(), buffer)
                }),
                scratch,
            );
            if matches!(format, SerdeFormat::RawBytes) {
                native_key = Some(file);
            }
            for (validation, read) in native_reads(format) {
                cases_of(
                    &mut plan,
                    inputs,
                    (Kind::Pk, HALO2_NATIVE, mode, validation),
                    vec![file],
                    &Load::NativeKey(read),
                );
            }
        }
    }
    let degree = u32::try_from(pk.get_vk().cs().degree()).unwrap_or(u32::MAX);
    let key_floor = Load::Floor {
        polynomial_bytes: Some((1u64 << k) * 32),
        domain: Some((degree, k)),
    };
    floors(&mut plan, inputs, Kind::Pk, &key_floor);

    // Parameters.
    let params = inputs.params;
    let mut params_files = Vec::new();
    for &backend in &backends {
        for codec in codecs_of(backend).into_iter().filter(|c| c.stores_params()) {
            let mode = codec.wire_mode().name();
            let file = plan.file(
                (Kind::Params, backend.name(), mode),
                Box::new(move |path, buffer| measure::write_params(codec, path, params, buffer)),
                scratch,
            );
            params_files.push(file);
            let mut reads = vec![Values::Checked];
            if codec.effective_validation(codec.wire_mode(), Validation::Trusted)
                == Validation::Trusted
            {
                reads.push(Values::Trusted);
            }
            for values in reads {
                let load = Load::Params {
                    backend: backend.name().to_owned(),
                    mode: mode.to_owned(),
                    values,
                };
                cases_of(
                    &mut plan,
                    inputs,
                    (Kind::Params, backend.name(), mode, values_name(values)),
                    vec![file],
                    &load,
                );
            }
        }
    }
    let mut native_params = None;
    if selected(HALO2_NATIVE) {
        for &format in native_formats(inputs.full) {
            let mode = measure::format_name(format);
            let file = plan.file(
                (Kind::Params, HALO2_NATIVE, mode),
                Box::new(move |path, buffer| {
                    measure::write_params_native(path, params, format, buffer)
                }),
                scratch,
            );
            if matches!(format, SerdeFormat::RawBytes) {
                native_params = Some(file);
            }
            for (validation, read) in native_reads(format) {
                cases_of(
                    &mut plan,
                    inputs,
                    (Kind::Params, HALO2_NATIVE, mode, validation),
                    vec![file],
                    &Load::NativeParams(read),
                );
            }
            if matches!(format, SerdeFormat::Processed) && selected("rawbytes") {
                // keycodec's import of halo2's compressed file: decompressed on every core.
                cases_of(
                    &mut plan,
                    inputs,
                    (Kind::Params, "rawbytes", IMPORT_PROCESSED, "checked"),
                    vec![file],
                    &Load::ImportParams(Format::Processed),
                );
            }
        }
    }
    let params_floor = Load::Floor {
        polynomial_bytes: None,
        domain: None,
    };
    floors(&mut plan, inputs, Kind::Params, &params_floor);
    if inputs.downsize && k > 1 && inputs.target.downsized.is_some() {
        if let Some(&file) = params_files.first() {
            // One large file for every smaller circuit: halo2's downsize recomputes
            // `g_lagrange` for the smaller domain.
            cases_of(
                &mut plan,
                inputs,
                (Kind::Params, "rawbytes", "downsize k-1", "checked"),
                vec![file],
                &Load::Downsize(k - 1),
            );
        }
    }

    // Cold starts: parameters and key, checked.
    if let (Some(native_key), Some(native_params)) = (native_key, native_params) {
        cases_of(
            &mut plan,
            inputs,
            (Kind::ColdStart, HALO2_NATIVE, "RawBytes", "checked"),
            vec![native_params, native_key],
            &Load::NativeColdStart,
        );
    }
    if let Some(&params_file) = params_files.first() {
        let cold_backends = key_files
            .iter()
            .filter(|(backend, _)| inputs.full || backend.codec().is_ok_and(|c| c.stores_params()));
        for &(backend, key_file) in cold_backends {
            let Ok(codec) = backend.codec() else { continue };
            let load = Load::ColdStart {
                backend: backend.name().to_owned(),
            };
            cases_of(
                &mut plan,
                inputs,
                (
                    Kind::ColdStart,
                    backend.name(),
                    codec.wire_mode().name(),
                    "checked",
                ),
                vec![params_file, key_file],
                &load,
            );
        }
    }
    plan.link();
    plan
}
