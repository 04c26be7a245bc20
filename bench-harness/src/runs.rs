//! Runs a [`Plan`]: run after run, every file written, then every case
//! timed once, in an order rotated each run; then one row per case.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use keycodec::Size;

use crate::measure::rss;
use crate::plan::Plan;
use crate::stats::{median, paired_ratio, rotation, Summary};
use crate::{Args, Row, RowId};

/// What the runs of one case gathered.
#[derive(Clone)]
struct Gathered {
    reads: Vec<f64>,
    peak: Option<u64>,
    verified: bool,
}

/// Runs plans with a progress bar, tracking the harness's own peak memory and whether
/// every cold read was cold.
pub struct Runner {
    repeat: usize,
    replace: bool,
    /// Write the files in every run (`--full`, `--replace`), not only the first.
    rewrite: bool,
    cold: bool,
    bar: ProgressBar,
    /// The highest resident memory seen, if measurable.
    pub harness_peak: Option<u64>,
    /// Every request to drop the page cache was accepted.
    pub cold_effective: bool,
}

impl Runner {
    /// A runner of `repeat` runs per plan, as `args` asks.
    pub fn new(args: &Args, repeat: usize) -> Self {
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed}, ~{eta} left)")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Runner {
            repeat,
            replace: args.replace,
            rewrite: args.full || args.replace,
            cold: args.cold,
            bar,
            harness_peak: rss::peak(),
            cold_effective: true,
        }
    }

    /// Clears the progress bar.
    pub fn finish(&mut self) {
        self.bar.finish_and_clear();
        self.harness_peak = self.harness_peak.max(rss::peak());
    }

    /// Runs `plan` with `buffer`; one row per case.
    ///
    /// # Errors
    ///
    /// A write or a case that failed, as text.
    pub fn measure(&mut self, plan: &Plan<'_>, buffer: Size) -> Result<Vec<Row>, String> {
        let repeat = self.repeat;
        let writing_runs = if self.rewrite { repeat } else { 1 };
        self.bar
            .inc_length((writing_runs * plan.files.len() + repeat * plan.cases.len()) as u64);
        let mut writes = vec![Vec::new(); plan.files.len()];
        let mut sizes = vec![0u64; plan.files.len()];
        let mut gathered = vec![
            Gathered {
                reads: Vec::new(),
                peak: None,
                verified: true,
            };
            plan.cases.len()
        ];
        for run in 0..repeat {
            let files = if run < writing_runs {
                plan.files.len()
            } else {
                0
            };
            for index in rotation(files, run) {
                let (Some(file), Some(times), Some(size)) = (
                    plan.files.get(index),
                    writes.get_mut(index),
                    sizes.get_mut(index),
                ) else {
                    continue;
                };
                self.bar
                    .set_message(format!("run {}: writing {}", run + 1, file.name));
                // Unless `--replace`, every save goes to a path with no file (see `Args`).
                if !self.replace {
                    file.remove()?;
                }
                let (seconds, bytes) = file.write(buffer)?;
                times.push(seconds);
                *size = bytes;
                self.bar.inc(1);
            }
            for index in rotation(plan.cases.len(), run) {
                let (Some(case), Some(gathered)) = (plan.cases.get(index), gathered.get_mut(index))
                else {
                    continue;
                };
                self.bar.set_message(format!(
                    "run {}: {} {} {} {}",
                    run + 1,
                    case.backend,
                    case.mode,
                    case.validation,
                    buffer
                ));
                let paths: Vec<&Path> = case
                    .files
                    .iter()
                    .filter_map(|&file| plan.files.get(file).map(|f| f.path.as_path()))
                    .collect();
                if self.cold {
                    for path in &paths {
                        // The harness's files are clean when read: every save was synced.
                        self.cold_effective &= codec_core::drop_cached_pages(path);
                    }
                }
                self.harness_peak = self.harness_peak.max(rss::peak());
                let measurable = rss::reset_peak();
                let before = rss::current();
                let (seconds, verified) = case.run(&paths, buffer)?;
                let after = rss::peak();
                self.harness_peak = self.harness_peak.max(after);
                if let (true, Some(before), Some(after)) = (measurable, before, after) {
                    gathered.peak =
                        Some(gathered.peak.unwrap_or(0).max(after.saturating_sub(before)));
                }
                gathered.verified &= verified;
                gathered.reads.push(seconds);
                self.bar.inc(1);
            }
        }
        for file in &plan.files {
            file.remove()?;
        }
        Ok(rows(plan, buffer, repeat, &writes, &sizes, &gathered))
    }
}

/// One row per case of `plan`.
fn rows(
    plan: &Plan<'_>,
    buffer: Size,
    repeat: usize,
    writes: &[Vec<f64>],
    sizes: &[u64],
    gathered: &[Gathered],
) -> Vec<Row> {
    let mut rows = Vec::new();
    for (case, runs) in plan.cases.iter().zip(gathered) {
        let reference = case
            .reference
            .and_then(|r| Some((plan.cases.get(r)?, gathered.get(r)?)));
        let floor = case.floor.and_then(|f| gathered.get(f));
        let write_runs = match case.files.as_slice() {
            [file] if case.shows_write => writes.get(*file).cloned().unwrap_or_default(),
            _ => Vec::new(),
        };
        let write_s = (!write_runs.is_empty()).then(|| median(&write_runs));
        let file_bytes = case.files.iter().filter_map(|&f| sizes.get(f)).sum::<u64>();
        let read = Summary::of(&runs.reads);
        rows.push(Row {
            kind: case.kind,
            backend: case.backend,
            mode: case.mode,
            validation: case.validation,
            buffer_bytes: buffer.0,
            write_s,
            write_gbps: write_s.map(|s| file_bytes as f64 / s / 1e9),
            write_runs,
            read_s: read.median_s,
            read_min_s: read.min_s,
            read_spread: read.spread,
            read_gbps: file_bytes as f64 / read.median_s / 1e9,
            read_runs: runs.reads.clone(),
            file_bytes,
            read_vs_floor: floor.and_then(|floor| paired_ratio(&runs.reads, &floor.reads)),
            speedup_vs_reference: reference
                .and_then(|(_, theirs)| paired_ratio(&theirs.reads, &runs.reads)),
            reference: reference.map(|(case, _)| RowId {
                backend: case.backend,
                mode: case.mode,
                validation: case.validation,
            }),
            write_vs_bulk: None,
            read_vs_bulk: None,
            read_vs_bulk_parallel: None,
            read_vs_bulk_populated: None,
            peak_rss_bytes: runs.peak,
            verified: runs.verified && runs.reads.len() == repeat,
        });
    }
    rows
}
