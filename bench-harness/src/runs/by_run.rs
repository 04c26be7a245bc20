//! Timings by the run that took them, paired run by run: a load over its reference's in the
//! same run, and over its floor near that run, whose interval also counts the floor's own
//! noise.

use crate::stats::{bootstrapped, median, paired, resampled_median, Ratio};

/// Timings of the runs that took them: `(run, seconds)`, in run order.
pub(super) type ByRun = Vec<(usize, f64)>;

/// The median of each run's timings (a file saved several times a run, a floor visited
/// twice).
pub(super) fn median_per_run(timings: &[(usize, f64)]) -> ByRun {
    timings
        .chunk_by(|a, b| a.0 == b.0)
        .map(|run| {
            let seconds: Vec<f64> = run.iter().map(|&(_, seconds)| seconds).collect();
            (run.first().map_or(0, |&(run, _)| run), median(&seconds))
        })
        .collect()
}

/// A floor's visits by run, and the runs near each run whose visits its floor of that run
/// counts.
///
/// The floor of a run's moment is its typical visit near that run: the lower median of its
/// visits in that run and the runs either side (at the first and last runs, or beside a run
/// without visits, with the run two away added where there is one, so that three runs count
/// where they can). A floor that takes its ways in turn (from the disk,
/// [`crate::exec::floor`]), a run's first visit one way and its second the other: `by_way`,
/// each way is taken at its typical visit and the fastest way counts. Typical, not
/// fastest, because a load is visited once a run: with visits that vary by 10-20%, a load
/// exactly as fast as its floor read 1.13-1.27x the fastest of the floor's six visits near
/// its run (docs/harness.md). Near runs, so that the floor follows the disk as it drifts over
/// several runs, but not one run's slow visits. A run the floor was not visited in has no
/// floor.
struct Visits {
    /// The runs the floor was visited in, in order.
    runs: Vec<usize>,
    /// Each run's visits, in the order taken.
    visits: Vec<Vec<f64>>,
    /// For each run, its near runs (indices into `runs`): itself and the runs either side;
    /// at the first and last runs, or beside a run without visits, with the run two away
    /// added where there is one, so that three runs count where they can.
    near: Vec<Vec<usize>>,
    /// Whether its ways take turns (from the disk): a run's first visit one way, its second
    /// the other.
    by_way: bool,
}

impl Visits {
    fn new(samples: &[(usize, f64)], by_way: bool) -> Self {
        let by_run: std::collections::BTreeMap<usize, Vec<f64>> =
            samples
                .iter()
                .fold(Default::default(), |mut by_run, &(run, seconds)| {
                    by_run.entry(run).or_default().push(seconds);
                    by_run
                });
        let runs: Vec<usize> = by_run.keys().copied().collect();
        let at = |run: usize| runs.binary_search(&run).ok();
        let near = runs
            .iter()
            .map(|&run| {
                let mut near: Vec<usize> =
                    (run.saturating_sub(1)..=run + 1).filter_map(&at).collect();
                for further in [run.checked_sub(2), run.checked_add(2)] {
                    if near.len() < 3 {
                        near.extend(further.and_then(at));
                    }
                }
                near
            })
            .collect();
        Visits {
            visits: by_run.into_values().collect(),
            runs,
            near,
            by_way,
        }
    }

    /// The floor of run `at`'s moment (an index into `runs`) from `visits` (the floor's
    /// own, or redrawn): the lower median of the visits of the runs near it; where the ways
    /// take turns (`by_way`), each way's lower median there, the fastest counting. `scratch`
    /// holds the visits counted.
    fn floor_at(&self, at: usize, visits: &[Vec<f64>], scratch: &mut Vec<f64>) -> f64 {
        let near = self.near.get(at).map(Vec::as_slice).unwrap_or_default();
        let near_visits = || near.iter().filter_map(|&at| visits.get(at));
        let mut typical = |way: Option<usize>| {
            scratch.clear();
            for visits in near_visits() {
                match way {
                    Some(way) => scratch.extend(visits.get(way)),
                    None => scratch.extend(visits),
                }
            }
            lower_median(scratch)
        };
        if self.by_way {
            let ways = near_visits().map(Vec::len).max().unwrap_or(0);
            (0..ways)
                .map(|way| typical(Some(way)))
                .fold(f64::INFINITY, f64::min)
        } else {
            typical(None)
        }
    }

    /// Draws the visits again into `drawn` (shaped as the floor's own): each replaced by a
    /// visit at the same place (a run's first visit by a first visit) of its run or a run
    /// near it, drawn at random. The floor near a run rests on a few visits of a few runs,
    /// and a run's ratio shares them with the runs beside it; drawing the runs' ratios alone
    /// treats those few visits as known.
    fn redraw(&self, rng: &mut rand::rngs::StdRng, drawn: &mut [Vec<f64>]) {
        use rand::seq::SliceRandom;
        for ((drawn, own), near) in drawn.iter_mut().zip(&self.visits).zip(&self.near) {
            for (place, (visit, &own)) in drawn.iter_mut().zip(own).enumerate() {
                let redrawn = near
                    .choose(rng)
                    .and_then(|&at| self.visits.get(at))
                    .and_then(|visits| visits.get(place));
                // A near run with fewer visits keeps this run's own.
                *visit = redrawn.copied().unwrap_or(own);
            }
        }
    }
}

/// Each run's floor of its moment from its own visits ([`Visits::floor_at`]).
#[cfg(test)]
fn floor_near_each_run(samples: &[(usize, f64)], by_way: bool) -> ByRun {
    let floor = Visits::new(samples, by_way);
    let mut scratch = Vec::new();
    floor
        .runs
        .iter()
        .enumerate()
        .map(|(at, &run)| (run, floor.floor_at(at, &floor.visits, &mut scratch)))
        .collect()
}

/// A row's floors: each floor's visits, `(run, seconds)`, and whether its ways take turns.
pub(super) type Floors = Vec<(ByRun, bool)>;

/// The middle value of a sample, the lower of the two middle ones for an even count;
/// infinite when empty. Sorts `values`.
fn lower_median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    values
        .get(values.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(f64::INFINITY)
}

/// `ours` over the sum of its floors near each run, paired by run (a cold start reads the
/// parameters and the key, one after the other): the median, over the runs `ours` and every
/// floor have, of each run's load over its floors' typical visits near that run
/// ([`Visits::floor_at`]), and a 95% interval of it by bootstrap that draws the floors'
/// visits again ([`Visits::redraw`]) as well as the runs. `None` without floors or a run all
/// sides have.
///
/// Drawn again because a floor's visits vary by up to 3x from one to the next (a 33 MB file
/// read from the page cache in a new process took 3.2-10.6 ms), and its typical visit near a
/// run rests on about six of them, shared with the runs beside it: drawing the runs alone
/// made intervals of about +-5% while two harness runs' estimates of the same row lay 20%
/// apart, and 2-4 of 26 rows of a default run disagreed with the same rows of the next.
pub(super) fn over_floors(ours: &[(usize, f64)], floors: &Floors) -> Option<Ratio> {
    let floors: Vec<Visits> = floors
        .iter()
        .map(|(samples, by_way)| Visits::new(samples, *by_way))
        .collect();
    if floors.is_empty() {
        return None;
    }
    // Each run of ours that every floor has: its load, and its place in each floor's runs.
    let runs: Vec<(f64, Vec<usize>)> = ours
        .iter()
        .filter_map(|&(run, seconds)| {
            let at: Option<Vec<usize>> = floors
                .iter()
                .map(|floor| floor.runs.binary_search(&run).ok())
                .collect();
            at.map(|at| (seconds, at))
        })
        .collect();
    let mut scratch = Vec::new();
    let mut ratios = |drawn: &[Vec<Vec<f64>>], into: &mut Vec<f64>| {
        into.clear();
        into.extend(runs.iter().filter_map(|(seconds, at)| {
            let floor: f64 = floors
                .iter()
                .zip(drawn)
                .zip(at)
                .map(|((floor, visits), &at)| floor.floor_at(at, visits, &mut scratch))
                .sum();
            (floor > 0.0).then(|| seconds / floor)
        }));
    };
    let mut drawn: Vec<Vec<Vec<f64>>> = floors.iter().map(|floor| floor.visits.clone()).collect();
    let mut estimate = Vec::new();
    ratios(&drawn, &mut estimate);
    if estimate.is_empty() {
        return None;
    }
    let mut redrawn = Vec::new();
    Some(bootstrapped(median(&estimate), estimate.len(), |rng| {
        for (floor, drawn) in floors.iter().zip(&mut drawn) {
            floor.redraw(rng, drawn);
        }
        ratios(&drawn, &mut redrawn);
        resampled_median(&redrawn, rng)
    }))
}

/// The runs `a` and `b` both have, in `a`'s order: each run with its timing in `a` and in
/// `b` (one timing a run each).
fn same_runs<'s>(
    a: &'s [(usize, f64)],
    b: &'s [(usize, f64)],
) -> impl Iterator<Item = (usize, f64, f64)> + 's {
    a.iter().filter_map(|&(run, first)| {
        b.iter()
            .find(|&&(other, _)| other == run)
            .map(|&(_, second)| (run, first, second))
    })
}

/// [`paired`] over the runs both sides were measured in: `ours[i] / theirs[i]` of each such
/// run. `None` when they share no run.
pub(super) fn paired_by_run(ours: &[(usize, f64)], theirs: &[(usize, f64)]) -> Option<Ratio> {
    let (ours, theirs): (Vec<f64>, Vec<f64>) = same_runs(ours, theirs)
        .map(|(_, ours, theirs)| (ours, theirs))
        .unzip();
    paired(&ours, &theirs)
}

/// `(run, seconds)` of `seconds` taken `visits` times a run, from run 1.
#[cfg(test)]
pub(super) fn runs_from_one(seconds: &[f64], visits: usize) -> ByRun {
    seconds
        .iter()
        .enumerate()
        .map(|(at, &seconds)| (at / visits + 1, seconds))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::runs_from_one as by_run;
    use super::*;

    #[test]
    fn a_load_is_compared_with_the_floor_of_its_moment() {
        // Two visits a run, a way each: the second way is the slower. Run 2's visits are
        // both slow (noise); from run 5 on the disk is slower for the floor and the load
        // alike (drift).
        let floor = [
            1.0, 1.2, 1.9, 2.1, 1.0, 1.1, 1.0, 1.2, 1.5, 1.6, 1.5, 1.5, 1.6, 1.5, 1.5, 1.6,
        ];
        let near = floor_near_each_run(&by_run(&floor, 2), true);
        assert_eq!(near, by_run(&[1.0, 1.0, 1.0, 1.0, 1.5, 1.5, 1.5, 1.5], 1));
        let loads = by_run(&[1.05, 1.05, 1.05, 1.05, 1.6, 1.6, 1.6, 1.6], 1);
        let ratio = paired_by_run(&loads, &near).unwrap();
        // The noisy run reads 1.05x, not 0.55x; the drift's runs 1.07x from its first run
        // (against the fastest floor of all runs: 1.6x).
        assert!((ratio.estimate - 1.06).abs() < 0.02, "{ratio:?}");
        assert!(ratio.low > 1.0, "{ratio:?}");
    }

    /// A load exactly as fast as its floor's faster way, both varying by 10% from one visit
    /// to the next, reads about 1x: the floor near a run is its ways' typical visit, not the
    /// fastest of its six visits there (which read 1.11x here).
    #[test]
    fn a_load_as_fast_as_its_floor_reads_about_one() {
        let fast = [0.9, 1.0, 1.1, 1.0, 0.9, 1.1, 1.0, 0.9];
        let floor: Vec<f64> = fast.iter().flat_map(|&way| [way, way + 0.2]).collect();
        let loads = by_run(&[1.0, 1.1, 0.9, 1.1, 1.0, 0.9, 0.9, 1.1], 1);
        let near = floor_near_each_run(&by_run(&floor, 2), true);
        // Each run's floor is its faster way's typical visit, at the first and last runs
        // too (three runs counting there as elsewhere).
        assert_eq!(near, by_run(&[1.0; 8], 1));
        let ratio = paired_by_run(&loads, &near).unwrap();
        assert!((ratio.estimate - 1.0).abs() < 0.02, "{ratio:?}");
        assert!(ratio.low <= 1.0 && ratio.high >= 1.0, "{ratio:?}");
        // From the page cache both visits read the same way: all six count as one way's.
        let same_way: Vec<f64> = fast.iter().flat_map(|&way| [way, way - 0.05]).collect();
        let pooled = floor_near_each_run(&by_run(&same_way, 2), false);
        assert_eq!(pooled.first(), Some(&(1, 0.95)));
        assert_eq!(pooled.get(3), Some(&(4, 0.95)));
    }

    /// Rows measured in different runs (a later run measures only the rows still wide) are
    /// paired by run: each ratio over the runs both sides have, a floor near a run only from
    /// the runs either side that it has.
    #[test]
    fn rows_measured_in_different_runs_are_paired_by_run() {
        // Ours in runs 1-5, the reference in runs 1, 2 and 5 only.
        let ours = by_run(&[1.0, 1.0, 9.0, 9.0, 1.0], 1);
        let theirs = vec![(1, 2.0), (2, 2.0), (5, 2.0)];
        let ratio = paired_by_run(&ours, &theirs).unwrap();
        assert_eq!(ratio.runs, 3);
        assert!((ratio.estimate - 0.5).abs() < 1e-9, "{ratio:?}");
        assert!(paired_by_run(&ours, &[(7, 1.0)]).is_none());
        // A floor measured in runs 1, 2 and 6: run 6's is not near runs 1 and 2.
        let floor = vec![(1, 3.0), (1, 2.0), (2, 4.0), (6, 1.0)];
        assert_eq!(
            floor_near_each_run(&floor, true),
            vec![(1, 2.0), (2, 2.0), (6, 1.0)]
        );
        // Two floors added only in the runs both have: run 3's, 1 + 2.
        let floors: Floors = vec![
            (vec![(1, 1.0), (3, 1.0)], true),
            (vec![(3, 2.0), (4, 5.0)], true),
        ];
        let ratio = over_floors(&[(1, 3.0), (3, 6.0), (4, 3.0)], &floors).unwrap();
        assert_eq!((ratio.runs, ratio.estimate), (1, 2.0));
        // A save's runs, each run's median.
        assert_eq!(
            median_per_run(&[(1, 3.0), (1, 1.0), (1, 2.0), (4, 7.0)]),
            vec![(1, 2.0), (4, 7.0)]
        );
    }

    /// halo2's checked parameters read fresh (33 MB from the page cache, a new process a
    /// load) over their floor, in two default runs back to back: the loads steady at 32-34
    /// ms, the floor's visits 5-11 ms. The floor's typical visit near each run, taken as
    /// known, made intervals that did not meet (3.78-4.23 against 4.41-5.21); drawing its
    /// visits again too, they meet, as two runs of one loader must.
    #[test]
    fn a_floors_own_noise_is_in_its_interval() {
        let first = (
            by_run(&[32.1, 32.4, 32.0, 32.6, 33.2], 1),
            by_run(&[6.5, 8.6, 9.2, 9.9, 8.5, 7.4, 7.8, 10.1, 6.7, 9.3], 2),
        );
        let second = (
            by_run(&[32.7, 32.8, 32.2, 33.1, 33.7], 1),
            by_run(&[6.7, 5.1, 5.2, 9.0, 10.6, 6.3, 7.3, 9.9, 8.4, 6.5], 2),
        );
        let meet = |a: &Ratio, b: &Ratio| a.low <= b.high && b.low <= a.high;
        let known = |(loads, floor): &(ByRun, ByRun)| {
            paired_by_run(loads, &floor_near_each_run(floor, false)).unwrap()
        };
        let (a, b) = (known(&first), known(&second));
        assert!(!meet(&a, &b), "{a:?} {b:?}");
        let drawn = |(loads, floor): &(ByRun, ByRun)| {
            over_floors(loads, &vec![(floor.clone(), false)]).unwrap()
        };
        let (a, b) = (drawn(&first), drawn(&second));
        assert!(meet(&a, &b), "{a:?} {b:?}");
        // The estimates are the same either way: only the intervals widen.
        assert_eq!(a.estimate, known(&first).estimate);
        assert!(a.half_width() > known(&first).half_width(), "{a:?}");
    }

    /// A floor without noise adds none: each way's visits the same in every run (the second
    /// way the slower), loads exactly 1.2x the faster way, the interval is the point 1.2. A
    /// visit redrawn from another place (the other way) would move it.
    #[test]
    fn a_steady_floor_adds_no_noise() {
        let floor: Vec<f64> = (0..8).flat_map(|_| [1.0, 1.3]).collect();
        let loads = by_run(&[1.2; 8], 1);
        let ratio = over_floors(&loads, &vec![(by_run(&floor, 2), true)]).unwrap();
        assert_eq!((ratio.estimate, ratio.low, ratio.high), (1.2, 1.2, 1.2));
        assert_eq!(ratio.runs, 8);
        // Beside a floor the load was not measured with, or no floor: no ratio.
        assert!(over_floors(&loads, &vec![(vec![(20, 1.0)], true)]).is_none());
        assert!(over_floors(&loads, &Vec::new()).is_none());
    }
}
