//! Runs a [`Plan`]: run after run, every file written, then every case timed (floors
//! twice, small files saved again a third and two thirds in), in an order rotated each run,
//! until every paired ratio is known to the interval asked for (or the runs or the time
//! allowed are spent); then one row per case and per file.

use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use keycodec_core::Size;

use crate::exec::Sample;
use crate::measure::{rss, Written};
use crate::plan::{durable_save_name, Case, File, Plan, State, FLOOR, HALO2_NATIVE};
use crate::stats::{median, paired, rotation, Summary};
use crate::{Row, RowId, SaveRow};

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
    /// At most this many.
    pub max_runs: usize,
    /// Stop once every paired ratio's 95% interval is within +-this (0.1: +-10%).
    pub interval: f64,
    /// Or before a run that would end past this length of the whole harness run (every
    /// size, every plan), as the run just made says: checked after each counted run, before
    /// the minimum of runs. Each plan still gets one run.
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
        }
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
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); plan.cases.len()];
        let mut run = 0;
        let mut warming = self.stopping.warmup;
        let stopped = loop {
            let run_started = Instant::now();
            // A warm-up run loads each file once, by the first case that reads it: enough to
            // bring every file and the child's binary into the page cache as later runs find
            // them, at a fraction of a run.
            let mut warmed = vec![false; plan.files.len()];
            let label = pass(run, warming);
            self.write(plan, run, &label, buffer, &mut saved, |_, _| true)?;
            let order = visiting_order(plan, run);
            let mut before = None;
            for (at, &index) in order.iter().enumerate() {
                // A small file's later saves, a third and two thirds into the run.
                if (1..SAVES_OF_SMALL_FILES)
                    .any(|save| at == order.len() * save / SAVES_OF_SMALL_FILES)
                {
                    self.write(plan, run, &label, buffer, &mut saved, |file, bytes| {
                        saves_per_run(file, bytes) > 1
                    })?;
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
                let paths = paths_of(plan, case);
                // A new process's load after another state's, or after a load that left its
                // memory in small pages: primed (see [`needs_priming`]).
                if warming == 0 && needs_priming(before, case.state) {
                    if let Some(primer) = primer(plan, &saved.bytes) {
                        primer.run(&paths_of(plan, primer), buffer)?;
                    }
                }
                self.drop_if_cold(case, &paths);
                let cached_before = cached_share(&paths);
                self.harness_peak = self.harness_peak.max(rss::peak());
                let mut sample = case.run(&paths, buffer)?;
                sample.cached_before = cached_before;
                before = Some(After::of(case.state, &sample));
                taken.push(sample);
                self.harness_peak = self.harness_peak.max(rss::peak());
            }
            if warming > 0 {
                warming -= 1;
                saved.times.iter_mut().for_each(Vec::clear);
                samples.iter_mut().for_each(Vec::clear);
                continue;
            }
            run += 1;
            let (rows, saves) = rows(plan, buffer, &saved, &samples);
            let stop = self.stop(run, &rows, &saves, run_started.elapsed());
            if run == 1 {
                self.say(&self.estimate(run_started.elapsed()));
            }
            if self.log {
                eprintln!(
                    "run {run} done in {:.0} s ({:.0} s in all): {}",
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
        let (rows, saves) = rows(plan, buffer, &saved, &samples);
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

    /// Writes each file of `plan` that `which` picks (given the file and the bytes it held
    /// last), in an order rotated each run (`label` names the run to the progress bar),
    /// adding its timings to `saved`.
    ///
    /// # Errors
    ///
    /// The write's error, as text.
    fn write(
        &self,
        plan: &Plan<'_>,
        run: usize,
        label: &str,
        buffer: Size,
        saved: &mut Saved,
        which: impl Fn(&File<'_>, u64) -> bool,
    ) -> Result<(), String> {
        for index in rotation(plan.files.len(), run) {
            let (Some(file), Some(times), Some(size)) = (
                plan.files.get(index),
                saved.times.get_mut(index),
                saved.bytes.get_mut(index),
            ) else {
                continue;
            };
            if !which(file, *size) {
                continue;
            }
            self.bar
                .set_message(format!("{label}: writing {}", file.name()));
            // Unless `--replace`, every save goes to a path with no file.
            if !self.replace {
                file.remove()?;
            }
            let (written, bytes) = file.write(buffer)?;
            times.push(written);
            *size = bytes;
        }
        Ok(())
    }

    /// Drops the cached pages of `paths` if `case` reads them cold.
    fn drop_if_cold(&mut self, case: &Case<'_>, paths: &[&Path]) {
        if self.cold || case.state == State::Cold {
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
    /// would end before the time cap, so the runs still to come are those that fit in it.
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
                let verdict = if runs >= wanted {
                    format!("{runs} runs at most in the time cap")
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
            "run 1 took {per_run:.0} s; {verdict}; its runs end about {:.0} s into the whole run",
            elapsed + (runs - 1) as f64 * per_run
        )
    }

    /// Why to stop after `runs` runs, the last of which took `last`, or `None` to run again.
    fn stop(&self, runs: usize, rows: &[Row], saves: &[SaveRow], last: Duration) -> Option<String> {
        let stopping = &self.stopping;
        if let Some(fixed) = stopping.fixed {
            return (runs >= fixed).then(|| format!("{fixed} runs, as asked"));
        }
        // keycodec's ratios to halo2 (not halo2's own durability cost, which only informs).
        let half_widths: Vec<f64> = rows
            .iter()
            .filter_map(|row| row.speedup)
            .chain(
                saves
                    .iter()
                    .filter(|save| save.backend != HALO2_NATIVE)
                    .filter_map(|save| save.vs_reference),
            )
            .map(|ratio| ratio.half_width())
            .collect();
        let widest = half_widths.iter().copied().fold(0.0, f64::max);
        // The cap bounds the whole run, the minimum of runs included: no run is started that
        // the last one says would end past it.
        if self.started.elapsed() + last >= stopping.time_cap {
            let unsound = half_widths
                .iter()
                .filter(|&&half_width| half_width > SOUND_HALF_WIDTH)
                .count();
            // At the most runs allowed, more time would add none.
            let advice = if unsound == 0 || runs >= stopping.max_runs {
                String::new()
            } else {
                format!(
                    "; {unsound} of {} wider than +-{:.0}%: a longer --time-cap adds runs",
                    half_widths.len(),
                    SOUND_HALF_WIDTH * 100.0
                )
            };
            return Some(format!(
                "time cap ({:.0} s for the whole run; another run would end past it) after \
                 {runs} runs; widest interval +-{:.0}%{advice}",
                stopping.time_cap.as_secs_f64(),
                widest * 100.0
            ));
        }
        if runs < stopping.min_runs {
            return None;
        }
        if widest <= stopping.interval {
            return Some(format!(
                "every paired ratio's 95% interval within +-{:.0}% (widest +-{:.0}%)",
                stopping.interval * 100.0,
                widest * 100.0
            ));
        }
        if runs >= stopping.max_runs {
            return Some(format!(
                "{runs} runs, the most allowed; widest interval +-{:.0}%",
                widest * 100.0
            ));
        }
        None
    }
}

/// The order in which run `run` takes the plan's cases (indices, a case visited several
/// times a run as often): grouped by state, the groups' order and the order within each
/// rotated run by run ([`rotation`]).
///
/// Grouped because a new process's load depends on what the machine did just before. This
/// machine's balloon reports memory that has been free for about two seconds to its host,
/// which takes it back; touching such memory again costs 1.5-2.5x as much as touching
/// memory just freed (a halo2-lib key of k = 18 loaded fresh: 0.34-0.37 s one after the
/// other, 0.59-0.72 s after a 2-3 s pause; from the disk, 0.70-0.78 s against 1.7-2.3 s).
/// Loads of one state taken one after the other meet the memory their predecessor freed;
/// interleaved with warm loads in this process, saves and page-cache drops, each met
/// whatever those had left.
fn visiting_order(plan: &Plan<'_>, run: usize) -> Vec<usize> {
    let groups: Vec<Vec<usize>> = [State::Warm, State::Fresh, State::Cold]
        .into_iter()
        .map(|state| group_visits(plan, state))
        .filter(|group| !group.is_empty())
        .collect();
    rotation(groups.len(), run)
        .filter_map(|group| groups.get(group))
        .flat_map(|group| rotation(group.len(), run).filter_map(|at| group.get(at).copied()))
        .collect()
}

/// The visits of `state`'s cases in plan order: each case visited once a run, and between
/// them, spread evenly, the visits of those visited several times (the floors), a round of
/// each before the next round.
fn group_visits(plan: &Plan<'_>, state: State) -> Vec<usize> {
    let of_state = || {
        plan.cases
            .iter()
            .enumerate()
            .filter(move |(_, case)| case.state == state)
    };
    let mut visits: Vec<usize> = of_state()
        .filter(|(_, case)| case.visits == 1)
        .map(|(index, _)| index)
        .collect();
    let rounds = of_state().map(|(_, case)| case.visits).max().unwrap_or(1);
    let repeated: Vec<usize> = (0..rounds)
        .flat_map(|round| {
            of_state()
                .filter(move |(_, case)| case.visits > 1 && round < case.visits)
                .map(|(index, _)| index)
        })
        .collect();
    // From the last, so that each position counts single visits only.
    let singles = visits.len();
    for (at, &index) in repeated.iter().enumerate().rev() {
        let position = ((at + 1) * singles / (repeated.len() + 1)).min(visits.len());
        visits.insert(position, index);
    }
    visits
}

/// What a load left the memory in, as far as priming the next asks.
#[derive(Clone, Copy)]
struct After {
    state: State,
    /// It took at least [`PRIMED_BYTES`], none of it in huge pages.
    small_pages: bool,
}

impl After {
    fn of(state: State, sample: &Sample) -> Self {
        After {
            state,
            small_pages: sample.huge_pages == Some(0)
                && sample.rss_rise.is_some_and(|rise| rise >= PRIMED_BYTES),
        }
    }
}

/// The widest a ratio's interval may be for a claim (half its width over its median, the
/// `+-` the report prints): wider, a time-capped run says how many are and that more runs
/// would narrow them. On this project's 2-core machine, default runs of 7 runs (5 minutes)
/// left 2 to 6 of their 19 ratios wider, two runs of 16 and 17 (10 minutes) none.
const SOUND_HALF_WIDTH: f64 = 0.25;

/// A load that took this much memory in small pages is followed by a primer.
const PRIMED_BYTES: u64 = 256 << 20;

/// Whether a load in `state`, after `before`, is first primed: a load in a new process that
/// is the first of its state in the run, or follows a load that took its memory in small
/// pages (halo2's reader; every load from the disk), so that it meets memory a load of
/// keycodec's has just freed, as the rest of its group do (see [`visiting_order`]). A load
/// asking for huge pages right after one in small pages waited for memory the host had
/// taken back (a floor of the k = 18 key: 0.43-0.71 s after halo2's trusted read,
/// 0.29-0.39 s after a load of keycodec's).
fn needs_priming(before: Option<After>, state: State) -> bool {
    state != State::Warm && before.is_none_or(|before| before.state != state || before.small_pages)
}

/// The load run untimed to prime the memory a new process meets: of keycodec's loads in a
/// new process, preferring one with its files in the page cache (a load from the disk would
/// only be slower), then one of a single file with its values trusted (the cheapest, as a
/// cold start of two files checked took twice as long for the same memory), then the
/// largest by `bytes` (each file's last save); not a floor (a cold floor takes its ways in
/// turn by visit).
fn primer<'p, 'a>(plan: &'p Plan<'a>, bytes: &[u64]) -> Option<&'p Case<'a>> {
    let reads =
        |case: &Case<'_>| -> u64 { case.files.iter().filter_map(|&file| bytes.get(file)).sum() };
    plan.cases
        .iter()
        .filter(|case| case.state != State::Warm)
        .filter(|case| case.backend != HALO2_NATIVE && case.backend != FLOOR)
        .max_by_key(|case| {
            (
                case.state == State::Fresh,
                case.files.len() == 1 && case.validation == "trusted",
                reads(case),
            )
        })
}

/// The paths of the files `case` reads.
fn paths_of<'p>(plan: &'p Plan<'_>, case: &Case<'_>) -> Vec<&'p Path> {
    case.files
        .iter()
        .filter_map(|&file| plan.files.get(file).map(|f| f.path.as_path()))
        .collect()
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

/// Every file's saves so far: each save's timings, in run order, and the bytes it held last.
struct Saved {
    times: Vec<Vec<Written>>,
    bytes: Vec<u64>,
}

/// Saves of a small local file a run: its first, then one a third and one two thirds into
/// the run, between loads of other files (so that no save meets the bytes of the one before
/// in the processor's caches). A save of a few MB is mostly a sync's wait, which swings by
/// 2-3x from one to the next on a shared disk: the median of three keeps one slow sync from
/// deciding a run.
const SAVES_OF_SMALL_FILES: usize = 3;

/// A local file under this many bytes is saved [`SAVES_OF_SMALL_FILES`] times a run.
const SMALL_SAVE: u64 = 64 << 20;

/// How many times `file`, last `bytes` long, is saved a run: a local file shown in the saves
/// table and under [`SMALL_SAVE`] several times, anything else (an object behind a link, a
/// key) once.
fn saves_per_run(file: &File<'_>, bytes: u64) -> usize {
    let local = !file.path.as_os_str().is_empty();
    if local && file.shown && bytes < SMALL_SAVE {
        SAVES_OF_SMALL_FILES
    } else {
        1
    }
}

/// The median of each run's `saves` timings (a file saved several times a run has its
/// timings of one run next to each other).
fn median_per_run(timings: &[f64], saves: usize) -> Vec<f64> {
    timings.chunks(saves.max(1)).map(median).collect()
}

/// For each run, the fastest of the `visits` samples of that run and of the runs on either
/// side of it (a case visited several times a run has its samples of one run next to each
/// other): a floor that follows the disk as it drifts over several runs, but not one run's
/// slow visits (docs/harness.md says why).
fn fastest_near_each_run(samples: &[f64], visits: usize) -> Vec<f64> {
    let runs: Vec<f64> = samples
        .chunks(visits.max(1))
        .map(|run| run.iter().copied().fold(f64::INFINITY, f64::min))
        .collect();
    (0..runs.len())
        .map(|run| {
            runs.get(run.saturating_sub(1)..(run + 2).min(runs.len()))
                .unwrap_or_default()
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min)
        })
        .collect()
}

/// For each run, the sum over `floors` of each floor's fastest visit in that run or the runs
/// either side ([`fastest_near_each_run`]): the floor of a row reading several files (a cold
/// start reads the parameters and the key, one after the other). `None` without floors.
fn floors_near_each_run(
    plan: &Plan<'_>,
    floors: &[usize],
    seconds: impl Fn(usize) -> Vec<f64>,
) -> Option<Vec<f64>> {
    floors
        .iter()
        .map(|&floor| {
            let visits = plan.cases.get(floor).map_or(1, |case| case.visits);
            fastest_near_each_run(&seconds(floor), visits)
        })
        .reduce(|sum, next| sum.iter().zip(&next).map(|(a, b)| a + b).collect())
}

/// How the progress bar names a run: `warm-up` or its number.
fn pass(run: usize, warming: usize) -> String {
    if warming > 0 {
        "warm-up".to_owned()
    } else {
        (run + 1).to_string()
    }
}

/// The rows of `plan` after the runs so far.
///
/// Long on purpose: a load row's fields, then a save row's, each field computed where it is
/// set.
fn rows(
    plan: &Plan<'_>,
    buffer: Size,
    saved: &Saved,
    samples: &[Vec<Sample>],
) -> (Vec<Row>, Vec<SaveRow>) {
    let seconds = |index: usize| -> Vec<f64> {
        samples
            .get(index)
            .map(|taken| taken.iter().map(|sample| sample.seconds).collect())
            .unwrap_or_default()
    };
    let id = |index: usize| {
        plan.cases.get(index).map(|case| RowId {
            backend: case.backend,
            mode: case.mode,
            validation: case.validation,
        })
    };
    let mut rows = Vec::new();
    for (index, case) in plan.cases.iter().enumerate() {
        let ours = seconds(index);
        let taken = samples.get(index).map(Vec::as_slice).unwrap_or_default();
        let read = Summary::of(&ours);
        let file_bytes = case
            .files
            .iter()
            .filter_map(|&f| saved.bytes.get(f))
            .sum::<u64>();
        // The floors of the files it reads (a cold start's two), added.
        let floor_min = (!case.floors.is_empty()).then(|| {
            case.floors
                .iter()
                .map(|&floor| Summary::of(&seconds(floor)).min_s)
                .sum::<f64>()
        });
        // Each run's load over its floor's fastest visit in that run or the runs either side:
        // the disk and the machine drift over the runs, so a load is compared with the floor
        // of its moment, not with the luckiest floor of all the runs.
        let vs_floor = floors_near_each_run(plan, &case.floors, seconds)
            .and_then(|floor| paired(&ours, &floor));
        let below_floor = vs_floor.is_some_and(|ratio| ratio.high < 1.0);
        rows.push(Row {
            kind: case.kind,
            backend: case.backend,
            mode: case.mode,
            validation: case.validation,
            state: case.state.name(),
            buffer_bytes: buffer.0,
            read_s: read.median_s,
            read_min_s: read.min_s,
            read_spread: read.spread,
            read_runs: ours.clone(),
            file_bytes,
            read_gbps: file_bytes as f64 / read.median_s / 1e9,
            floor_s: floor_min,
            read_vs_floor: vs_floor.filter(|_| !below_floor),
            below_floor,
            speedup: case
                .reference
                .and_then(|reference| paired(&seconds(reference), &ours)),
            reference: case.reference.and_then(id),
            peak_rss_bytes: taken.iter().filter_map(|sample| sample.rss_rise).max(),
            huge_pages_runs: taken
                .iter()
                .map(|sample| sample.huge_pages)
                .collect::<Option<Vec<u64>>>()
                .unwrap_or_default(),
            compact_stalls: taken
                .iter()
                .map(|sample| sample.compact_stalls)
                .sum::<Option<u64>>(),
            cached_before: taken
                .iter()
                .map(|sample| sample.cached_before)
                .collect::<Option<Vec<f64>>>()
                .map(|shares| shares.into_iter().fold(0.0, f64::max)),
            verified: !taken.is_empty() && taken.iter().all(|sample| sample.verified),
        });
    }
    // Each run's median save (see [`saves_per_run`]), durable or short of it.
    let per_run = |index: usize, timing: &dyn Fn(&Written) -> Option<f64>| -> Vec<f64> {
        let (Some(file), Some(written)) = (plan.files.get(index), saved.times.get(index)) else {
            return Vec::new();
        };
        let saves = saves_per_run(file, saved.bytes.get(index).copied().unwrap_or(0));
        let timings: Vec<f64> = written.iter().filter_map(timing).collect();
        median_per_run(&timings, saves)
    };
    let durable = |index: usize| per_run(index, &|written| Some(written.seconds));
    let mut saves = Vec::new();
    for (index, file) in plan.files.iter().enumerate().filter(|(_, f)| f.shown) {
        let ours = durable(index);
        let summary = Summary::of(&ours);
        let bytes = saved.bytes.get(index).copied().unwrap_or(0);
        let reference = file
            .reference
            .and_then(|r| plan.files.get(r).map(|f| (r, f)));
        saves.push(SaveRow {
            kind: file.kind,
            backend: file.backend,
            mode: file.mode,
            durable: true,
            buffer_bytes: buffer.0,
            save_s: summary.median_s,
            save_min_s: summary.min_s,
            save_spread: summary.spread,
            save_runs: ours.clone(),
            file_bytes: bytes,
            vs_reference: reference.and_then(|(r, _)| paired(&ours, &durable(r))),
            reference: reference.map(|(_, f)| RowId {
                backend: f.backend,
                mode: f.mode,
                validation: durable_save_name(f.backend),
            }),
        });
        // A row for what the saves also timed short of durable, where they did: halo2's
        // write before its sync; an upload behind a link to its last part.
        let plain = per_run(index, &|written| written.unsynced);
        if !plain.is_empty() {
            let summary = Summary::of(&plain);
            saves.push(SaveRow {
                kind: file.kind,
                backend: file.backend,
                mode: file.mode,
                durable: false,
                buffer_bytes: buffer.0,
                save_s: summary.median_s,
                save_min_s: summary.min_s,
                save_spread: summary.spread,
                vs_reference: paired(&plain, &ours),
                reference: Some(RowId {
                    backend: file.backend,
                    mode: file.mode,
                    validation: durable_save_name(file.backend),
                }),
                save_runs: plain,
                file_bytes: bytes,
            });
        }
    }
    (rows, saves)
}

/// One finished row as a log line: what it read, how long it took, and its ratio to the
/// reference it is paired with.
fn row_line(row: &Row) -> String {
    let ratio = match (&row.speedup, &row.reference) {
        (Some(ratio), Some(reference)) => format!(
            ", {ratio}x {} {} {}",
            reference.backend, reference.mode, reference.validation
        ),
        _ => String::new(),
    };
    format!(
        "row {:?} {} {} {} {}: {:.3} s over {} runs{ratio}",
        row.kind,
        row.backend,
        row.mode,
        row.validation,
        row.state,
        row.read_s,
        row.read_runs.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Kind, FLOOR_VISITS};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Measures `plan` in exactly `runs` runs, no warm-up.
    fn measure_runs(plan: &Plan<'_>, runs: usize) -> Measured {
        let stopping = Stopping {
            warmup: 0,
            fixed: Some(runs),
            min_runs: runs,
            max_runs: runs,
            interval: 0.1,
            time_cap: Duration::from_secs(60),
        };
        Runner::new(stopping, false, false)
            .measure(plan, Size(1 << 20))
            .unwrap()
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
                Box::new(|_, _| {
                    Ok(Sample {
                        seconds: 1e-3,
                        verified: true,
                        rss_rise: None,
                        huge_pages: None,
                        compact_stalls: None,
                        cached_before: None,
                    })
                }),
            );
        }
        let measured = measure_runs(&plan, 2);
        assert_eq!(saves.load(Ordering::SeqCst), 2 * SAVES_OF_SMALL_FILES);
        let row = measured.saves.first().unwrap();
        // Run 1 saved in 1, 2, 3 ms; run 2 in 4, 5, 6: one median each.
        assert_eq!(row.save_runs, vec![2e-3, 5e-3]);
    }

    #[test]
    fn loads_are_grouped_by_state_and_primed_after_small_pages() {
        let scratch = tempfile::tempdir().unwrap();
        let loads = std::sync::Mutex::new(Vec::new());
        let mut plan = Plan::empty();
        let file = plan.file(
            (Kind::Pk, "rawbytes", "RawBytes"),
            Box::new(|path, _| {
                std::fs::write(path, [0u8; 64]).map_err(|e| e.to_string())?;
                Ok(Written {
                    seconds: 1e-3,
                    unsynced: None,
                })
            }),
            scratch.path(),
        );
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
                    loads.lock().unwrap().push((backend, state));
                    // halo2's reader maps its key in small pages, keycodec's loads in huge.
                    let small = backend == HALO2_NATIVE;
                    Ok(Sample {
                        seconds: 1e-3,
                        verified: true,
                        rss_rise: Some(PRIMED_BYTES),
                        huge_pages: Some(if small { 0 } else { PRIMED_BYTES }),
                        compact_stalls: None,
                        cached_before: None,
                    })
                }),
            );
        }
        let measured = measure_runs(&plan, 3);
        // The primer's loads are not counted: one load a run (the floor two).
        for row in &measured.rows {
            let visits = if row.backend == FLOOR {
                FLOOR_VISITS
            } else {
                1
            };
            assert_eq!(row.read_runs.len(), 3 * visits, "{}", row.backend);
        }
        drop(plan);
        let loads = loads.into_inner().unwrap();
        // The primer is keycodec's fresh load of trusted values (of two reading the same
        // file, the cheaper). It runs before each new-process load that is first of its
        // state or follows halo2's reader.
        let primer = ("rawbytes", State::Fresh);
        for (at, &load) in loads.iter().enumerate() {
            let previous = at.checked_sub(1).and_then(|at| loads.get(at));
            let new_group = previous.is_none_or(|previous| previous.1 != load.1);
            let after_halo2 = previous.is_some_and(|previous| previous.0 == HALO2_NATIVE);
            let primed = previous == Some(&primer);
            if load.1 != State::Warm && load != primer && (new_group || after_halo2) && !primed {
                panic!("load {at} unprimed: {loads:?}");
            }
        }
        // Each run: 8 timed loads (the floor twice) and at least one primer for each of
        // the two new-process states.
        assert!(loads.len() >= 3 * (8 + 2), "{loads:?}");
        // Grouped by state: the primer's fresh load aside, at most three groups a run.
        let others: Vec<State> = loads
            .iter()
            .filter(|&&load| load != primer)
            .map(|load| load.1)
            .collect();
        let changes = others.windows(2).filter(|pair| pair[0] != pair[1]).count();
        assert!(changes < 3 * 3, "{changes} changes of state: {loads:?}");
    }

    #[test]
    fn a_load_is_compared_with_the_floor_of_its_moment() {
        // Two visits a run. Run 2's floor visits are both slow (noise); from run 4 on the
        // disk is slower for the floor and the load alike (drift).
        let floor = [1.0, 1.2, 1.9, 2.1, 1.0, 1.1, 1.5, 1.6, 1.5, 1.5, 1.6, 1.5];
        let nearest = fastest_near_each_run(&floor, 2);
        assert_eq!(nearest, vec![1.0, 1.0, 1.0, 1.0, 1.5, 1.5]);
        let loads = [1.05, 1.05, 1.05, 1.6, 1.6, 1.6];
        let ratio = paired(&loads, &nearest).unwrap();
        // The noisy run reads 1.05x, not 0.55x; the drift's runs 1.07x once it has lasted
        // two runs (against the fastest floor of all runs: 1.6x).
        assert!((ratio.estimate - 1.06).abs() < 0.02, "{ratio:?}");
        assert!(ratio.low > 1.0, "{ratio:?}");
    }
}
