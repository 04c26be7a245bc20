//! The plan of the local tables for a workload: each selected backend's and halo2's files of
//! the key and the parameters, their loads in every state, their floors, and the cold starts.

use std::sync::atomic::{AtomicUsize, Ordering};

use halo2_proofs::SerdeFormat;
use keycodec::{Backend, Validation};
use keycodec_core::KeyCodec;

use super::parts::{Plan, Run};
use super::{Inputs, Kind, State, FLOOR, HALO2_NATIVE, IMPORT_PROCESSED};
use crate::exec::{self, ChildRequest, Format, Load, Values};
use crate::measure::{self, Writer};
use crate::workload::Workload;

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
        // Each visit of the case numbered: a cold floor may take its ways in turn.
        let visits = AtomicUsize::new(0);
        let run: Run<'a> = match state {
            State::Warm => {
                let (load, params, target) =
                    (load.clone(), inputs.circuit_params, inputs.target.clone());
                Box::new(move |paths, buffer| {
                    let load = load.at_visit(visits.fetch_add(1, Ordering::Relaxed));
                    exec::run_reloading::<C>(&load, paths, params, &target, buffer)
                })
            }
            State::Fresh | State::Cold => {
                let (load, child, target) = (load.clone(), inputs.child, inputs.target.clone());
                Box::new(move |paths, buffer| {
                    let request = ChildRequest {
                        circuit: child.circuit,
                        circuit_params: child.circuit_params.clone(),
                        load: load.at_visit(visits.fetch_add(1, Ordering::Relaxed)),
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
        visit: 0,
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
            // Pinned as well: how a prover's configuration opens them.
            let mut reads = vec![Values::Checked, Values::Pinned];
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
        visit: 0,
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
    let exe = &inputs.child.exe;
    plan.primed_by(Box::new(move |bytes| exec::prime_in_child(exe, bytes)));
    plan
}
