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
    let output = finished(child_command(exe, json), exe, "a fresh-process load")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).map_err(|e| format!("a child's report: {e}: {stdout}"))
}

/// What `command`, a new process of `exe` doing `what`, printed once it ended; its failure,
/// with what it wrote to stderr, as text.
fn finished(
    mut command: std::process::Command,
    exe: &Path,
    what: &str,
) -> Result<std::process::Output, String> {
    let output = command
        .output()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The command that runs `json`, a request, in a new process of `exe`.
fn child_command(exe: &Path, json: String) -> std::process::Command {
    let mut command = std::process::Command::new(exe);
    command.arg("--child").arg(json);
    command
}

/// Primes the memory the next load in a new process meets: a new process of `exe` (this
/// harness, `--prime`) takes `bytes` in huge pages whatever the machine's loads ask for
/// ([`keycodec_core::HUGE_PAGES_ENV`]), writes every page ([`prime`]) and exits, freeing
/// 2 MiB blocks just before the load, which its memory or the page cache it fills takes
/// (see `runs::order::needs_priming`).
///
/// # Errors
///
/// The primer's failure, as text.
pub fn prime_in_child(exe: &Path, bytes: u64) -> Result<(), String> {
    finished(primer_command(exe, bytes), exe, "a primer").map(drop)
}

/// The command that primes `bytes` in a new process of `exe`, asking for huge pages.
fn primer_command(exe: &Path, bytes: u64) -> std::process::Command {
    let mut command = std::process::Command::new(exe);
    command
        .arg("--prime")
        .arg(bytes.to_string())
        .env(keycodec_core::HUGE_PAGES_ENV, "1");
    command
}

/// The primer's side of [`prime_in_child`]: takes `bytes` of memory as a load's vectors
/// take it (in huge pages where [`keycodec_core::HUGE_PAGES_ENV`] asks for them, as the
/// primer's command does) and writes a byte of every 4 KiB page on every core, so that the
/// kernel maps all of it. The memory is freed when the process exits.
///
/// # Errors
///
/// When the memory cannot be had, as text.
pub fn prime(bytes: u64) -> Result<(), String> {
    use keycodec_core::backend_api::field::FR_BYTES;
    use keycodec_core::backend_api::raw_view::{as_raw_bytes_mut, zeroed};
    let refused = || format!("cannot take {bytes} bytes of memory to prime");
    let count = usize::try_from(bytes / FR_BYTES as u64).map_err(|_| refused())?;
    let mut values = zeroed(count).map_err(|e| format!("{}: {e}", refused()))?;
    match values.as_mut().and_then(|values| as_raw_bytes_mut(values)) {
        Some(memory) => write_every_page(memory),
        // Where scalars are not plain limbs (no huge pages asked for): plain bytes.
        None => {
            let len = usize::try_from(bytes).map_err(|_| refused())?;
            let mut memory = Vec::new();
            memory.try_reserve_exact(len).map_err(|_| refused())?;
            memory.resize(len, 0u8);
            write_every_page(&mut memory);
        }
    }
    Ok(())
}

/// Writes a byte of every 4 KiB page of `memory`, so that the kernel maps it all, on every
/// core: where the host took the memory back, the host maps it again as the pages are first
/// written, and more cores do that sooner (`docs/performance.md`, "The primer on every
/// core").
fn write_every_page(memory: &mut [u8]) {
    use rayon::prelude::*;
    const PAGE: usize = 4 << 10;
    // Shares of a huge page's size, so that two cores seldom write into one huge page.
    const SHARE: usize = 2 << 20;
    memory.par_chunks_mut(SHARE).for_each(|share| {
        for page in share.chunks_mut(PAGE) {
            if let Some(first) = page.first_mut() {
                *first = 1;
            }
        }
    });
    // The writes are the point: nothing may drop them as unread.
    std::hint::black_box(memory);
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
    fn a_primer_asks_for_huge_pages_and_a_load_does_not() {
        let asks = |command: &std::process::Command| {
            command
                .get_envs()
                .any(|(name, value)| name == keycodec_core::HUGE_PAGES_ENV && value.is_some())
        };
        let exe = Path::new("harness");
        assert!(!asks(&child_command(exe, "{}".into())));
        assert!(asks(&primer_command(exe, 1 << 20)));
    }

    /// The write the primer's every path makes (the fallback's too): one byte of each 4 KiB
    /// page, the last page partial, and nothing else, within one core's share and across
    /// several.
    #[test]
    fn a_primer_writes_one_byte_of_every_page() {
        for len in [3 * 4096 + 1, (5 << 20) + 3 * 4096 + 1] {
            let mut memory = vec![0u8; len];
            write_every_page(&mut memory);
            for (at, &byte) in memory.iter().enumerate() {
                assert_eq!(byte, u8::from(at % 4096 == 0), "byte {at} of {len}");
            }
        }
        write_every_page(&mut []);
    }

    #[test]
    fn a_primer_maps_all_it_is_asked_for_and_fails_where_it_cannot() {
        use crate::measure::rss;
        // Nothing asked for, nothing taken; more than the machine can address, refused.
        prime(0).unwrap();
        assert!(prime(u64::MAX).is_err());
        let _alone = rss::PEAK_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        if !rss::reset_peak() {
            return; // not Linux, or clear_refs not permitted: nothing to check
        }
        let before = rss::current().unwrap();
        prime(64 << 20).unwrap();
        let peak = rss::peak().unwrap();
        // Half of it: other tests in this process may free memory meanwhile.
        assert!(peak >= before + (32 << 20), "peak {peak} before {before}");
    }
}
