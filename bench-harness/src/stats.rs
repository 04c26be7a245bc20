//! Statistics that survive a noisy machine: the median beside the minimum and the spread of
//! repeated runs, and ratios taken run by run between rows measured side by side.

use serde::Serialize;

/// A row's repeated timings, summarised.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Summary {
    /// The median, seconds.
    pub median_s: f64,
    /// The fastest run, seconds: the least disturbed by the rest of the machine.
    pub min_s: f64,
    /// `(max - min) / median`: how much the runs disagreed (0.1 = 10%).
    pub spread: f64,
}

impl Summary {
    /// The summary of a non-empty sample (an empty one gives NaNs).
    pub fn of(runs: &[f64]) -> Self {
        let min = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let median = median(runs);
        Summary {
            median_s: median,
            min_s: if runs.is_empty() { f64::NAN } else { min },
            spread: if runs.is_empty() {
                f64::NAN
            } else {
                (max - min) / median
            },
        }
    }
}

/// A load the machine slowed took more than this many times its row's usual cost of one
/// unit of its work (the median over its row's loads whose cost could be told).
pub const SLOWED: f64 = 1.5;

/// Which of a row's loads the machine slowed ([`SLOWED`]), of each load's cost of a unit of
/// its work (for a load in a new process, its system time a page fault), `None` where it
/// cannot be told: such a load is never judged slowed.
pub fn slowed(costs: &[Option<f64>]) -> Vec<bool> {
    let judged: Vec<f64> = costs.iter().flatten().copied().collect();
    let usual = (!judged.is_empty()).then(|| median(&judged));
    costs
        .iter()
        .map(|cost| {
            cost.zip(usual)
                .is_some_and(|(cost, usual)| cost > SLOWED * usual)
        })
        .collect()
}

/// The widest a ratio's interval may be for a claim (half its width over its median, the
/// `+-` the report prints): after the minimum of runs, a run measures only the rows with a
/// ratio wider than this, while there are any; wider at the end, a time-capped run says how
/// many are and that more runs would narrow them.
pub const SOUND_HALF_WIDTH: f64 = 0.25;

/// The median of a sample (the mean of the middle two for even sizes; NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    median_in_place(&mut values.to_vec())
}

/// [`median`] of `values`, sorting them in place instead of a copy (for a loop that calls it
/// many times over a scratch buffer).
pub fn median_in_place(values: &mut [f64]) -> f64 {
    // Unstable, so without a buffer: values equal by `total_cmp` are the same bits.
    values.sort_unstable_by(f64::total_cmp);
    let upper = values.len() / 2;
    let middle = if values.len() % 2 == 1 {
        upper..upper + 1
    } else {
        upper.saturating_sub(1)..upper + 1
    };
    let middle = values.get(middle).unwrap_or_default();
    middle.iter().sum::<f64>() / middle.len() as f64
}

/// The median of `ours[i] / theirs[i]` over the runs both rows have: a ratio between rows
/// measured in the same run, so that a slow moment of the machine moves both sides. `None`
/// when the rows share no run.
pub fn paired_ratio(ours: &[f64], theirs: &[f64]) -> Option<f64> {
    let ratios: Vec<f64> = ours
        .iter()
        .zip(theirs)
        .filter(|(_, theirs)| **theirs > 0.0)
        .map(|(ours, theirs)| ours / theirs)
        .collect();
    (!ratios.is_empty()).then(|| median(&ratios))
}

/// A paired ratio over runs: the median of `ours[i] / theirs[i]`, and a 95% interval of that
/// median by bootstrap over the runs (the runs resampled with replacement).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Ratio {
    /// The median of the per-run ratios.
    pub estimate: f64,
    /// The interval's lower end (2.5th percentile of the resampled medians).
    pub low: f64,
    /// Its upper end (97.5th percentile).
    pub high: f64,
    /// Runs both rows have.
    pub runs: usize,
}

/// Runs a ratio needs before its interval says anything: the bootstrap of one run's ratio
/// draws that ratio every time, an interval of zero width around a single pair of loads.
pub const MIN_RUNS_FOR_INTERVAL: usize = 2;

impl Ratio {
    /// Whether the interval estimates the noise: the ratio pairs at least
    /// [`MIN_RUNS_FOR_INTERVAL`] runs. Without it `low` and `high` equal the estimate and say
    /// nothing.
    pub fn has_interval(&self) -> bool {
        self.runs >= MIN_RUNS_FOR_INTERVAL
    }

    /// Half the interval's width relative to the estimate: 0.1 is +-10%; infinite for a ratio
    /// without an interval ([`Ratio::has_interval`]), whose noise is unknown.
    pub fn half_width(&self) -> f64 {
        if !self.has_interval() {
            return f64::INFINITY;
        }
        (self.high - self.low) / 2.0 / self.estimate
    }

    /// Whether the ratio is too wide to claim: wider than [`SOUND_HALF_WIDTH`], or without an
    /// interval.
    pub fn too_wide_to_claim(&self) -> bool {
        self.half_width() > SOUND_HALF_WIDTH
    }

    /// The ratio inverted (`theirs / ours`), interval included.
    #[must_use]
    pub fn inverse(self) -> Self {
        Ratio {
            estimate: 1.0 / self.estimate,
            low: 1.0 / self.high,
            high: 1.0 / self.low,
            runs: self.runs,
        }
    }
}

/// `2.31 [2.10, 2.52]`: the estimate and its interval; `2.31 [1 run]` for a ratio without an
/// interval.
impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.has_interval() {
            return write!(f, "{:.2} [{} run]", self.estimate, self.runs);
        }
        write!(
            f,
            "{:.2} [{:.2}, {:.2}]",
            self.estimate, self.low, self.high
        )
    }
}

/// Resamples a bootstrap draws.
const BOOTSTRAP_DRAWS: usize = 2000;

/// [`Ratio`] of `ours` over `theirs`, run by run; `None` when they share no run.
pub fn paired(ours: &[f64], theirs: &[f64]) -> Option<Ratio> {
    let ratios: Vec<f64> = ours
        .iter()
        .zip(theirs)
        .filter(|(_, theirs)| **theirs > 0.0)
        .map(|(ours, theirs)| ours / theirs)
        .collect();
    if ratios.is_empty() {
        return None;
    }
    Some(bootstrapped(median(&ratios), ratios.len(), |rng| {
        resampled_median(&ratios, rng)
    }))
}

/// A [`Ratio`] of `estimate` over `runs` runs, its interval the 2.5th and 97.5th percentiles
/// of 2,000 bootstrap estimates, each `draw`n from a generator seeded alike
/// every time (the same runs give the same interval).
pub fn bootstrapped(
    estimate: f64,
    runs: usize,
    mut draw: impl FnMut(&mut rand::rngs::StdRng) -> f64,
) -> Ratio {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b63_626f_6f74);
    let mut medians: Vec<f64> = (0..BOOTSTRAP_DRAWS).map(|_| draw(&mut rng)).collect();
    medians.sort_by(f64::total_cmp);
    let at = |quantile: f64| {
        let index = ((medians.len() - 1) as f64 * quantile).round() as usize;
        medians.get(index).copied().unwrap_or(f64::NAN)
    };
    Ratio {
        estimate,
        low: at(0.025),
        high: at(0.975),
        runs,
    }
}

/// The median of `values` drawn again with replacement, as many as there are (NaN when
/// empty): one bootstrap estimate of their median.
pub fn resampled_median(values: &[f64], rng: &mut rand::rngs::StdRng) -> f64 {
    use rand::Rng;
    let draw: Vec<f64> = (0..values.len())
        .map(|_| {
            values
                .get(rng.gen_range(0..values.len()))
                .copied()
                .unwrap_or(f64::NAN)
        })
        .collect();
    median(&draw)
}

/// The order in which run `run` visits `count` rows: each run starts at another row, the
/// starts spread over the rows by the golden ratio (run 1 starts 62% of the way in, run 2
/// 24%, ...), so that no row always comes soon after the files are written, when the
/// kernel is still settling them (rotating by one row a run left the first rows of a plan
/// of 40 within the first 8 every run of a default run). A rotation keeps each row behind
/// the same neighbour in every run but the one it starts.
pub fn rotation(count: usize, run: usize) -> impl Iterator<Item = usize> {
    let golden = (run as f64 * 0.618_033_988_749_895).fract();
    let start = (golden * count as f64) as usize;
    (0..count).map(move |i| (i + start) % count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load whose cost is over 1.5x its row's usual is slowed; one whose cost cannot be
    /// told never is.
    #[test]
    fn slowed_loads_are_told_by_their_cost_against_their_rows() {
        // Costs 2.5, 2.5, 2.6, 4.0 and 3.8: the median 2.6, so 4.0 is 1.54x and 3.8 1.46x.
        let costs = [Some(2.5), Some(2.5), Some(2.6), Some(4.0), Some(3.8), None];
        assert_eq!(slowed(&costs), [false, false, false, true, false, false]);
        assert_eq!(slowed(&[None, None]), [false, false]);
        assert_eq!(slowed(&[]), Vec::<bool>::new());
    }

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn summary_reports_min_and_spread() {
        let summary = Summary::of(&[2.0, 1.0, 4.0]);
        assert_eq!(summary.median_s, 2.0);
        assert_eq!(summary.min_s, 1.0);
        assert_eq!(summary.spread, 1.5);
    }

    /// A ratio of one run has no interval: its noise is unknown, not nil.
    #[test]
    fn one_run_gives_no_interval() {
        let one = paired(&[2.0], &[1.0]).unwrap();
        assert_eq!((one.low, one.high), (2.0, 2.0));
        assert!(!one.has_interval());
        assert_eq!(one.half_width(), f64::INFINITY);
        assert_eq!(one.to_string(), "2.00 [1 run]");
        let two = paired(&[2.0, 2.2], &[1.0, 1.0]).unwrap();
        assert!(two.has_interval());
        assert!(two.half_width() < 0.1, "{two:?}");
        assert_eq!(two.to_string(), "2.10 [2.00, 2.20]");
    }

    #[test]
    fn paired_ratios_cancel_a_slow_run() {
        // The machine is twice as slow in the second run, for both rows.
        let ours = [1.0, 2.0, 1.1];
        let theirs = [2.0, 4.0, 2.2];
        assert_eq!(paired_ratio(&ours, &theirs), Some(0.5));
        assert_eq!(paired_ratio(&ours, &[]), None);
    }

    #[test]
    fn paired_intervals_hold_the_estimate_and_narrow_with_agreement() {
        let theirs = [2.0, 4.0, 2.2, 3.0, 2.5, 2.1, 3.3];
        // Twice as fast in every run: a point interval.
        let exact: Vec<f64> = theirs.iter().map(|t| t / 2.0).collect();
        let ratio = paired(&exact, &theirs).unwrap();
        assert_eq!((ratio.estimate, ratio.low, ratio.high), (0.5, 0.5, 0.5));
        assert_eq!(ratio.half_width(), 0.0);
        assert_eq!(ratio.inverse().estimate, 2.0);
        // Noisy: the interval holds the estimate and is wider.
        let noisy = [1.0, 2.4, 0.9, 1.8, 1.1, 1.3, 1.4];
        let ratio = paired(&noisy, &theirs).unwrap();
        assert!(ratio.low <= ratio.estimate && ratio.estimate <= ratio.high);
        assert!(ratio.half_width() > 0.0);
        assert_eq!(ratio.runs, 7);
        // Deterministic.
        let again = paired(&noisy, &theirs).unwrap();
        assert_eq!((ratio.low, ratio.high), (again.low, again.high));
        assert!(paired(&noisy, &[]).is_none());
    }

    #[test]
    fn rotation_spreads_who_goes_first() {
        assert_eq!(rotation(3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rotation(3, 1).collect::<Vec<_>>(), [1, 2, 0]);
        // Every run visits every row once.
        for run in 0..20 {
            let mut order: Vec<usize> = rotation(40, run).collect();
            order.sort_unstable();
            assert_eq!(order, (0..40).collect::<Vec<_>>());
        }
        // Over 8 runs of 40 rows, row 0 is never within the first 8 visits more than twice.
        let early = (0..8)
            .filter(|&run| rotation(40, run).take(8).any(|row| row == 0))
            .count();
        assert!(early <= 2, "row 0 came early in {early} of 8 runs");
        assert_eq!(rotation(0, 2).count(), 0);
    }
}
