//! `keycodec fetch --manifest` and `keycodec verify --manifest`: a prover's artifacts, as its
//! manifest declares them, fetched into a cache and checked, or checked where they are.

use std::collections::HashMap;
use std::path::Path;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use keycodec::manifest::{ArtifactState, Manifest};
use serde_json::json;

use crate::check::Failure;
use crate::remote::{default_cache, exit_code};

/// `fetch --manifest` (`fetch`: download what is missing) or `verify --manifest`.
pub(crate) fn run(
    manifest: &Path,
    cache: Option<&Path>,
    fetch: bool,
    json: bool,
) -> Result<(), Failure> {
    let manifest = Manifest::open(manifest).map_err(|err| match err {
        keycodec::Error::Io { .. } => Failure::Io(err.to_string()),
        other => Failure::Check(other.to_string()),
    })?;
    let cache = match cache {
        Some(cache) => cache.to_path_buf(),
        None => default_cache("artifacts")?,
    };
    let results = if fetch {
        let bars = MultiProgress::new();
        let style = ProgressStyle::with_template("{spinner} {msg}: {bytes} {binary_bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let names = std::iter::once("params".to_owned()).chain(manifest.keys().map(str::to_owned));
        let per_artifact: HashMap<String, ProgressBar> = names
            .map(|name| {
                let bar = bars.add(ProgressBar::new_spinner().with_style(style.clone()));
                bar.set_message(name.clone());
                (name, bar)
            })
            .collect();
        let results = manifest.fetch(&cache, &|name, bytes| {
            if let Some(bar) = per_artifact.get(name) {
                bar.inc(bytes);
            }
        });
        for bar in per_artifact.values() {
            bar.finish_and_clear();
        }
        results
    } else {
        manifest.verify(&cache)
    };
    let failed = results.iter().find_map(|(_, result)| result.as_ref().err());
    if json {
        let artifacts: Vec<_> = results
            .iter()
            .map(|(name, result)| match result {
                Ok(state) => {
                    let (state, file) = describe(state);
                    json!({ "name": name, "ok": true, "state": state, "file": file })
                }
                Err(err) => json!({ "name": name, "ok": false, "error": err.to_string() }),
            })
            .collect();
        println!(
            "{}",
            json!({
                "ok": failed.is_none(),
                "manifest": manifest.path().display().to_string(),
                "cache": cache.display().to_string(),
                "artifacts": artifacts,
            })
        );
    } else {
        for (name, result) in &results {
            match result {
                Ok(state) => {
                    let (state, file) = describe(state);
                    println!("{name}: {state}, {file}");
                }
                Err(err) => println!("{name}: FAILED: {err}"),
            }
        }
    }
    match failed {
        None => Ok(()),
        Some(err) => Err(Failure::Reported(exit_code(err), err.to_string())),
    }
}

fn describe(state: &ArtifactState) -> (&'static str, String) {
    match state {
        ArtifactState::Present(path) => ("present", path.display().to_string()),
        ArtifactState::Cached(path) => ("cached", path.display().to_string()),
        ArtifactState::Downloaded(path) => ("downloaded", path.display().to_string()),
    }
}
