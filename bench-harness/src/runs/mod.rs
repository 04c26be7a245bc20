//! Runs a [`Plan`]: run after run, its files written, then its cases timed (each once, the
//! floors too; small files saved again a third and two thirds in), in an order rotated each
//! run, until every paired ratio is known to the interval asked for (or the runs or the time
//! allowed are spent); then one row per case and per file. The first runs (the minimum) take
//! every file and case, each later one only those of the ratios still widest, as many as fit
//! in the time left.
//!
//! This module runs them; `order` says in which order a run takes the cases and which load
//! primes the memory before one, `rows` makes the rows of the samples, and `by_run` pairs
//! their timings run by run.

mod by_run;
mod order;
mod rows;

use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use keycodec_core::Size;

use crate::measure::rss;
use crate::plan::{Case, File, Plan};
use crate::stats::{rotation, SOUND_HALF_WIDTH};
use crate::{Row, SaveRow};
use order::{needs_priming, primer_bytes, visiting_order, wide_claims, After, Costs, Selection};
use rows::{claims, row_line, rows, saves_per_run, Claim, Saved, Taken, SAVES_OF_SMALL_FILES};

/// Runs of every row's worth of time that the widest rows need after the minimum of runs to
/// narrow: on the project's machine a run of every row took about 25 s (15 s of it timed),
/// the default run left the widest rows six or more such runs' worth, and none of its ratios
/// to halo2 was wider than +-25%; on a host where a run took a minute, under one left 11
/// and 12 of 19 wide, and five to six (`--time-cap 10m`) 3 and 0.
const NARROWING_RUNS: f64 = 5.0;

/// When a plan's runs stop.
#[derive(Clone, Copy, Debug)]
pub struct Stopping {
    /// Warm-up runs made first and not counted (the first saves and loads after the fixture
    /// is built meet a page cache being filled and are slower than any later ones): every
    /// file written, and loaded once.
    pub warmup: usize,
    /// Exactly this many runs, whatever the intervals (`--repeat`).
    pub fixed: Option<usize>,
    /// At least this many runs.
    pub min_runs: usize,
    /// At most this many runs of each ratio: after the minimum, a ratio measured in this
    /// many runs is measured no more, and the runs stop when every ratio still wide is.
    pub max_runs: usize,
    /// Stop once every paired ratio's 95% interval is within +-this (0.1: +-10%).
    pub interval: f64,
    /// Or before a run that would end past this length of the whole harness run (every
    /// size, every plan), as the costs of its cases and files when last measured say:
    /// checked after each counted run, before the minimum of runs. Each plan still gets one
    /// run.
    pub time_cap: Duration,
}

/// What a plan's runs gave.
pub struct Measured {
    /// One row per load case.
    pub rows: Vec<Row>,
    /// One row per save (halo2's writer: its durable save and its plain write).
    pub saves: Vec<SaveRow>,
    /// Runs made.
    pub runs: usize,
    /// Why they stopped.
    pub stopped: String,
}

/// Runs plans with a progress bar, tracking the harness's own peak memory and whether
/// every cold read was cold.
pub struct Runner {
    stopping: Stopping,
    /// When the harness run started: the time cap is of the whole run.
    started: Instant,
    /// Whether progress goes to a log (not a terminal): a line per finished run.
    log: bool,
    replace: bool,
    cold: bool,
    bar: ProgressBar,
    /// The highest resident memory seen, if measurable.
    pub harness_peak: Option<u64>,
    /// Every request to drop the page cache was accepted.
    pub cold_effective: bool,
    /// keycodec's loads ask for huge pages on this machine (which loads are primed).
    huge_pages: bool,
    /// How long a load from the disk waits after its files' pages are dropped, instead of
    /// being primed (zero: primed as [`needs_priming`] says).
    cold_idle: Duration,
}

impl Runner {
    /// A runner that stops as `stopping` says; `replace` saves over the previous run's files,
    /// `cold` drops each file's cached pages before it is read.
    pub fn new(stopping: Stopping, replace: bool, cold: bool) -> Self {
        let bar = ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} run {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        Runner {
            stopping,
            started: Instant::now(),
            log: !std::io::IsTerminal::is_terminal(&std::io::stderr()),
            replace,
            cold,
            bar,
            harness_peak: rss::peak(),
            cold_effective: true,
            huge_pages: keycodec_core::asks_for_huge_pages(),
            cold_idle: Duration::ZERO,
        }
    }

    /// Each load from the disk waits `idle` after its files' pages are dropped, unprimed, so
    /// that the memory it takes was freed that long before (as on a machine that idled);
    /// zero primes it instead (the first cold load of a run, and each after a key's load
    /// from the disk).
    pub fn idle_before_cold(mut self, idle: Duration) -> Self {
        self.cold_idle = idle;
        self
    }

    /// Clears the progress bar.
    pub fn finish(&mut self) {
        self.bar.finish_and_clear();
        self.harness_peak = self.harness_peak.max(rss::peak());
    }

    /// Runs `plan` with `buffer` until it is measured well enough.
    ///
    /// # Errors
    ///
    /// A write or a case that failed, as text.
    pub fn measure(&mut self, plan: &Plan<'_>, buffer: Size) -> Result<Measured, String> {
        let started = Instant::now();
        if self.log {
            eprintln!(
                "measuring {} cases over {} files, buffer {buffer}",
                plan.cases.len(),
                plan.files.len()
            );
        }
        let mut saved = Saved {
            times: vec![Vec::new(); plan.files.len()],
            bytes: vec![0u64; plan.files.len()],
        };
        let mut samples: Vec<Vec<Taken>> = plan.cases.iter().map(|_| Vec::new()).collect();
        let mut costs = Costs::of(plan);
        let mut next = Selection::all(plan);
        // Runs that measured only the rows still wide.
        let mut narrowed = 0;
        let mut run = 0;
        let mut warming = self.stopping.warmup;
        let stopped = loop {
            let run_started = Instant::now();
            // A warm-up run loads each file once, by the first case that reads it: enough to
            // bring every file and the child's binary into the page cache as later runs find
            // them, at a fraction of a run.
            let mut warmed = vec![false; plan.files.len()];
            let label = pass(run, warming);
            let selection = if warming > 0 {
                Selection::all(plan)
            } else {
                next.clone()
            };
            let mut spent = Costs::of(plan);
            self.write(
                plan,
                run,
                &label,
                buffer,
                &mut saved,
                &mut spent,
                |index, _, _| selection.file(index),
            )?;
            let visits = visiting_order(plan, run);
            let all_visits = visits.len();
            let order: Vec<usize> = visits
                .into_iter()
                .filter(|&index| selection.case(index))
                .collect();
            let mut before = None;
            for (at, &index) in order.iter().enumerate() {
                // A small file's later saves, a third and two thirds into the run (both
                // here, one after the other, in a run of fewer than three loads).
                let due = (1..SAVES_OF_SMALL_FILES)
                    .filter(|save| at == order.len() * save / SAVES_OF_SMALL_FILES)
                    .count();
                for _ in 0..due {
                    self.write_small(
                        plan, run, &label, buffer, &mut saved, &mut spent, &selection,
                    )?;
                }
                let (Some(case), Some(taken)) = (plan.cases.get(index), samples.get_mut(index))
                else {
                    continue;
                };
                if warming > 0 {
                    let unread = case
                        .files
                        .iter()
                        .any(|&file| warmed.get(file).is_some_and(|&done| !done));
                    if !unread {
                        continue;
                    }
                    for &file in &case.files {
                        if let Some(done) = warmed.get_mut(file) {
                            *done = true;
                        }
                    }
                }
                self.bar.set_message(format!(
                    "{}: {} {} {} {}",
                    pass(run, warming),
                    case.backend,
                    case.mode,
                    case.validation,
                    case.state.name()
                ));
                self.read_back(plan, case, &mut spent)?;
                let visit_started = Instant::now();
                let paths = paths_of(plan, case);
                // A new process's load after another state's, or after a load that left its
                // memory in small pages: primed where that changes its memory's cost (see
                // [`needs_priming`]).
                // Warm-up loads neither wait nor are primed: they are not counted.
                let idles = self.reads_cold(case) && !self.cold_idle.is_zero() && warming == 0;
                if warming == 0 && !idles && needs_priming(before, case.state, self.huge_pages) {
                    plan.prime(primer_bytes(plan, case, &saved.bytes))?;
                }
                self.drop_if_cold(case, &paths);
                if idles {
                    std::thread::sleep(self.cold_idle);
                }
                let cached_before = cached_share(&paths);
                self.harness_peak = self.harness_peak.max(rss::peak());
                let mut sample = case.run(&paths, buffer)?;
                sample.cached_before = cached_before;
                before = Some(After::of(case.state, &sample));
                taken.push(Taken {
                    run: run + 1,
                    sample,
                });
                spent.add_case(index, visit_started.elapsed());
                self.harness_peak = self.harness_peak.max(rss::peak());
            }
            // A run of saves alone (every load's ratio narrow enough) saves a small file as
            // often as any run, one save after the other.
            if order.is_empty() {
                for _ in 1..SAVES_OF_SMALL_FILES {
                    self.write_small(
                        plan, run, &label, buffer, &mut saved, &mut spent, &selection,
                    )?;
                }
            }
            if warming > 0 {
                warming -= 1;
                saved.times.iter_mut().for_each(Vec::clear);
                samples.iter_mut().for_each(Vec::clear);
                continue;
            }
            run += 1;
            if !selection.is_all() {
                narrowed += 1;
            }
            costs.update(&spent);
            let claims = claims(plan, &saved, &samples, self.cold);
            // What this run spent beside its cases and files (the rows' intervals, the
            // progress bar), taken to be what the next spends beside its own: a run fits when
            // its cases and files, as they cost when last measured, and that end before the
            // cap.
            let last = run_started.elapsed();
            let beside =
                last.saturating_sub(Duration::from_secs_f64(costs.of_selection(&selection)));
            let fits = |selection: &Selection| {
                self.started.elapsed()
                    + beside
                    + Duration::from_secs_f64(costs.of_selection(selection))
                    < self.stopping.time_cap
            };
            let every = Selection::all(plan);
            let (wide, fitting) = match self.stopping.fixed {
                Some(_) => (0, every),
                None if run < self.stopping.min_runs => {
                    let fitting = if fits(&every) {
                        every
                    } else {
                        Selection::none(plan)
                    };
                    (0, fitting)
                }
                None => {
                    let wide = wide_claims(
                        &claims,
                        SOUND_HALF_WIDTH,
                        self.stopping.interval,
                        self.stopping.max_runs,
                    );
                    (wide.len(), Selection::of_claims(plan, &wide, fits))
                }
            };
            next = fitting;
            let stop = self.stop(run, narrowed, &claims, wide, next.is_empty());
            if run == 1 {
                self.say(&self.estimate(last));
            }
            if self.log {
                eprintln!(
                    "run {run} ({} of {all_visits} loads) done in {:.0} s ({:.0} s in all): {}",
                    order.len(),
                    started.elapsed().as_secs_f64(),
                    self.started.elapsed().as_secs_f64(),
                    stop.as_deref().unwrap_or("another run")
                );
            }
            if let Some(reason) = stop {
                break reason;
            }
        };
        for file in &plan.files {
            file.remove()?;
        }
        let (rows, saves) = rows(plan, buffer, &saved, &samples, self.cold);
        if self.log {
            for row in &rows {
                eprintln!("{}", row_line(row));
            }
        }
        Ok(Measured {
            rows,
            saves,
            runs: run,
            stopped,
        })
    }

    /// Saves again each small file of `selection` (one saved several times a run, see
    /// [`saves_per_run`]), as [`Runner::write`] does.
    ///
    /// # Errors
    ///
    /// The write's error, as text.
    #[allow(clippy::too_many_arguments)]
    fn write_small(
        &self,
        plan: &Plan<'_>,
        run: usize,
        label: &str,
        buffer: Size,
        saved: &mut Saved,
        spent: &mut Costs,
        selection: &Selection,
    ) -> Result<(), String> {
        self.write(
            plan,
            run,
            label,
            buffer,
            saved,
            spent,
            |index, file, bytes| selection.file(index) && saves_per_run(file, bytes) > 1,
        )
    }

    /// Writes each file of `plan` that `which` picks (given its index, the file and the
    /// bytes it held last), in an order rotated each run (`label` names the run to the
    /// progress bar), adding its timings to `saved` and what it took to `spent`.
    ///
    /// # Errors
    ///
    /// The write's error, as text.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        plan: &Plan<'_>,
        run: usize,
        label: &str,
        buffer: Size,
        saved: &mut Saved,
        spent: &mut Costs,
        which: impl Fn(usize, &File<'_>, u64) -> bool,
    ) -> Result<(), String> {
        for index in rotation(plan.files.len(), run) {
            let (Some(file), Some(times), Some(size)) = (
                plan.files.get(index),
                saved.times.get_mut(index),
                saved.bytes.get_mut(index),
            ) else {
                continue;
            };
            if !which(index, file, *size) {
                continue;
            }
            self.bar
                .set_message(format!("{label}: writing {}", file.name()));
            let started = Instant::now();
            // Unless `--replace`, every save goes to a path with no file.
            if !self.replace {
                file.remove()?;
            }
            let (written, bytes) = file.write(buffer)?;
            times.push((run + 1, written));
            *size = bytes;
            spent.add_file(index, started.elapsed());
        }
        Ok(())
    }

    /// Whether `case` reads its files from the disk (the cold state, or `--cold`).
    fn reads_cold(&self, case: &Case<'_>) -> bool {
        rows::reads_cold(case, self.cold)
    }

    /// Reads the files of `case` whole through the page cache, untimed, where it reads them
    /// from there (a warm or fresh load, and not `--cold`) and the page cache lacks some of
    /// their pages: a cold load before it may have dropped them, and keycodec's loads from
    /// the disk read past the page cache, so without this the next fresh load of such a file
    /// read it from the disk in part or whole (the first fresh loads after a run's cold ones
    /// took up to 2.8 times as long as in the rest of the run). Only local files whose pages
    /// can be counted (`mincore`); the time goes to each file's cost in `spent`.
    ///
    /// # Errors
    ///
    /// A file that could not be read, as text.
    fn read_back(&self, plan: &Plan<'_>, case: &Case<'_>, spent: &mut Costs) -> Result<(), String> {
        if self.reads_cold(case) {
            return Ok(());
        }
        for &index in &case.files {
            let Some(file) = plan.files.get(index) else {
                continue;
            };
            // An object in object storage has no local path.
            if !file.path.is_file() {
                continue;
            }
            let missing = keycodec_core::cached_pages(&file.path)
                .is_some_and(|(cached, pages)| cached < pages);
            if missing {
                let started = Instant::now();
                read_through_page_cache(&file.path)
                    .map_err(|e| format!("could not read {}: {e}", file.path.display()))?;
                spent.add_file(index, started.elapsed());
            }
        }
        Ok(())
    }

    /// Drops the cached pages of `paths` if `case` reads them cold.
    fn drop_if_cold(&mut self, case: &Case<'_>, paths: &[&Path]) {
        if self.reads_cold(case) {
            for path in paths {
                // The harness's files are clean when read: every save was synced.
                self.cold_effective &= keycodec_core::drop_cached_pages(path);
            }
        }
    }

    /// A line for the user, above the progress bar (or in the log).
    fn say(&self, line: &str) {
        if self.log {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// What the first counted run's length says of the rest: a run starts only when it
    /// would end before the time cap, so the runs of every row still to come are those that
    /// fit in it (after the minimum of runs, a run of the widest rows only is shorter, and
    /// more of them fit).
    fn estimate(&self, first: Duration) -> String {
        let stopping = &self.stopping;
        let per_run = first.as_secs_f64().max(1e-3);
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = (stopping.time_cap.as_secs_f64() - elapsed).max(0.0);
        let (runs, verdict) = match stopping.fixed {
            // `--repeat` makes its runs whatever the cap.
            Some(fixed) => (fixed, format!("{fixed} runs, as asked")),
            None => {
                let runs = (1 + (left / per_run).floor() as usize).min(stopping.max_runs.max(1));
                let wanted = stopping.min_runs;
                // Time left for the widest rows once the minimum of runs is done.
                let after_minimum = left - (wanted - 1) as f64 * per_run;
                let verdict = if runs >= wanted && after_minimum >= NARROWING_RUNS * per_run {
                    format!(
                        "{runs} runs of every row fit in the time cap (runs of the widest rows \
                         only, after the first {wanted}, are shorter)"
                    )
                } else if runs >= wanted {
                    // The cap that would leave them the runs that narrowed them elsewhere.
                    let enough = elapsed + (wanted - 1) as f64 * per_run + NARROWING_RUNS * per_run;
                    format!(
                        "{runs} runs of every row fit in the time cap, leaving about {:.0} s \
                         for the widest rows after the first {wanted}, under the {NARROWING_RUNS} \
                         runs' worth that narrowed them elsewhere: intervals may stay wide \
                         (--time-cap {}m would leave that)",
                        after_minimum.max(0.0),
                        (enough / 60.0).ceil()
                    )
                } else {
                    format!(
                        "{runs} of the {wanted} runs wanted fit in the time cap: the intervals \
                         will be wide (raise --time-cap, or measure fewer backends or states)"
                    )
                };
                (runs, verdict)
            }
        };
        format!(
            "run 1 took {per_run:.0} s; {verdict}; runs of every row would end about {:.0} s \
             into the whole run",
            elapsed + (runs - 1) as f64 * per_run
        )
    }

    /// Why to stop after `runs` runs (`narrowed` of which measured only the rows still
    /// wide), judged by `claims`, when `wide` of them may still be measured (after the
    /// minimum of runs) and `nothing_fits` says no run would end before the cap; `None` to
    /// run again.
    fn stop(
        &self,
        runs: usize,
        narrowed: usize,
        claims: &[Claim],
        wide: usize,
        nothing_fits: bool,
    ) -> Option<String> {
        let stopping = &self.stopping;
        if let Some(fixed) = stopping.fixed {
            return (runs >= fixed).then(|| format!("{fixed} runs, as asked"));
        }
        let half_widths: Vec<f64> = claims
            .iter()
            .map(|claim| claim.ratio.half_width())
            .collect();
        let widest_said = widest_said(&half_widths);
        let runs_made = if narrowed == 0 {
            format!("{runs} runs")
        } else {
            format!("{runs} runs ({narrowed} of them of the widest rows only)")
        };
        let widest = half_widths.iter().copied().fold(0.0, f64::max);
        let unsound = claims
            .iter()
            .filter(|claim| claim.ratio.too_wide_to_claim())
            .count();
        let past_minimum = runs >= stopping.min_runs;
        if past_minimum && widest <= stopping.interval {
            return Some(format!(
                "every paired ratio's 95% interval within +-{:.0}% (widest +-{:.0}%)",
                stopping.interval * 100.0,
                widest * 100.0
            ));
        }
        if past_minimum && wide == 0 {
            return Some(format!(
                "{runs_made}: every ratio still wider than +-{:.0}% measured in the {} runs \
                 allowed (--max-runs); {widest_said}",
                stopping.interval * 100.0,
                stopping.max_runs,
            ));
        }
        // The cap bounds the whole run, the minimum of runs included: no run is started that
        // would end past it, as the runs so far say.
        if nothing_fits {
            let advice = if unsound == 0 {
                String::new()
            } else {
                format!(
                    "; {unsound} of {} without an interval or wider than +-{:.0}%: a longer \
                     --time-cap adds runs",
                    half_widths.len(),
                    SOUND_HALF_WIDTH * 100.0
                )
            };
            return Some(format!(
                "time cap ({:.0} s for the whole run; another run would end past it) after \
                 {runs_made}; {widest_said}{advice}",
                stopping.time_cap.as_secs_f64(),
            ));
        }
        None
    }
}

/// The widest of the intervals `half_widths` (`+-40%`), and how many ratios have none (one
/// run each: [`crate::stats::Ratio::has_interval`]).
fn widest_said(half_widths: &[f64]) -> String {
    let known: Vec<f64> = half_widths
        .iter()
        .copied()
        .filter(|half_width| half_width.is_finite())
        .collect();
    let unknown = half_widths.len() - known.len();
    let widest = known.iter().copied().fold(0.0, f64::max);
    match (known.is_empty(), unknown) {
        (true, 0) => "no ratio".to_owned(),
        (true, _) => format!("no interval: {unknown} ratios from a single run each"),
        (false, 0) => format!("widest interval +-{:.0}%", widest * 100.0),
        (false, _) => format!(
            "widest interval +-{:.0}%, and {unknown} ratios from a single run, without one",
            widest * 100.0
        ),
    }
}

/// The paths of the files `case` reads.
fn paths_of<'p>(plan: &'p Plan<'_>, case: &Case<'_>) -> Vec<&'p Path> {
    case.files
        .iter()
        .filter_map(|&file| plan.files.get(file).map(|f| f.path.as_path()))
        .collect()
}

/// Reads the file at `path` to its end through the page cache, 4 MiB a read.
fn read_through_page_cache(path: &Path) -> std::io::Result<()> {
    let file = std::fs::File::open(path)?;
    std::io::copy(
        &mut std::io::BufReader::with_capacity(4 << 20, file),
        &mut std::io::sink(),
    )?;
    Ok(())
}

/// The share of the pages of `paths` together that the page cache holds (`mincore`), if
/// that can be told for each.
fn cached_share(paths: &[&Path]) -> Option<f64> {
    let (cached, pages) = paths
        .iter()
        .map(|path| keycodec_core::cached_pages(path))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .fold((0, 0), |(cached, pages), (c, p)| (cached + c, pages + p));
    Some(cached as f64 / pages.max(1) as f64)
}

/// How the progress bar names a run: `warm-up` or its number.
fn pass(run: usize, warming: usize) -> String {
    if warming > 0 {
        "warm-up".to_owned()
    } else {
        (run + 1).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::order::PRIMED_BYTES;
    use super::*;
    use crate::exec::Sample;
    use crate::measure::Written;
    use crate::plan::{Kind, State};
    use crate::plan::{FLOOR, HALO2_NATIVE};
    use crate::stats::Ratio;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A load that took `seconds` and gave the original, nothing else measured.
    fn loaded(seconds: f64) -> Sample {
        Sample {
            seconds,
            verified: true,
            rss_rise: None,
            huge_pages: None,
            compact_stalls: None,
            cached_before: None,
            way: None,
            cpu: None,
        }
    }

    /// Measures `plan` in exactly `runs` runs, no warm-up.
    fn measure_runs(plan: &Plan<'_>, runs: usize) -> Measured {
        fixed_runner(runs).measure(plan, Size(1 << 20)).unwrap()
    }

    /// A runner stopped as a default run is: five minutes, 5 to 20 runs, +-10%, no warm-up.
    fn five_minute_runner() -> Runner {
        let stopping = Stopping {
            warmup: 0,
            fixed: None,
            min_runs: 5,
            max_runs: 20,
            interval: 0.1,
            time_cap: Duration::from_secs(300),
        };
        Runner::new(stopping, false, false)
    }

    /// After its first run, a run of the default five minutes says whether the widest rows
    /// will have time to narrow: with runs of every row of 25 s, yes; of 55 s (a host where
    /// the five minimum runs took the whole cap), no, and which cap would give them it.
    #[test]
    fn a_slow_first_run_says_which_cap_leaves_the_widest_rows_time() {
        let runner = five_minute_runner();
        let quick = runner.estimate(Duration::from_secs(25));
        assert!(
            quick.contains("runs of every row fit in the time cap ("),
            "{quick}"
        );
        assert!(!quick.contains("--time-cap"), "{quick}");
        let slow = runner.estimate(Duration::from_secs(55));
        assert!(slow.contains("6 runs of every row fit"), "{slow}");
        assert!(slow.contains("intervals may stay wide"), "{slow}");
        // Four more runs of every row and five runs' worth for the widest: 495 s.
        assert!(slow.contains("--time-cap 9m"), "{slow}");
        let slower = runner.estimate(Duration::from_secs(80));
        assert!(slower.contains("4 of the 5 runs wanted fit"), "{slower}");
    }

    /// A run stopped by its cap after one run says its ratios have no interval yet, not that
    /// the widest is +-0%; beside ratios of more runs, how many have none.
    #[test]
    fn a_capped_run_of_one_run_says_its_ratios_have_no_interval() {
        let runner = five_minute_runner();
        let claim = |runs, low, high| Claim {
            ratio: Ratio {
                estimate: 1.0,
                low,
                high,
                runs,
            },
            runs,
            cases: vec![0],
            files: Vec::new(),
        };
        let one_run = [claim(1, 1.0, 1.0), claim(1, 1.0, 1.0)];
        let said = runner.stop(1, 0, &one_run, 0, true).unwrap();
        assert!(
            said.contains("no interval: 2 ratios from a single run each"),
            "{said}"
        );
        assert!(!said.contains("+-0%"), "{said}");
        let mixed = [claim(1, 1.0, 1.0), claim(3, 0.8, 1.2)];
        let said = runner.stop(3, 0, &mixed, 2, true).unwrap();
        assert!(
            said.contains("widest interval +-20%, and 1 ratios from a single run"),
            "{said}"
        );
    }

    /// A runner that makes exactly `runs` runs, no warm-up.
    fn fixed_runner(runs: usize) -> Runner {
        let stopping = Stopping {
            warmup: 0,
            fixed: Some(runs),
            min_runs: runs,
            max_runs: runs,
            interval: 0.1,
            time_cap: Duration::from_secs(60),
        };
        Runner::new(stopping, false, false)
    }

    /// Adds a file of 64 bytes in `scratch`, each save taking 1 ms.
    fn small_file(
        plan: &mut Plan<'_>,
        (kind, backend): (Kind, &'static str),
        scratch: &Path,
    ) -> usize {
        plan.file(
            (kind, backend, "RawBytes"),
            Box::new(|path, _| {
                std::fs::write(path, [0u8; 64]).map_err(|e| e.to_string())?;
                Ok(Written {
                    seconds: 1e-3,
                    unsynced: None,
                })
            }),
            scratch,
        )
    }

    /// Adds a warm case of `file` whose loads take `seconds` in turn.
    fn timed_case(
        plan: &mut Plan<'_>,
        file: usize,
        (kind, backend, validation): (Kind, &'static str, &'static str),
        seconds: Vec<f64>,
    ) -> usize {
        let loads = AtomicUsize::new(0);
        plan.case(
            (kind, backend, "RawBytes", validation, State::Warm),
            vec![file],
            Box::new(move |_, _| {
                let at = loads.fetch_add(1, Ordering::SeqCst);
                Ok(loaded(
                    seconds.get(at % seconds.len()).copied().unwrap_or(1.0),
                ))
            }),
        )
    }

    #[test]
    fn a_small_file_is_saved_three_times_a_run_and_its_median_counted() {
        let scratch = tempfile::tempdir().unwrap();
        let saves = AtomicUsize::new(0);
        let mut plan = Plan::empty();
        // Each save of this file takes longer than the one before: 1, 2, 3, ... ms.
        let file = plan.file(
            (Kind::Params, "rawbytes", "RawBytes"),
            Box::new(|path, _| {
                std::fs::write(path, [0u8; 64]).map_err(|e| e.to_string())?;
                let save = saves.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(Written {
                    seconds: save as f64 / 1e3,
                    unsynced: None,
                })
            }),
            scratch.path(),
        );
        for validation in ["checked", "trusted", "pinned"] {
            plan.case(
                (
                    Kind::Params,
                    "rawbytes",
                    "RawBytes",
                    validation,
                    State::Warm,
                ),
                vec![file],
                Box::new(|_, _| Ok(loaded(1e-3))),
            );
        }
        let measured = measure_runs(&plan, 2);
        assert_eq!(saves.load(Ordering::SeqCst), 2 * SAVES_OF_SMALL_FILES);
        let row = measured.saves.first().unwrap();
        // Run 1 saved in 1, 2, 3 ms; run 2 in 4, 5, 6: one median each.
        assert_eq!(row.save_runs, vec![2e-3, 5e-3]);
    }

    /// A fresh load begins with its file wholly in the page cache, also right after a cold
    /// load of the same file dropped its pages (keycodec's loads from the disk read past the
    /// page cache, so nothing had read it back); each cold load begins with it dropped.
    #[test]
    fn a_fresh_load_after_a_cold_one_of_its_file_finds_the_file_cached() {
        let scratch = tempfile::tempdir().unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        let mut plan = Plan::empty();
        let file = plan.file(
            (Kind::Pk, "rawbytes", "RawBytes"),
            Box::new(|path, _| {
                use std::io::Write;
                let mut file = std::fs::File::create(path).map_err(|e| e.to_string())?;
                file.write_all(&vec![0x5a; 4 << 20])
                    .and_then(|()| file.sync_all())
                    .map_err(|e| e.to_string())?;
                Ok(Written {
                    seconds: 1e-3,
                    unsynced: None,
                })
            }),
            scratch.path(),
        );
        // Saved once a run, at its start: not again between the loads.
        plan.hide(file);
        for state in [State::Cold, State::Fresh] {
            let seen = &seen;
            plan.case(
                (Kind::Pk, "rawbytes", "RawBytes", "trusted", state),
                vec![file],
                Box::new(move |paths, _| {
                    seen.lock().unwrap().push((state, cached_share(paths)));
                    Ok(loaded(1e-3))
                }),
            );
        }
        let measured = measure_runs(&plan, 4);
        drop(plan);
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 8);
        let dropped = seen
            .iter()
            .all(|&(state, share)| state != State::Cold || share == Some(0.0));
        if !dropped {
            eprintln!("skipped: this file system keeps a file's pages when asked to drop them");
            return;
        }
        assert!(
            seen.windows(2)
                .any(|pair| pair[0].0 == State::Cold && pair[1].0 == State::Fresh),
            "no fresh load right after a cold one: {seen:?}"
        );
        for &(state, share) in &seen {
            if state == State::Fresh {
                assert_eq!(share, Some(1.0), "{seen:?}");
            }
        }
        // Each row's share is the one farthest from what its state promises.
        for row in &measured.rows {
            let promised = if row.state == State::Cold.name() {
                0.0
            } else {
                1.0
            };
            assert_eq!(row.cached_before, Some(promised), "{}", row.state);
        }
    }

    #[test]
    fn loads_are_grouped_by_state_and_primed_where_their_memory_needs_it() {
        for huge_pages in [true, false] {
            grouped_and_primed(huge_pages, Duration::ZERO);
        }
        // `--cold-idle`: cold loads wait instead of being primed.
        grouped_and_primed(true, Duration::from_millis(50));
    }

    /// A plan's loads, where keycodec's loads ask for huge pages (`huge_pages`) or not, each
    /// cold load waiting `idle` unprimed where that is not zero.
    fn grouped_and_primed(huge_pages: bool, idle: Duration) {
        let scratch = tempfile::tempdir().unwrap();
        let loads = std::sync::Mutex::new(Vec::new());
        let mut plan = Plan::empty();
        let file = small_file(&mut plan, (Kind::Pk, "rawbytes"), scratch.path());
        let cases = [
            (HALO2_NATIVE, State::Fresh, "checked"),
            ("rawbytes", State::Cold, "trusted"),
            (FLOOR, State::Fresh, "-"),
            ("rawbytes", State::Fresh, "trusted"),
            (HALO2_NATIVE, State::Cold, "checked"),
            ("rkyv", State::Warm, "trusted"),
            ("rkyv", State::Fresh, "checked"),
        ];
        for (backend, state, validation) in cases {
            let loads = &loads;
            plan.case(
                (Kind::Pk, backend, "RawBytes", validation, state),
                vec![file],
                Box::new(move |_, _| {
                    loads
                        .lock()
                        .unwrap()
                        .push((backend, state, false, Instant::now()));
                    // halo2's reader maps its key in small pages; keycodec's loads in huge
                    // pages where they ask for them.
                    let small = backend == HALO2_NATIVE || !huge_pages;
                    Ok(Sample {
                        rss_rise: Some(PRIMED_BYTES),
                        huge_pages: Some(if small { 0 } else { PRIMED_BYTES }),
                        ..loaded(1e-3)
                    })
                }),
            );
        }
        {
            let loads = &loads;
            plan.primed_by(Box::new(move |bytes| {
                // Twice what the primed load reads, up to the most a load in a new process
                // reads: every load here reads the one 64-byte file.
                assert_eq!(bytes, 64);
                loads
                    .lock()
                    .unwrap()
                    .push(("primer", State::Warm, true, Instant::now()));
                Ok(())
            }));
        }
        let mut runner = fixed_runner(3).idle_before_cold(idle);
        runner.huge_pages = huge_pages;
        let measured = runner.measure(&plan, Size(1 << 20)).unwrap();
        // Primers are not counted: one load a run, the floor's too.
        for row in &measured.rows {
            assert_eq!(row.read_runs.len(), 3, "{}", row.backend);
        }
        drop(plan);
        let loads = loads.into_inner().unwrap();
        // A primer runs before each load from the disk, and, where loads ask for huge
        // pages, each fresh load that is first of its state or follows a load in small
        // pages; before nothing else.
        let idles = !idle.is_zero();
        let primed_state =
            |state| (state == State::Cold && !idles) || (huge_pages && state == State::Fresh);
        let mut primers = 0;
        for (at, &(_, state, primer, began)) in loads.iter().enumerate() {
            let previous = at.checked_sub(1).and_then(|at| loads.get(at));
            if primer {
                primers += 1;
                let next = loads.get(at + 1).expect("a primer before a load");
                assert!(!next.2 && primed_state(next.1), "load {at} primes {next:?}");
                continue;
            }
            let new_group = previous.is_none_or(|previous| previous.1 != state);
            let after_small =
                previous.is_some_and(|previous| previous.0 == HALO2_NATIVE || !huge_pages);
            let primed = previous.is_some_and(|previous| previous.2);
            if primed_state(state) && (new_group || after_small) {
                assert!(primed, "load {at} unprimed: {loads:?}");
            }
            // A cold load that idles began at least `idle` after the load before it.
            if let (true, State::Cold, Some(previous)) = (idles, state, previous) {
                assert!(
                    began - previous.3 >= idle,
                    "load {at} did not idle: {loads:?}"
                );
            }
        }
        // At least one primer each run for each state primed.
        let states = usize::from(huge_pages) + usize::from(!idles);
        assert!(primers >= 3 * states, "{loads:?}");
        // Grouped by state: the primers aside, at most three groups a run.
        let others: Vec<State> = loads
            .iter()
            .filter(|load| !load.2)
            .map(|load| load.1)
            .collect();
        let changes = others.windows(2).filter(|pair| pair[0] != pair[1]).count();
        assert!(changes < 3 * 3, "{changes} changes of state: {loads:?}");
    }

    /// After the minimum of runs, a run measures the rows whose ratios are still wider than
    /// +-25%, with their references, and nothing else: a steady row keeps its first runs,
    /// a noisy one gets every run, and each ratio pairs the runs both its sides have.
    #[test]
    fn after_the_minimum_runs_only_the_rows_still_wide_are_measured() {
        let scratch = tempfile::tempdir().unwrap();
        let mut plan = Plan::empty();
        let file = small_file(&mut plan, (Kind::Pk, "rawbytes"), scratch.path());
        let mut case = |backend, validation, seconds| {
            timed_case(&mut plan, file, (Kind::Pk, backend, validation), seconds)
        };
        // Steady: 1 s against halo2's 2 s, every run. Noisy: 0.5 to 3 s against 2 s.
        let steady = case("rawbytes", "trusted", vec![1.0]);
        let steady_reference = case(HALO2_NATIVE, "trusted", vec![2.0]);
        let noisy = case("rkyv", "checked", vec![0.5, 3.0, 1.0, 2.5, 0.7, 2.0]);
        let noisy_reference = case(HALO2_NATIVE, "checked", vec![2.0]);
        plan.compare(steady, Some(steady_reference), None);
        plan.compare(noisy, Some(noisy_reference), None);
        let stopping = Stopping {
            warmup: 0,
            fixed: None,
            min_runs: 3,
            max_runs: 8,
            interval: 0.1,
            time_cap: Duration::from_secs(600),
        };
        let measured = Runner::new(stopping, false, false)
            .measure(&plan, Size(1 << 20))
            .unwrap();
        assert_eq!(measured.runs, 8, "{}", measured.stopped);
        assert!(
            measured
                .stopped
                .contains("5 of them of the widest rows only"),
            "{}",
            measured.stopped
        );
        let runs_of = |index: usize| measured.rows[index].read_run_numbers.clone();
        assert_eq!(runs_of(steady), [1, 2, 3]);
        assert_eq!(runs_of(steady_reference), [1, 2, 3]);
        assert_eq!(runs_of(noisy), (1..=8).collect::<Vec<_>>());
        assert_eq!(runs_of(noisy_reference), (1..=8).collect::<Vec<_>>());
        let steady_ratio = measured.rows[steady].speedup.unwrap();
        assert_eq!((steady_ratio.estimate, steady_ratio.runs), (2.0, 3));
        assert_eq!(measured.rows[noisy].speedup.unwrap().runs, 8);
        // The file is in no wide ratio (halo2 wrote none to compare its saves with): saved
        // in the first runs only.
        assert_eq!(measured.saves[0].save_run_numbers, [1, 2, 3]);
    }

    /// halo2's own reader's ratio to its floor is judged as keycodec's are: a noisy one is
    /// measured again, with its floor, after the minimum of runs, and a steady one is not.
    #[test]
    fn halo2s_own_ratio_to_its_floor_is_measured_until_it_is_narrow() {
        let scratch = tempfile::tempdir().unwrap();
        let mut plan = Plan::empty();
        let file = small_file(&mut plan, (Kind::Params, HALO2_NATIVE), scratch.path());
        let mut case = |backend, validation, seconds| {
            timed_case(
                &mut plan,
                file,
                (Kind::Params, backend, validation),
                seconds,
            )
        };
        // The floor 1 s at every visit; halo2's checked reader 2 to 6 s, its trusted one 3 s.
        let floor = case(FLOOR, "-", vec![1.0]);
        let noisy = case(HALO2_NATIVE, "checked", vec![2.0, 6.0, 3.0, 5.0, 2.5, 4.0]);
        let steady = case(HALO2_NATIVE, "trusted", vec![3.0]);
        plan.compare(noisy, None, Some(floor));
        plan.compare(steady, None, Some(floor));
        let stopping = Stopping {
            warmup: 0,
            fixed: None,
            min_runs: 3,
            max_runs: 6,
            interval: 0.1,
            time_cap: Duration::from_secs(600),
        };
        let measured = Runner::new(stopping, false, false)
            .measure(&plan, Size(1 << 20))
            .unwrap();
        let runs_of = |index: usize| measured.rows[index].read_run_numbers.clone();
        assert_eq!(
            runs_of(noisy),
            (1..=6).collect::<Vec<_>>(),
            "{}",
            measured.stopped
        );
        assert_eq!(runs_of(steady), [1, 2, 3]);
        assert_eq!(measured.rows[noisy].read_vs_floor.unwrap().runs, 6);
        assert!(runs_of(floor).contains(&6), "the floor measured with it");
    }

    /// A run measuring saves alone (no load's ratio wide) saves a small file three times, as
    /// every run does, and the loads are not run.
    #[test]
    fn a_run_of_saves_alone_saves_a_small_file_three_times() {
        let scratch = tempfile::tempdir().unwrap();
        let saves = std::sync::Mutex::new(Vec::new());
        let loads = AtomicUsize::new(0);
        let mut plan = Plan::empty();
        let mut file = |backend: &'static str, seconds: Vec<f64>| {
            let saves = &saves;
            let at = AtomicUsize::new(0);
            plan.file(
                (Kind::Params, backend, "RawBytes"),
                Box::new(move |path, _| {
                    std::fs::write(path, [0u8; 64]).map_err(|e| e.to_string())?;
                    saves.lock().unwrap().push(backend);
                    let save = at.fetch_add(1, Ordering::SeqCst);
                    Ok(Written {
                        seconds: seconds[save % seconds.len()],
                        unsynced: None,
                    })
                }),
                scratch.path(),
            )
        };
        // keycodec's saves swing (medians of three 1, 3, 0.3, 2, ...); halo2's do not.
        let ours = file(
            "rawbytes",
            vec![1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 0.3, 0.3, 0.3, 2.0],
        );
        let theirs = file(HALO2_NATIVE, vec![1.0]);
        plan.files[ours].reference = Some(theirs);
        plan.case(
            (Kind::Params, "rawbytes", "RawBytes", "trusted", State::Warm),
            vec![ours],
            Box::new(|_, _| {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok(loaded(1e-3))
            }),
        );
        let stopping = Stopping {
            warmup: 0,
            fixed: None,
            min_runs: 2,
            max_runs: 4,
            interval: 0.1,
            time_cap: Duration::from_secs(600),
        };
        let measured = Runner::new(stopping, false, false)
            .measure(&plan, Size(1 << 20))
            .unwrap();
        drop(plan);
        assert_eq!(measured.runs, 4, "{}", measured.stopped);
        // The load (no reference: no ratio) in the first two runs only.
        assert_eq!(loads.load(Ordering::SeqCst), 2);
        let saves = saves.into_inner().unwrap();
        for backend in ["rawbytes", HALO2_NATIVE] {
            let count = saves.iter().filter(|&&saved| saved == backend).count();
            assert_eq!(count, 4 * SAVES_OF_SMALL_FILES, "{backend}: {saves:?}");
        }
        let row = measured.saves.first().unwrap();
        assert_eq!(row.save_run_numbers, [1, 2, 3, 4]);
    }
}
