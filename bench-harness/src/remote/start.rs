//! The prover's cold start from storage: parameters by HTTP URL and the key in S3, through a
//! cache, cold and warm, against halo2's users' download-then-read.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use halo2_proofs::plonk::ProvingKey;
use halo2curves::bn256::G1Affine;
use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::Remote;
use keycodec::{Backend, KeyDigest, KeyOptions, KeyPin, Object};
use keycodec_core::Size;

use super::server::Publisher;
use super::{delete, sample, Context};
use crate::measure::{self, Writer, Written};
use crate::plan::{Inputs, Kind, Plan, State, HALO2_NATIVE};
use crate::workload::Workload;

/// What the cold start rows share, owned by the plan's closures.
struct StartSetup {
    /// The parameters' URL, and the SHA-256 of the file published there.
    url: String,
    /// The parameters' object (the same file), for halo2's download.
    srs_at: ObjectPath,
    /// The same file on this machine, for halo2's read of the files already there.
    srs: PathBuf,
    /// The key as keycodec saved it, and as halo2 wrote it.
    key_at: ObjectPath,
    native_at: ObjectPath,
    /// Where halo2's download puts the key and the parameters.
    downloads: (PathBuf, PathBuf),
    /// The key's and the parameters' options (their pins, the harness's limits).
    options: (KeyOptions, keycodec::ParamsOptions),
}

impl Drop for StartSetup {
    /// The parameters' local file goes with the plan.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.srs);
    }
}

/// The cold start from storage (see the module docs), with `backend`'s codec.
///
/// Long on purpose: it is the table's rows in their order (the server's files, then each
/// row's setup and timed load), each block a row, read top to bottom; split, a row's setup
/// would sit apart from its load.
pub(super) fn start_plan<'a, C: Workload>(
    inputs: &Inputs<'a, C>,
    backend: Backend,
    context: &Context<'a>,
    publisher: &Publisher<'_>,
) -> Result<Plan<'a>, String> {
    use halo2_proofs::SerdeFormat;
    use keycodec::{ColdStart, Location, Origin, ParamsOptions, ParamsPin, Start};
    use sha2::{Digest, Sha256};

    let &Context {
        store,
        runtime,
        cache,
        ..
    } = context;
    let codec = backend.codec().map_err(|e| e.to_string())?;
    let (pk, scratch, params, circuit_params) = (
        inputs.pk,
        inputs.scratch,
        inputs.params,
        inputs.circuit_params,
    );
    let key_pin: KeyDigest = inputs.target.key.parse().map_err(|e| format!("{e}"))?;
    let params_digest: KeyDigest = inputs.target.params.parse().map_err(|e| format!("{e}"))?;
    let k = pk.get_vk().get_domain().k();
    let name = backend.name();

    // The parameters, published once for the plan as a project publishes its SRS: halo2's
    // raw layout, with the SHA-256 of the file beside it.
    let srs_name = format!("kzg_bn254_{k}.srs");
    let srs = scratch.join(&srs_name);
    measure::write_params_native(&srs, params, SerdeFormat::RawBytes, Size::mib(1))?;
    let sha256: [u8; 32] = Sha256::digest(std::fs::read(&srs).map_err(|e| e.to_string())?).into();
    let srs_bytes = std::fs::metadata(&srs).map_err(|e| e.to_string())?.len();
    let setup = Rc::new(StartSetup {
        url: publisher.publish(&srs, &srs_name)?,
        srs_at: ObjectPath::from(srs_name),
        srs,
        key_at: ObjectPath::from(format!("start-{name}.pk")),
        native_at: ObjectPath::from("start-halo2.pk"),
        downloads: (
            scratch.join("start-halo2-downloaded.pk"),
            scratch.join("start-halo2-downloaded.srs"),
        ),
        options: {
            let limits = measure::load_limits();
            (
                KeyOptions {
                    pin: Some(KeyPin::Digest(key_pin)),
                    backend: Some(backend),
                    limits,
                    ..KeyOptions::default()
                },
                ParamsOptions {
                    pin: Some(ParamsPin::Sha256(sha256)),
                    limits,
                    ..ParamsOptions::default()
                },
            )
        },
    });

    let mut plan = Plan::empty();
    // A run uploads the key as keycodec saves it and as halo2 writes it, and writes
    // halo2's file of a machine that has it already (the saves are the remote rows'); the
    // parameters' upload is the plan's, each run only notes its size.
    let mut upload = |at: &ObjectPath, writer: Writer, who: &'static str| {
        let (at, removed) = (at.clone(), at.clone());
        let local = scratch.join(format!("start-{who}.upload"));
        let object = plan.object(
            (Kind::RemoteStart, who, "upload"),
            Box::new(move |buffer| {
                measure::write::<C>(writer, &local, pk, circuit_params.clone(), buffer)?;
                let remote = Remote::new(Arc::clone(store)).map_err(|e| e.to_string())?;
                let open = std::fs::File::open(&local).map_err(|e| e.to_string())?;
                let started = Instant::now();
                remote
                    .upload_file(&open, &local, &at, &|_| {})
                    .map_err(|e| e.to_string())?;
                let seconds = started.elapsed().as_secs_f64();
                let size = std::fs::metadata(&local).map_err(|e| e.to_string())?.len();
                let _ = std::fs::remove_file(&local);
                Ok((
                    Written {
                        seconds,
                        unsynced: None,
                    },
                    size,
                ))
            }),
            Box::new(move || delete(store, runtime, &removed)),
        );
        plan.hide(object);
        object
    };
    let key_object = upload(&setup.key_at, Writer::Codec(codec), name);
    let native_object = upload(
        &setup.native_at,
        Writer::Native(SerdeFormat::RawBytes),
        HALO2_NATIVE,
    );
    let native_file = plan.file(
        (Kind::RemoteStart, HALO2_NATIVE, "file there"),
        Box::new(move |path, buffer| {
            measure::write::<C>(
                Writer::Native(SerdeFormat::RawBytes),
                path,
                pk,
                circuit_params.clone(),
                buffer,
            )
        }),
        scratch,
    );
    plan.hide(native_file);
    let srs_object = plan.object(
        (Kind::RemoteStart, HALO2_NATIVE, "published SRS"),
        Box::new(move |_buffer| {
            Ok((
                Written {
                    seconds: 0.0,
                    unsynced: None,
                },
                srs_bytes,
            ))
        }),
        Box::new(|| Ok(())),
    );
    plan.hide(srs_object);

    let started_right = move |start: &ColdStart| {
        start.origin == Origin::Loaded
            && KeyDigest::of_pk(&start.pk).is_ok_and(|digest| digest == key_pin)
            && KeyDigest::of_params(&start.params).is_ok_and(|digest| digest == params_digest)
    };
    let read_right = move |params: &keycodec::KzgParams, loaded: &ProvingKey<G1Affine>| {
        KeyDigest::of_pk(loaded).is_ok_and(|digest| digest == key_pin)
            && KeyDigest::of_params(params).is_ok_and(|digest| digest == params_digest)
    };
    // A prover's start: its own client (a new process has no connections yet), then both
    // artifacts through the cache.
    let start = {
        let setup = Rc::clone(&setup);
        move || {
            let circuit = C::with_params(circuit_params.clone());
            let started = Instant::now();
            let params = Location::url(&setup.url, cache).map_err(|e| e.to_string())?;
            let key = Location::Object(Object {
                remote: Arc::new(Remote::new(Arc::clone(store)).map_err(|e| e.to_string())?),
                path: setup.key_at.clone(),
                cache: cache.to_path_buf(),
            });
            let (key_options, params_options) = setup.options;
            let start = Start {
                key_options,
                params_options,
                ..Start::new(params, key, k)
            }
            .run(&circuit)
            .map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            Ok::<_, String>(sample(seconds, started_right(&start)))
        }
    };
    let start = Rc::new(start);
    let cold_start_run = Rc::clone(&start);
    let cold = plan.case(
        (
            Kind::RemoteStart,
            name,
            "empty cache",
            "pinned",
            State::Warm,
        ),
        vec![key_object, srs_object],
        Box::new(move |_paths, _buffer| {
            match std::fs::remove_dir_all(cache) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("emptying the cache: {err}"))
                }
                _ => {}
            }
            cold_start_run()
        }),
    );
    let warm = plan.case(
        (Kind::RemoteStart, name, "warm cache", "pinned", State::Warm),
        vec![key_object, srs_object],
        Box::new(move |_paths, _buffer| {
            // A run after the cache was emptied fills it, untimed.
            if !cache
                .join(format!("{key_pin}-{}.kc", codec.name()))
                .exists()
            {
                start()?;
            }
            start()
        }),
    );
    // halo2's users: both files downloaded at once, each by ranged GETs at once (the
    // fastest download there is), made durable, then read by halo2's readers.
    let download_setup = Rc::clone(&setup);
    let download = plan.case(
        (
            Kind::RemoteStart,
            HALO2_NATIVE,
            "download, read",
            "checked",
            State::Warm,
        ),
        vec![native_object, srs_object],
        Box::new(move |_paths, buffer| {
            let setup: &StartSetup = &download_setup;
            let (pk_path, srs_path) = (&setup.downloads.0, &setup.downloads.1);
            let started = Instant::now();
            let remote = Remote::new(Arc::clone(store)).map_err(|e| e.to_string())?;
            let fetch = |at: &ObjectPath, path: &std::path::Path| {
                let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
                let info = remote.head(at).map_err(|e| e.to_string())?;
                remote
                    .download_to(at, &info, &file, &|_| {})
                    .map_err(|e| e.to_string())?;
                file.sync_all().map_err(|e| e.to_string())
            };
            let (pk_fetched, srs_fetched) = std::thread::scope(|scope| {
                let srs = scope.spawn(|| fetch(&setup.srs_at, srs_path));
                let pk = fetch(&setup.native_at, pk_path);
                let srs = srs
                    .join()
                    .unwrap_or_else(|_| Err("the download thread panicked".into()));
                (pk, srs)
            });
            pk_fetched?;
            srs_fetched?;
            let (params, loaded) =
                read_natively::<C>(srs_path, pk_path, circuit_params.clone(), buffer)?;
            let seconds = started.elapsed().as_secs_f64();
            for path in [pk_path, srs_path] {
                let _ = std::fs::remove_file(path);
            }
            Ok(sample(seconds, read_right(&params, &loaded)))
        }),
    );
    let there_setup = Rc::clone(&setup);
    let there = plan.case(
        (
            Kind::RemoteStart,
            HALO2_NATIVE,
            "files there",
            "checked",
            State::Warm,
        ),
        vec![native_file, srs_object],
        Box::new(move |paths, buffer| {
            let pk_path = paths.first().ok_or("no file")?;
            let started = Instant::now();
            let (params, loaded) =
                read_natively::<C>(&there_setup.srs, pk_path, circuit_params.clone(), buffer)?;
            let seconds = started.elapsed().as_secs_f64();
            Ok(sample(seconds, read_right(&params, &loaded)))
        }),
    );
    plan.compare(cold, Some(download), None);
    plan.compare(warm, Some(there), None);
    Ok(plan)
}

/// halo2's users' start: the parameters, then the key, by halo2's readers of its raw layout.
fn read_natively<C: Workload>(
    srs: &std::path::Path,
    pk: &std::path::Path,
    circuit_params: C::Params,
    buffer: Size,
) -> Result<(keycodec::KzgParams, ProvingKey<G1Affine>), String> {
    use halo2_proofs::SerdeFormat;
    let params = measure::read_params_native(srs, SerdeFormat::RawBytes, buffer)?;
    let key = measure::read_key_native::<C>(pk, SerdeFormat::RawBytes, circuit_params, buffer)?;
    Ok((params, key))
}
