//! The rows of a plan's samples: a load row per case, its ratios paired run by run with its
//! reference and its floor, and a save row per file.

use crate::exec::Sample;
use crate::measure::Written;
use crate::plan::{durable_save_name, File, Plan};
use crate::stats::{median, paired, Summary};
use crate::{Row, RowId, SaveRow};
use keycodec_core::Size;

/// Every file's saves so far: each save's timings, in run order, and the bytes it held last.
pub(super) struct Saved {
    pub(super) times: Vec<Vec<Written>>,
    pub(super) bytes: Vec<u64>,
}

/// Saves of a small local file a run: its first, then one a third and one two thirds into
/// the run, between loads of other files (so that no save meets the bytes of the one before
/// in the processor's caches). A save of a few MB is mostly a sync's wait, which swings by
/// 2-3x from one to the next on a shared disk: the median of three keeps one slow sync from
/// deciding a run.
pub(super) const SAVES_OF_SMALL_FILES: usize = 3;

/// A local file under this many bytes is saved [`SAVES_OF_SMALL_FILES`] times a run.
const SMALL_SAVE: u64 = 64 << 20;

/// How many times `file`, last `bytes` long, is saved a run: a local file shown in the saves
/// table and under [`SMALL_SAVE`] several times, anything else (an object behind a link, a
/// key) once.
pub(super) fn saves_per_run(file: &File<'_>, bytes: u64) -> usize {
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

/// The rows of `plan` after the runs so far.
///
/// Long on purpose: a load row's fields, then a save row's, each field computed where it is
/// set.
pub(super) fn rows(
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
pub(super) fn row_line(row: &Row) -> String {
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
