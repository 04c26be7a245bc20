//! Fresh-process loads: the request a child process of this harness runs, sending it to
//! one, and the child's side.

use std::path::{Path, PathBuf};

use keycodec_core::Size;
use serde::{Deserialize, Serialize};

use super::in_process::run_here;
use super::{Load, Sample, Target};
use crate::workload::Workload;

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
    let output = child_command(exe, json)
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

/// The command that runs `json`, a request, in a new process of `exe`: a primer's
/// ([`as_primer`]) asking for huge pages.
fn child_command(exe: &Path, json: String) -> std::process::Command {
    let mut command = std::process::Command::new(exe);
    command.arg("--child").arg(json);
    if priming() {
        command.env(keycodec_core::HUGE_PAGES_ENV, "1");
    }
    command
}

thread_local! {
    /// Loads started from this thread now are primers ([`as_primer`]).
    static PRIMING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `prime`, whose loads in new processes ([`run_in_child`]) ask for huge pages whatever
/// the machine's loads do ([`keycodec_core::HUGE_PAGES_ENV`]): a primer's exit then frees
/// 2 MiB blocks just before the load it primes, which the page cache that load fills takes
/// (see `runs::order::needs_priming`).
pub fn as_primer<T>(prime: impl FnOnce() -> T) -> T {
    /// Puts back what was there before, however `prime` ends.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            PRIMING.set(self.0);
        }
    }
    let _restore = Restore(PRIMING.replace(true));
    prime()
}

/// Whether loads started from this thread now are primers ([`as_primer`]).
pub(crate) fn priming() -> bool {
    PRIMING.get()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primers_child_asks_for_huge_pages_and_no_other_does() {
        let asks = |command: &std::process::Command| {
            command
                .get_envs()
                .any(|(name, value)| name == keycodec_core::HUGE_PAGES_ENV && value.is_some())
        };
        let exe = Path::new("harness");
        assert!(!asks(&child_command(exe, "{}".into())));
        as_primer(|| {
            assert!(asks(&child_command(exe, "{}".into())));
            // Nested, and ended by a panic: what was there before is put back each time.
            as_primer(|| assert!(priming()));
            let _ = std::panic::catch_unwind(|| as_primer(|| panic!("a failed primer")));
            assert!(priming());
        });
        assert!(!asks(&child_command(exe, "{}".into())));
    }
}
