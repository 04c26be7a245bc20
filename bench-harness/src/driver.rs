//! The driver: from the flags to a report, size after size (the fixture, the plan, the runs).

use halo2_proofs::poly::commitment::Params as _;
use keycodec::KeyDigest;
use keycodec_testkit::halo2_lib::Halo2LibCircuit;
use keycodec_testkit::{DenseCircuit, StandardPlonk};

use crate::flags::{Args, CircuitName};
use crate::measure::rss;
use crate::model::{Cold, FixtureInfo, Report, SizeReport, StoppingInfo};
use crate::plan::Kind;
use crate::runs::Runner;
use crate::workload::{self, Workload};
use crate::{exec, fixture, measure, plan};

/// Runs the benchmark.
///
/// # Errors
///
/// Fixture, I/O or backend failures, as text.
pub fn run(args: &Args) -> Result<Report, String> {
    match args.circuit {
        CircuitName::StandardPlonk => run_with::<StandardPlonk>(args),
        CircuitName::Dense => run_with::<DenseCircuit>(args),
        CircuitName::Halo2Lib => run_with::<Halo2LibCircuit>(args),
    }
}

/// Runs one fresh-process load (`--child`) and returns what to print.
///
/// # Errors
///
/// The load's failure, as text.
pub fn run_child(request: &str) -> Result<String, String> {
    let request: exec::ChildRequest =
        serde_json::from_str(request).map_err(|e| format!("--child: {e}"))?;
    match request.circuit {
        CircuitName::StandardPlonk => exec::child::<StandardPlonk>(&request),
        CircuitName::Dense => exec::child::<DenseCircuit>(&request),
        CircuitName::Halo2Lib => exec::child::<Halo2LibCircuit>(&request),
    }
}

fn run_with<C: Workload>(args: &Args) -> Result<Report, String> {
    if let Some(k) = args.sizes().into_iter().find(|&k| k < C::MIN_K) {
        return Err(format!(
            "the {} circuit needs k >= {} (asked for {k})",
            C::NAME,
            C::MIN_K
        ));
    }
    let mut runner =
        Runner::new(args.stopping(), args.replace, args.cold).idle_before_cold(args.cold_idle);
    let mut sizes = Vec::new();
    let mut remote_server = None;
    let link = link_info(args)?;
    for k in args.sizes() {
        let (size, server) = run_size::<C>(args, k, &mut runner)?;
        sizes.push(size);
        remote_server = remote_server.or(server);
    }
    runner.finish();
    let stopping = args.stopping();
    Ok(Report {
        circuit: args.circuit,
        full: args.full,
        replace: args.replace,
        states: args.states.clone(),
        cold: Cold {
            requested: args.cold,
            effective: runner.cold_effective,
            idle_s: args.cold_idle.as_secs_f64(),
        },
        huge_pages_asked: keycodec_core::asks_for_huge_pages(),
        reads_past_page_cache: keycodec_core::reads_past_page_cache(),
        points_checked_at_once: keycodec_core::points_checked_at_once(),
        stopping: StoppingInfo {
            warmup: stopping.warmup,
            fixed: stopping.fixed,
            min_runs: stopping.min_runs,
            max_runs: stopping.max_runs,
            interval: stopping.interval,
            time_cap_s: stopping.time_cap.as_secs_f64(),
        },
        sizes,
        remote_server,
        link,
        harness_peak_rss_bytes: runner.harness_peak.max(rss::peak()),
    })
}

/// The link `--link` asks for, checked before anything is measured.
fn link_info(args: &Args) -> Result<Option<crate::model::LinkInfo>, String> {
    let Some(text) = &args.link else {
        return Ok(None);
    };
    if !args.remote {
        return Err("--link emulates a link to the S3 server of --remote: add --remote".into());
    }
    #[cfg(feature = "remote")]
    {
        let profile: keycodec_tests::link::LinkProfile = text.parse()?;
        Ok(Some(crate::model::LinkInfo {
            profile: profile.to_string(),
            latency_s: profile.latency.as_secs_f64(),
            per_stream_bytes_per_s: profile.per_stream,
            total_bytes_per_s: profile.total,
        }))
    }
    #[cfg(not(feature = "remote"))]
    Err(format!("--link {text}: this build has no object storage"))
}

/// Measures everything at `k`.
///
/// Long on purpose: the steps of one size in order (fixture, digests, plan, runs, remote
/// rows, report), each short.
fn run_size<C: Workload>(
    args: &Args,
    k: u32,
    runner: &mut Runner,
) -> Result<(SizeReport, Option<&'static str>), String> {
    let cache_dir = args.cache_dir();
    let fixture = fixture::load_or_build::<C>(&cache_dir, k)?;
    let params = fixture::load_or_build_params(&cache_dir, k)?;
    let pk = &fixture.pk;
    let scratch = cache_dir.join("scratch");
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let loaded_digest = KeyDigest::of_pk(pk).map_err(|e| e.to_string())?;
    let digest_s = started.elapsed().as_secs_f64();
    // The original is the key keygen produced: its digest was computed from keygen's key and
    // stored with the cache, and the cached key was loaded pinned to it.
    if loaded_digest != fixture.keygen_digest {
        return Err(format!(
            "the fixture's key has digest {loaded_digest}, keygen's had {}",
            fixture.keygen_digest
        ));
    }
    let pin = args.original_digest.unwrap_or(fixture.keygen_digest);
    let params_digest = KeyDigest::of_params(&params).map_err(|e| e.to_string())?;
    let downsized = match (args.downsize, params.k()) {
        (true, params_k) if params_k > 1 => {
            let mut smaller = params.clone();
            smaller.downsize(params_k - 1);
            Some(
                KeyDigest::of_params(&smaller)
                    .map_err(|e| e.to_string())?
                    .to_string(),
            )
        }
        _ => None,
    };
    let domain_memory_bytes = measure::domain_memory_bytes(pk);
    let circuit_params = workload::params_to_json::<C>(&fixture.circuit_params)?;
    let child = plan::ChildSpec {
        exe: match &args.child_exe {
            Some(exe) => exe.clone(),
            None => std::env::current_exe().map_err(|e| format!("the harness binary: {e}"))?,
        },
        circuit: args.circuit,
        circuit_params: circuit_params.clone(),
    };
    let inputs = plan::Inputs::<C> {
        pk,
        circuit_params: &fixture.circuit_params,
        target: exec::Target {
            k,
            key: pin.to_string(),
            // The key held is the original unless another digest is given for it.
            key_values: match pin == fixture.keygen_digest {
                true => Some(exec::KeyValues::of(pk)?),
                false => None,
            },
            params: params_digest.to_string(),
            downsized,
        },
        params: &params,
        scratch: &scratch,
        backends: &args.backends,
        full: args.full,
        downsize: args.downsize,
        record_cost: args.record_cost,
        states: &args.states,
        child: &child,
    };
    let plan = plan::plan::<C>(&inputs);
    let mut rows = Vec::new();
    let mut saves = Vec::new();
    let (mut runs, mut stopped) = (0, String::new());
    let buffers = args.buffer_sizes();
    for &buffer in &buffers {
        let measured = runner.measure(&plan, buffer)?;
        rows.extend(measured.rows);
        saves.extend(measured.saves);
        (runs, stopped) = (measured.runs, measured.stopped);
    }
    drop(plan);
    #[cfg(feature = "remote")]
    let remote_server = if args.remote {
        let buffer = buffers
            .first()
            .copied()
            .unwrap_or(keycodec_core::Size::mib(1));
        let link = args.link.as_deref().map(str::parse).transpose()?;
        let (remote, server) =
            crate::remote::rows::<C>(&inputs, runner, buffer, args.s3_server, link)?;
        rows.extend(remote.rows);
        saves.extend(remote.saves);
        Some(server)
    } else {
        None
    };
    #[cfg(not(feature = "remote"))]
    let remote_server = match args.remote {
        true => {
            return Err("this build has no object storage: \
                cargo run --release -p bench-harness --features remote -- --remote"
                .into())
        }
        false => None,
    };
    drop(params);

    let largest = saves
        .iter()
        .filter(|save| save.kind == Kind::Pk)
        .map(|save| save.file_bytes)
        .max()
        .unwrap_or(0);
    let spinner = fixture::spinner(format!(
        "machine limits: bulk write and read of {largest} bytes"
    ));
    let limits = measure::machine_limits(&scratch.join("bulk.bin"), largest, 3, args.cold)?;
    spinner.finish_and_clear();
    Ok((
        SizeReport {
            k,
            runs,
            stopped,
            seconds: started.elapsed().as_secs_f64(),
            fixture: FixtureInfo {
                origin: fixture.origin.clone(),
                seconds: fixture.seconds,
                circuit_params,
                key_memory_bytes: measure::key_memory_bytes(pk),
                digest_s,
                domain_memory_bytes,
            },
            limits,
            rows,
            saves,
        },
        remote_server,
    ))
}
