//! The rows of a plan's samples: a load row per case, its ratios paired run by run with its
//! reference and its floor, and a save row per file.

use super::by_run::{median_per_run, over_floors, paired_by_run, ByRun, FloorVisit, Floors};
use crate::exec::Sample;
use crate::measure::cpu::CpuUse;
use crate::measure::Written;
use crate::plan::{durable_save_name, Case, File, Plan, State, FLOOR, HALO2_NATIVE};
use crate::stats::{slowed, Ratio, Summary};
use crate::{Row, RowId, SaveRow};
use keycodec_core::Size;

/// Every file's saves so far, in run order: each save's run and timings, and the bytes the
/// file held last.
pub(super) struct Saved {
    pub(super) times: Vec<Vec<(usize, Written)>>,
    pub(super) bytes: Vec<u64>,
}

/// A load timed in run `run` (runs count from 1).
pub(super) struct Taken {
    pub(super) run: usize,
    pub(super) sample: Sample,
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

/// How far below its floor a load's interval must lie to say it beat the floor (a
/// measurement error): a load reading as its floor reads ties with it, and its ratio's
/// interval then lies wholly below 1 as often as wholly above. At five runs the interval is
/// the range of the five run-by-run ratios, all below 1 one time in 32 for a ratio at 1; a
/// default run has about ten rows at their floor (cold keys, parameters and starts), so
/// some row read `BELOW` in 3 of the last 4 default runs and in 3 of 12 runs from the disk in
/// one session, while cold key loads over the in-order visit of the same run were 1.008x
/// (the median of 638 load-runs). A load more than this fraction faster than its floor
/// beyond the noise is an error; one within it, a tie.
pub(super) const FLOOR_TIE: f64 = 0.05;

/// Whether a load's ratio to its floor says it beat the floor beyond the noise and the tie
/// ([`FLOOR_TIE`]): its interval wholly below `1 - FLOOR_TIE`. A ratio of one run has no
/// interval ([`Ratio::has_interval`]) and beats nothing: one load against one floor's load is
/// one draw of the noise (four rows of a one-run default table read `BELOW` that way).
fn beats_its_floor(ratio: &Ratio) -> bool {
    ratio.has_interval() && ratio.high < 1.0 - FLOOR_TIE
}

/// Each load of case `index`, with its run.
fn loads_by_run(samples: &[Vec<Taken>], index: usize) -> ByRun {
    samples
        .get(index)
        .map(|taken| {
            taken
                .iter()
                .map(|taken| (taken.run, taken.sample.seconds))
                .collect()
        })
        .unwrap_or_default()
}

/// Each load of case `index` that the kernel did not slow ([`slowed`], of its system time a
/// page fault), with its run.
fn steady_loads(samples: &[Vec<Taken>], index: usize) -> ByRun {
    let taken = samples.get(index).map(Vec::as_slice).unwrap_or_default();
    let costs: Vec<Option<f64>> = taken
        .iter()
        .map(|taken| taken.sample.cpu.as_ref().and_then(CpuUse::fault_cost_us))
        .collect();
    taken
        .iter()
        .zip(slowed(&costs))
        .filter(|&(_, slowed)| !slowed)
        .map(|(taken, _)| (taken.run, taken.sample.seconds))
        .collect()
}

/// Floor `index`'s visits, each with its way's index among the ways it took (`by_way`;
/// otherwise all one way).
fn floor_visits(samples: &[Vec<Taken>], index: usize, by_way: bool) -> Vec<FloorVisit> {
    let mut ways = Vec::new();
    let taken = samples.get(index).map(Vec::as_slice).unwrap_or_default();
    taken
        .iter()
        .map(|taken| {
            let way = match taken.sample.way.filter(|_| by_way) {
                Some(way) => ways
                    .iter()
                    .position(|&seen| seen == way)
                    .unwrap_or_else(|| {
                        ways.push(way);
                        ways.len() - 1
                    }),
                None => 0,
            };
            (taken.run, taken.sample.seconds, way)
        })
        .collect()
}

/// Of the shares of a row's files in the page cache as its loads began, the one farthest from
/// what its loads promise: the largest where they read from the disk (`cold`), else the
/// smallest; `None` without loads or where a share is not known.
fn farthest_share(shares: impl Iterator<Item = Option<f64>>, cold: bool) -> Option<f64> {
    let shares: Vec<f64> = shares.collect::<Option<_>>()?;
    let fold = if cold { f64::max } else { f64::min };
    shares.into_iter().reduce(fold)
}

/// Whether `case`'s loads read its files from the disk: a cold case's, and every case's
/// under `--cold` (`every_cold`).
pub(super) fn reads_cold(case: &Case<'_>, every_cold: bool) -> bool {
    every_cold || case.state == State::Cold
}

/// Case `index`'s ratios, run by run: its reference's load over its own (the speedup), and
/// its load over its floors' (`every_cold`: `--cold`, every case read from the disk).
fn load_ratios(
    plan: &Plan<'_>,
    samples: &[Vec<Taken>],
    index: usize,
    every_cold: bool,
) -> (Option<Ratio>, Option<Ratio>) {
    let Some(case) = plan.cases.get(index) else {
        return (None, None);
    };
    let ours = loads_by_run(samples, index);
    let speedup = case
        .reference
        .and_then(|reference| paired_by_run(&loads_by_run(samples, reference), &ours));
    // Each run's load over its floor near that run: the disk and the machine drift over the
    // runs, so a load is compared with the floor of its moment, not with the luckiest floor
    // of all the runs.
    // A floor reads from the disk as its case does, and from there its ways take turns by
    // visit (`crate::exec::floor`), each way compared with the other.
    let by_way = reads_cold(case, every_cold);
    let floors: Floors = case
        .floors
        .iter()
        .map(|&floor| floor_visits(samples, floor, by_way))
        .collect();
    let vs_floor = over_floors(&ours, &floors);
    (speedup, vs_floor)
}

/// File `index`'s saves, each run's median, durable (`timing` gives a save's seconds) or
/// short of it.
fn saves_by_run(saved: &Saved, index: usize, timing: &dyn Fn(&Written) -> Option<f64>) -> ByRun {
    let timings: ByRun = saved
        .times
        .get(index)
        .map(|written| {
            written
                .iter()
                .filter_map(|(run, written)| timing(written).map(|seconds| (*run, seconds)))
                .collect()
        })
        .unwrap_or_default();
    median_per_run(&timings)
}

/// File `index`'s durable saves, each run's median.
fn durable_saves(saved: &Saved, index: usize) -> ByRun {
    saves_by_run(saved, index, &|written| Some(written.seconds))
}

/// A ratio the runs are judged by, and what is measured for it: the cases and files whose
/// timings it pairs, the first the row it is about.
pub(super) struct Claim {
    pub(super) ratio: Ratio,
    /// The runs the row it is about was measured in. `--max-runs` bounds these, not the
    /// ratio's runs: those are only the runs every side was measured in, and a row whose
    /// floor or reference missed one of its runs would otherwise be measured again past the
    /// bound.
    pub(super) runs: usize,
    pub(super) cases: Vec<usize>,
    pub(super) files: Vec<usize>,
}

/// The ratios a run is judged by: each keycodec load's over its reference's (halo2's reader;
/// a remote load's download then load), each load's over its floor (halo2's readers' too:
/// every load row prints it), and each keycodec save's over halo2's write and sync (not a
/// save's plain write or an upload's last part against the whole, which only inform, as
/// halo2's own durability does). `every_cold`: `--cold`, every case read from the disk.
pub(super) fn claims(
    plan: &Plan<'_>,
    saved: &Saved,
    samples: &[Vec<Taken>],
    every_cold: bool,
) -> Vec<Claim> {
    let mut claims = Vec::new();
    for (index, case) in plan.cases.iter().enumerate() {
        if case.backend == FLOOR {
            continue;
        }
        let (speedup, vs_floor) = load_ratios(plan, samples, index, every_cold);
        let runs = median_per_run(&loads_by_run(samples, index)).len();
        if let (Some(ratio), Some(reference)) = (speedup, case.reference) {
            claims.push(Claim {
                ratio,
                runs,
                cases: vec![index, reference],
                files: Vec::new(),
            });
        }
        if let Some(ratio) = vs_floor.filter(|ratio| !beats_its_floor(ratio)) {
            claims.push(Claim {
                ratio,
                runs,
                cases: std::iter::once(index)
                    .chain(case.floors.iter().copied())
                    .collect(),
                files: Vec::new(),
            });
        }
    }
    for (index, file) in plan.files.iter().enumerate() {
        let Some(reference) = file.reference.filter(|_| file.shown) else {
            continue;
        };
        if file.backend == HALO2_NATIVE {
            continue;
        }
        let ours = durable_saves(saved, index);
        if let Some(ratio) = paired_by_run(&ours, &durable_saves(saved, reference)) {
            claims.push(Claim {
                ratio,
                runs: ours.len(),
                cases: Vec::new(),
                files: vec![index, reference],
            });
        }
    }
    claims
}

/// The rows of `plan` after the runs so far (`every_cold`: `--cold`, every case read from
/// the disk).
///
/// Long on purpose: a load row's fields, then a save row's, each field computed where it is
/// set.
pub(super) fn rows(
    plan: &Plan<'_>,
    buffer: Size,
    saved: &Saved,
    samples: &[Vec<Taken>],
    every_cold: bool,
) -> (Vec<Row>, Vec<SaveRow>) {
    let id = |index: usize| {
        plan.cases.get(index).map(|case| RowId {
            backend: case.backend,
            mode: case.mode,
            validation: case.validation,
        })
    };
    let mut rows = Vec::new();
    for (index, case) in plan.cases.iter().enumerate() {
        let taken = samples.get(index).map(Vec::as_slice).unwrap_or_default();
        let ours: Vec<f64> = taken.iter().map(|taken| taken.sample.seconds).collect();
        let read = Summary::of(&ours);
        let file_bytes = case.bytes_read(&saved.bytes);
        // The floors of the files it reads (a cold start's two), added.
        let floor_min = (!case.floors.is_empty()).then(|| {
            case.floors
                .iter()
                .map(|&floor| {
                    let seconds: Vec<f64> = loads_by_run(samples, floor)
                        .into_iter()
                        .map(|(_, seconds)| seconds)
                        .collect();
                    Summary::of(&seconds).min_s
                })
                .sum::<f64>()
        });
        let (speedup, vs_floor) = load_ratios(plan, samples, index, every_cold);
        let below_floor = vs_floor.as_ref().is_some_and(beats_its_floor);
        let steady_speedup = case.reference.and_then(|reference| {
            paired_by_run(
                &steady_loads(samples, reference),
                &steady_loads(samples, index),
            )
        });
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
            read_runs: ours,
            read_run_numbers: taken.iter().map(|taken| taken.run).collect(),
            file_bytes,
            read_gbps: file_bytes as f64 / read.median_s / 1e9,
            floor_s: floor_min,
            read_vs_floor: vs_floor.filter(|_| !below_floor),
            below_floor,
            speedup,
            steady_speedup,
            reference: case.reference.and_then(id),
            peak_rss_bytes: taken.iter().filter_map(|taken| taken.sample.rss_rise).max(),
            huge_pages_runs: taken
                .iter()
                .map(|taken| taken.sample.huge_pages)
                .collect::<Option<Vec<u64>>>()
                .unwrap_or_default(),
            read_ways: taken
                .iter()
                .map(|taken| taken.sample.way.map(crate::exec::Way::name))
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default(),
            compact_stalls: taken
                .iter()
                .map(|taken| taken.sample.compact_stalls)
                .sum::<Option<u64>>(),
            cpu_runs: taken
                .iter()
                .map(|taken| taken.sample.cpu)
                .collect::<Option<Vec<_>>>()
                .unwrap_or_default(),
            cached_before: farthest_share(
                taken.iter().map(|taken| taken.sample.cached_before),
                reads_cold(case, every_cold),
            ),
            verified: !taken.is_empty() && taken.iter().all(|taken| taken.sample.verified),
        });
    }
    let mut saves = Vec::new();
    for (index, file) in plan.files.iter().enumerate().filter(|(_, f)| f.shown) {
        let ours = durable_saves(saved, index);
        let seconds: Vec<f64> = ours.iter().map(|&(_, seconds)| seconds).collect();
        let summary = Summary::of(&seconds);
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
            save_runs: seconds,
            save_run_numbers: ours.iter().map(|&(run, _)| run).collect(),
            file_bytes: bytes,
            vs_reference: reference
                .and_then(|(r, _)| paired_by_run(&ours, &durable_saves(saved, r))),
            reference: reference.map(|(_, f)| RowId {
                backend: f.backend,
                mode: f.mode,
                validation: durable_save_name(f.backend),
            }),
        });
        // A row for what the saves also timed short of durable, where they did: halo2's
        // write before its sync; an upload behind a link to its last part.
        let plain = saves_by_run(saved, index, &|written| written.unsynced);
        if !plain.is_empty() {
            let seconds: Vec<f64> = plain.iter().map(|&(_, seconds)| seconds).collect();
            let summary = Summary::of(&seconds);
            saves.push(SaveRow {
                kind: file.kind,
                backend: file.backend,
                mode: file.mode,
                durable: false,
                buffer_bytes: buffer.0,
                save_s: summary.median_s,
                save_min_s: summary.min_s,
                save_spread: summary.spread,
                vs_reference: paired_by_run(&plain, &ours),
                reference: Some(RowId {
                    backend: file.backend,
                    mode: file.mode,
                    validation: durable_save_name(file.backend),
                }),
                save_runs: seconds,
                save_run_numbers: plain.iter().map(|&(run, _)| run).collect(),
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
    use super::super::by_run::runs_from_one as by_run;
    use super::*;

    /// A load at its floor whose five runs all read a little under it ties with the floor
    /// (its ratio is printed); one beyond the tie beat it (a measurement error, flagged).
    /// The five runs of the rkyv trusted cold row of a default run, over its floor's typical
    /// visit near each run: within the tie.
    #[test]
    fn a_load_at_its_floor_ties_and_one_beyond_the_tie_beat_it() {
        let floor = by_run(&[0.474, 0.474, 0.477, 0.48, 0.48], 1);
        let at_floor = by_run(&[0.448, 0.409, 0.468, 0.455, 0.414], 1);
        let ratio = paired_by_run(&at_floor, &floor).unwrap();
        assert!(ratio.high < 1.0, "{ratio:?}");
        assert!(!beats_its_floor(&ratio), "{ratio:?}");
        let faster: Vec<(usize, f64)> = at_floor.iter().map(|&(run, s)| (run, s * 0.9)).collect();
        let ratio = paired_by_run(&faster, &floor).unwrap();
        assert!(beats_its_floor(&ratio), "{ratio:?}");
    }

    /// One run's load far under its floor's is one draw of the noise, not a beaten floor: a
    /// second run gives it an interval, and the judgement.
    #[test]
    fn one_run_beats_no_floor() {
        let floor = by_run(&[1.0, 1.0], 1);
        let faster = by_run(&[0.5, 0.5], 1);
        let one = paired_by_run(&faster[..1], &floor).unwrap();
        assert_eq!((one.runs, one.high), (1, 0.5), "{one:?}");
        assert!(!beats_its_floor(&one), "{one:?}");
        let two = paired_by_run(&faster, &floor).unwrap();
        assert!(beats_its_floor(&two), "{two:?}");
    }

    /// A floor's visits are told apart by the way each took where ways are compared (from the
    /// disk), and are all one way where not.
    #[test]
    fn a_floors_visits_carry_their_ways_where_ways_are_compared() {
        use crate::exec::Way;
        let taken: Vec<Taken> = [Way::ReadToEnd, Way::Parameters, Way::ReadToEnd]
            .into_iter()
            .enumerate()
            .map(|(at, way)| Taken {
                run: at + 1,
                sample: Sample {
                    seconds: 1.0,
                    verified: true,
                    rss_rise: None,
                    huge_pages: None,
                    compact_stalls: None,
                    cached_before: None,
                    way: Some(way),
                    cpu: None,
                },
            })
            .collect();
        let samples = [taken];
        let ways = |by_way| -> Vec<usize> {
            floor_visits(&samples, 0, by_way)
                .into_iter()
                .map(|(_, _, way)| way)
                .collect()
        };
        assert_eq!(ways(true), [0, 1, 0]);
        assert_eq!(ways(false), [0, 0, 0]);
    }

    /// A row's share of its files in the page cache is the one farthest from what its loads
    /// promise: a cold row's largest, another's smallest; none without loads.
    #[test]
    fn a_rows_cached_share_is_the_farthest_from_its_promise() {
        let shares = [Some(1.0), Some(0.95), Some(1.0)];
        assert_eq!(farthest_share(shares.into_iter(), false), Some(0.95));
        let shares = [Some(0.0), Some(0.02), Some(0.0)];
        assert_eq!(farthest_share(shares.into_iter(), true), Some(0.02));
        assert_eq!(farthest_share(std::iter::empty(), false), None);
        assert_eq!(farthest_share([Some(1.0), None].into_iter(), false), None);
    }

    /// A claim counts the runs of the row it is about, not the runs its ratio pairs: a cold
    /// start measured in runs 1-3, one of its two floors only in runs 1 and 2 (the start was
    /// measured again for its ratio to halo2's, without its floors), has a ratio to its
    /// floors over two runs but was measured in three, the most allowed.
    #[test]
    fn a_claim_counts_the_runs_of_its_row() {
        let mut plan = Plan::empty();
        for _ in 0..3 {
            plan.case(
                (
                    crate::plan::Kind::ColdStart,
                    "rawbytes",
                    "RawBytes",
                    "checked",
                    State::Fresh,
                ),
                Vec::new(),
                Box::new(|_, _| Err("not run".to_owned())),
            );
        }
        plan.cases[0].floors = vec![1, 2];
        let taken = |runs: &[usize], seconds: f64| -> Vec<Taken> {
            runs.iter()
                .map(|&run| Taken {
                    run,
                    sample: Sample {
                        seconds: seconds * run as f64,
                        verified: true,
                        rss_rise: None,
                        huge_pages: None,
                        compact_stalls: None,
                        cached_before: None,
                        way: None,
                        cpu: None,
                    },
                })
                .collect()
        };
        let samples = [
            taken(&[1, 2, 3], 3.0),
            taken(&[1, 2, 3], 1.0),
            taken(&[1, 2], 1.0),
        ];
        let saved = Saved {
            times: Vec::new(),
            bytes: Vec::new(),
        };
        let claims = claims(&plan, &saved, &samples, false);
        let [claim] = claims.as_slice() else {
            panic!("one claim, the start's over its floors");
        };
        assert_eq!(claim.cases, [0, 1, 2]);
        assert_eq!(claim.ratio.runs, 2);
        assert_eq!(claim.runs, 3);
    }
}
