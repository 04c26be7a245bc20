//! Timings by the run that took them, paired run by run: a load over its reference's in the
//! same run, and over its floor near that run, whose interval also counts the floor's own
//! noise.

use crate::stats::{bootstrapped, median, median_in_place, paired, resampled_median, Ratio};

/// Timings of the runs that took them: `(run, seconds)`, in run order.
pub(super) type ByRun = Vec<(usize, f64)>;

/// The median of each run's timings (a file saved several times a run).
pub(super) fn median_per_run(timings: &[(usize, f64)]) -> ByRun {
    timings
        .chunk_by(|a, b| a.0 == b.0)
        .map(|run| {
            let seconds: Vec<f64> = run.iter().map(|&(_, seconds)| seconds).collect();
            (run.first().map_or(0, |&(run, _)| run), median(&seconds))
        })
        .collect()
}

/// One visit of a floor: `(run, seconds, way)`, `way` an index that tells the floor's ways
/// apart where they are compared (from the disk, [`crate::exec::floor`]), the same for every
/// visit where they are not.
pub(super) type FloorVisit = (usize, f64, usize);

/// A row's floors: each floor's visits.
pub(super) type Floors = Vec<Vec<FloorVisit>>;

/// A run's floor counts the visits of the `2 * NEAR + 1` nearest runs that have one (its
/// own included; a sixth where two are as near), ...
const NEAR: usize = 2;
/// ... and of further runs, the nearest first, until it counts this many visits of each way
/// that counts (where the floor has as many).
const PER_WAY: usize = 3;

/// A floor's visits by run, and the runs near each run whose visits its floor of that run
/// counts.
///
/// The floor of a run's moment is its typical visit near that run: the median of the
/// visits of the five nearest runs that have one (that run's included), and of further
/// runs, the nearest first, until three visits of each way count (a floor is visited once
/// a run). A way counts where it has as many visits in all as the floor's most taken way,
/// or three: a stray visit of a third way (a cold floor that found its file cached) is
/// left out, not made every run's floor. A floor whose ways take turns from visit to
/// visit (from the disk, [`crate::exec::floor`]: a way a run) takes each way at its typical
/// visit there, and the fastest way counts. Typical, not fastest, because a load is visited
/// once a run: with visits that vary by 10-20%, a load exactly as fast as its floor read
/// 1.13-1.27x the fastest of six visits of the floor near its run (docs/harness.md). Near
/// runs, so that the floor follows the disk as it drifts over several runs, but not one
/// run's slow visit. A run the floor was not visited in has no floor.
struct Visits {
    /// The runs the floor was visited in, in order.
    runs: Vec<usize>,
    /// Each run's visits' seconds, in the order taken.
    visits: Vec<Vec<f64>>,
    /// The way of each of them.
    ways: Vec<Vec<usize>>,
    /// For each run, its near runs (indices into `runs`).
    near: Vec<Vec<usize>>,
    /// For each run's visits, the visits of its way in its near runs, `(run, place)`: what
    /// a redrawn visit is drawn from.
    same_way_near: Vec<Vec<Vec<(usize, usize)>>>,
    /// Of each way, the visits a run's floor wants near it ([`wanted_of_each_way`]): none
    /// for a way that does not count.
    wanted: Vec<usize>,
}

impl Visits {
    fn new(samples: &[FloorVisit]) -> Self {
        let by_run: std::collections::BTreeMap<usize, Vec<(f64, usize)>> =
            samples
                .iter()
                .fold(Default::default(), |mut by_run, &(run, seconds, way)| {
                    by_run.entry(run).or_default().push((seconds, way));
                    by_run
                });
        let runs: Vec<usize> = by_run.keys().copied().collect();
        let (visits, ways): (Vec<Vec<f64>>, Vec<Vec<usize>>) = by_run
            .into_values()
            .map(|visits| visits.into_iter().unzip())
            .unzip();
        let wanted = wanted_of_each_way(&ways);
        let near = near_runs(&runs, &ways, &wanted);
        let same_way_near = same_way_near(&ways, &near);
        Visits {
            runs,
            visits,
            ways,
            near,
            same_way_near,
            wanted,
        }
    }

    /// The floor of run `at`'s moment (an index into `runs`) from `visits` (the floor's
    /// own, or redrawn): of each way that counts, the median of its visits in the runs near
    /// `at`; the fastest way counting. `scratch` holds the visits counted.
    fn floor_at(&self, at: usize, visits: &[Vec<f64>], scratch: &mut Vec<f64>) -> f64 {
        let near = self.near.get(at).map(Vec::as_slice).unwrap_or_default();
        let ways = self.wanted.iter().enumerate();
        ways.filter(|&(_, &wanted)| wanted > 0)
            .map(|(way, _)| {
                scratch.clear();
                for &at in near {
                    let (Some(ways), Some(visits)) = (self.ways.get(at), visits.get(at)) else {
                        continue;
                    };
                    scratch.extend(
                        ways.iter()
                            .zip(visits)
                            .filter(|&(&other, _)| other == way)
                            .map(|(_, &seconds)| seconds),
                    );
                }
                median_of(scratch)
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// Draws the visits again into `drawn` (shaped as the floor's own): each replaced by a
    /// visit of the same way in its run or a run near it, drawn at random. The floor near a
    /// run rests on a few visits of a few runs, and a run's ratio shares them with the runs
    /// beside it; drawing the runs' ratios alone treats those few visits as known.
    fn redraw(&self, rng: &mut rand::rngs::StdRng, drawn: &mut [Vec<f64>]) {
        use rand::seq::SliceRandom;
        for ((drawn, own), choices) in drawn.iter_mut().zip(&self.visits).zip(&self.same_way_near) {
            for ((visit, &own), choices) in drawn.iter_mut().zip(own).zip(choices) {
                let redrawn = choices
                    .choose(rng)
                    .and_then(|&(at, place)| self.visits.get(at)?.get(place));
                *visit = redrawn.copied().unwrap_or(own);
            }
        }
    }
}

/// For each of `runs` (in order; each run's visits' `ways`), the runs whose visits its floor
/// counts (indices into `runs`), as [`Visits`] says: until each way has the visits `wanted`
/// of it.
fn near_runs(runs: &[usize], ways: &[Vec<usize>], wanted: &[usize]) -> Vec<Vec<usize>> {
    let at = |run: usize| runs.binary_search(&run).ok();
    let span = runs.last().map_or(0, |&last| last) - runs.first().map_or(0, |&first| first);
    runs.iter()
        .map(|&run| {
            let mut near = Vec::new();
            let mut counted = vec![0; wanted.len()];
            for distance in 0..=span {
                let enough = near.len() > 2 * NEAR
                    && counted
                        .iter()
                        .zip(wanted)
                        .all(|(count, want)| count >= want);
                if enough {
                    break;
                }
                let sides = match distance {
                    0 => [Some(run), None],
                    _ => [run.checked_sub(distance), run.checked_add(distance)],
                };
                for at in sides.into_iter().flatten().filter_map(at) {
                    near.push(at);
                    for &way in ways.get(at).into_iter().flatten() {
                        if let Some(count) = counted.get_mut(way) {
                            *count += 1;
                        }
                    }
                }
            }
            near
        })
        .collect()
}

/// Of each way, of each run's visits' `ways`, the visits a run's floor wants near it:
/// [`PER_WAY`], or as many as the way has; none for a way that does not count, one with
/// fewer visits than the most taken way and than [`PER_WAY`].
fn wanted_of_each_way(ways: &[Vec<usize>]) -> Vec<usize> {
    let mut visits: Vec<usize> = Vec::new();
    for &way in ways.iter().flatten() {
        if visits.len() <= way {
            visits.resize(way + 1, 0);
        }
        if let Some(count) = visits.get_mut(way) {
            *count += 1;
        }
    }
    let most = visits.iter().copied().max().unwrap_or(0).min(PER_WAY);
    visits
        .iter()
        .map(|&visits| {
            if visits >= most {
                visits.min(PER_WAY)
            } else {
                0
            }
        })
        .collect()
}

/// For each run's visits (their `ways`), the visits of the same way in the run's `near`
/// runs, `(run, place)`: what [`Visits::redraw`] draws each from.
fn same_way_near(ways: &[Vec<usize>], near: &[Vec<usize>]) -> Vec<Vec<Vec<(usize, usize)>>> {
    ways.iter()
        .zip(near)
        .map(|(own, near)| {
            own.iter()
                .map(|&way| {
                    near.iter()
                        .flat_map(|&at| {
                            let of_run = ways.get(at).map(Vec::as_slice).unwrap_or_default();
                            of_run
                                .iter()
                                .enumerate()
                                .filter(move |&(_, &other)| other == way)
                                .map(move |(place, _)| (at, place))
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Each run's floor of its moment from its own visits ([`Visits::floor_at`]).
#[cfg(test)]
fn floor_near_each_run(samples: &[FloorVisit]) -> ByRun {
    let floor = Visits::new(samples);
    let mut scratch = Vec::new();
    floor
        .runs
        .iter()
        .enumerate()
        .map(|(at, &run)| (run, floor.floor_at(at, &floor.visits, &mut scratch)))
        .collect()
}

/// [`median_in_place`] of a way's visits, infinite when it has none there (no floor).
fn median_of(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        f64::INFINITY
    } else {
        median_in_place(values)
    }
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
/// run rests on about five of them, shared with the runs beside it: drawing the runs alone
/// made intervals of about +-5% while two harness runs' estimates of the same row lay 20%
/// apart, and 2-4 of 26 rows of a default run disagreed with the same rows of the next.
pub(super) fn over_floors(ours: &[(usize, f64)], floors: &Floors) -> Option<Ratio> {
    let floors: Vec<Visits> = floors.iter().map(|visits| Visits::new(visits)).collect();
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
            (floor.is_finite() && floor > 0.0).then(|| seconds / floor)
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

    /// A floor visited once a run from run 1, its `ways` taking turns.
    fn taking_turns(seconds: &[f64], ways: usize) -> Vec<FloorVisit> {
        seconds
            .iter()
            .enumerate()
            .map(|(at, &seconds)| (at + 1, seconds, at % ways))
            .collect()
    }

    /// Visits of one way.
    fn one_way(visits: &[(usize, f64)]) -> Vec<FloorVisit> {
        visits
            .iter()
            .map(|&(run, seconds)| (run, seconds, 0))
            .collect()
    }

    fn assert_floors(near: &[(usize, f64)], expected: &[f64]) {
        assert_eq!(near.len(), expected.len(), "{near:?}");
        for (&(run, floor), &expected) in near.iter().zip(expected) {
            assert!((floor - expected).abs() < 1e-9, "run {run}: {near:?}");
        }
    }

    /// A run's floor counts its five nearest runs' visits, and where two ways take turns
    /// from run to run, seven runs' (six at the first and last runs): three of each way.
    #[test]
    fn a_runs_floor_counts_five_runs_or_three_visits_of_each_way() {
        let runs: Vec<usize> = (1..=10).collect();
        let near = |ways: &[Vec<usize>], run: usize| -> Vec<usize> {
            let mut near = near_runs(&runs, ways, &wanted_of_each_way(ways))
                .get(run - 1)
                .cloned()
                .unwrap_or_default();
            near.sort_unstable();
            near.into_iter().map(|at| at + 1).collect()
        };
        let one_way: Vec<Vec<usize>> = runs.iter().map(|_| vec![0]).collect();
        assert_eq!(near(&one_way, 1), [1, 2, 3, 4, 5]);
        assert_eq!(near(&one_way, 5), [3, 4, 5, 6, 7]);
        assert_eq!(near(&one_way, 10), [6, 7, 8, 9, 10]);
        let in_turn: Vec<Vec<usize>> = runs.iter().map(|run| vec![run % 2]).collect();
        assert_eq!(near(&in_turn, 1), [1, 2, 3, 4, 5, 6]);
        assert_eq!(near(&in_turn, 5), [2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(near(&in_turn, 10), [5, 6, 7, 8, 9, 10]);
        // Runs without a visit (runs that measured only other rows) are skipped over: the
        // nearest five runs with one count.
        let sparse = [1, 2, 6, 9, 10, 14];
        let single = vec![vec![0]; 6];
        let mut first = near_runs(&sparse, &single, &wanted_of_each_way(&single))
            .first()
            .cloned()
            .unwrap_or_default();
        first.sort_unstable();
        assert_eq!(first, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_load_is_compared_with_the_floor_of_its_moment() {
        // One visit a run, the ways taking turns: the second way the slower by 0.2 s. Run 3's
        // visit is slow (noise); from run 9 on the disk is slower for the floor and the load
        // alike (drift).
        let floor: Vec<f64> = (1..=16)
            .map(|run| match run {
                3 => 2.0,
                _ if run <= 8 => 1.0 + 0.2 * (1 - run % 2) as f64,
                _ => 1.5 + 0.2 * (1 - run % 2) as f64,
            })
            .collect();
        let near = floor_near_each_run(&taking_turns(&floor, 2));
        // Each way's typical visit of the nearest runs (seven here, so that three of each way
        // count), the faster counting: the noise moves no floor by itself; near the drift the
        // slower way's visits from before it count.
        assert_floors(
            &near,
            &[
                1.0, 1.0, 1.0, 1.0, 1.0, 1.2, 1.0, 1.2, 1.45, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5,
            ],
        );
        let loads: Vec<f64> = (1..=16)
            .map(|run| if run <= 8 { 1.05 } else { 1.6 })
            .collect();
        let ratio = paired_by_run(&by_run(&loads, 1), &near).unwrap();
        // The noisy run reads 1.05x, not 0.53x; the drift's runs 1.07x (against the fastest
        // floor of all runs: 1.6x).
        assert!((ratio.estimate - 1.06).abs() < 0.02, "{ratio:?}");
        assert!(ratio.low > 1.0, "{ratio:?}");
    }

    /// A cold floor that found its file cached once reads a third way, faster than both: that
    /// one visit is left out, not made the floor of every run near it.
    #[test]
    fn a_stray_way_is_left_out() {
        let mut floor = taking_turns(&[1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2], 2);
        if let Some(visit) = floor.get_mut(4) {
            *visit = (5, 0.3, 2);
        }
        assert_floors(&floor_near_each_run(&floor), &[1.0; 10]);
        // Two runs of two ways: each way counts with the one visit it has.
        let two = taking_turns(&[1.0, 1.2], 2);
        assert_floors(&floor_near_each_run(&two), &[1.0, 1.0]);
    }

    /// A load exactly as fast as its floor's faster way, both varying by 10% from one visit
    /// to the next, reads about 1x: the floor near a run is its ways' typical visit, not the
    /// fastest of its visits there (which read 1.11x here).
    #[test]
    fn a_load_as_fast_as_its_floor_reads_about_one() {
        let fast = [0.9, 1.0, 1.1, 1.0, 0.9, 1.1, 1.0, 0.9];
        let floor: Vec<f64> = fast.iter().flat_map(|&way| [way, way + 0.2]).collect();
        let loads = by_run(
            &[
                1.0, 1.1, 0.9, 1.1, 1.0, 0.9, 0.9, 1.1, 1.0, 1.1, 0.9, 1.1, 1.0, 0.9, 0.9, 1.1,
            ],
            1,
        );
        let near = floor_near_each_run(&taking_turns(&floor, 2));
        // Each run's floor is its faster way's typical visit, at the first and last runs
        // too (three of each way counting there as elsewhere).
        assert_floors(
            &near,
            &[
                1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.05, 1.0, 1.0, 1.0, 0.95, 1.0, 1.0, 1.0, 1.0,
            ],
        );
        let ratio = paired_by_run(&loads, &near).unwrap();
        assert!((ratio.estimate - 1.0).abs() < 0.02, "{ratio:?}");
        assert!(ratio.low <= 1.0 && ratio.high >= 1.0, "{ratio:?}");
        // From the page cache every visit reads the same way: the five nearest count.
        let same_way: Vec<(usize, f64)> = by_run(&fast, 1)
            .into_iter()
            .map(|(run, seconds)| (run, seconds - 0.05))
            .collect();
        let pooled = floor_near_each_run(&one_way(&same_way));
        assert_floors(&pooled, &[0.95; 8]);
    }

    /// Rows measured in different runs (a later run measures only the rows still wide) are
    /// paired by run: each ratio over the runs both sides have, a floor near a run from the
    /// nearest runs it has.
    #[test]
    fn rows_measured_in_different_runs_are_paired_by_run() {
        // Ours in runs 1-5, the reference in runs 1, 2 and 5 only.
        let ours = by_run(&[1.0, 1.0, 9.0, 9.0, 1.0], 1);
        let theirs = vec![(1, 2.0), (2, 2.0), (5, 2.0)];
        let ratio = paired_by_run(&ours, &theirs).unwrap();
        assert_eq!(ratio.runs, 3);
        assert!((ratio.estimate - 0.5).abs() < 1e-9, "{ratio:?}");
        assert!(paired_by_run(&ours, &[(7, 1.0)]).is_none());
        // A floor measured in runs 1-3 and 10-13: the floors of runs 1-3 count runs 1-3, 10
        // and 11 (the nearest five), those of runs 10-13 runs 3 and 10-13.
        let floor = one_way(&[
            (1, 5.0),
            (2, 4.0),
            (3, 3.0),
            (10, 1.0),
            (11, 2.0),
            (12, 1.5),
            (13, 1.0),
        ]);
        assert_floors(
            &floor_near_each_run(&floor),
            &[3.0, 3.0, 3.0, 1.5, 1.5, 1.5, 1.5],
        );
        // Two floors added only in the runs both have: run 3's, 1 + (2 + 5) / 2.
        let floors: Floors = vec![
            one_way(&[(1, 1.0), (3, 1.0)]),
            one_way(&[(3, 2.0), (4, 5.0)]),
        ];
        let ratio = over_floors(&[(1, 3.0), (3, 6.0), (4, 3.0)], &floors).unwrap();
        assert_eq!(ratio.runs, 1);
        assert!((ratio.estimate - 6.0 / 4.5).abs() < 1e-9, "{ratio:?}");
        // A save's runs, each run's median.
        assert_eq!(
            median_per_run(&[(1, 3.0), (1, 1.0), (1, 2.0), (4, 7.0)]),
            vec![(1, 2.0), (4, 7.0)]
        );
    }

    /// halo2's checked parameters read fresh (33 MB from the page cache, a new process a
    /// load) over their floor, in two default runs back to back: the loads steady at 32-34
    /// ms, the floor's visits 5-11 ms (two a run then). The floor's typical visit near each
    /// run, taken as known, made intervals that did not meet; drawing its visits again too,
    /// they meet, as two runs of one loader must.
    #[test]
    fn a_floors_own_noise_is_in_its_interval() {
        let first = (
            by_run(&[32.1, 32.4, 32.0, 32.6, 33.2], 1),
            one_way(&by_run(
                &[6.5, 8.6, 9.2, 9.9, 8.5, 7.4, 7.8, 10.1, 6.7, 9.3],
                2,
            )),
        );
        let second = (
            by_run(&[32.7, 32.8, 32.2, 33.1, 33.7], 1),
            one_way(&by_run(
                &[6.7, 5.1, 5.2, 9.0, 10.6, 6.3, 7.3, 9.9, 8.4, 6.5],
                2,
            )),
        );
        let meet = |a: &Ratio, b: &Ratio| a.low <= b.high && b.low <= a.high;
        let known = |(loads, floor): &(ByRun, Vec<FloorVisit>)| {
            paired_by_run(loads, &floor_near_each_run(floor)).unwrap()
        };
        let (a, b) = (known(&first), known(&second));
        assert!(!meet(&a, &b), "{a:?} {b:?}");
        let drawn = |(loads, floor): &(ByRun, Vec<FloorVisit>)| {
            over_floors(loads, &vec![floor.clone()]).unwrap()
        };
        let (a, b) = (drawn(&first), drawn(&second));
        assert!(meet(&a, &b), "{a:?} {b:?}");
        // The estimates are the same either way: only the intervals widen.
        assert_eq!(a.estimate, known(&first).estimate);
        assert!(a.half_width() > known(&first).half_width(), "{a:?}");
    }

    /// A floor without noise adds none: each way's visits the same in every run (the second
    /// way the slower), loads exactly 1.2x the faster way, the interval is the point 1.2. A
    /// visit redrawn from the other way would move it.
    #[test]
    fn a_steady_floor_adds_no_noise() {
        let floor: Vec<f64> = (0..8).flat_map(|_| [1.0, 1.3]).collect();
        let loads = by_run(&[1.2; 16], 1);
        let ratio = over_floors(&loads, &vec![taking_turns(&floor, 2)]).unwrap();
        assert_eq!((ratio.estimate, ratio.low, ratio.high), (1.2, 1.2, 1.2));
        assert_eq!(ratio.runs, 16);
        // Beside a floor the load was not measured with, or no floor: no ratio.
        assert!(over_floors(&loads, &vec![one_way(&[(20, 1.0)])]).is_none());
        assert!(over_floors(&loads, &Vec::new()).is_none());
    }
}
