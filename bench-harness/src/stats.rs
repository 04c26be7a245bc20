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

/// The median of a sample (the mean of the middle two for even sizes; NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let upper = sorted.len() / 2;
    let middle = if sorted.len() % 2 == 1 {
        upper..upper + 1
    } else {
        upper.saturating_sub(1)..upper + 1
    };
    let middle = sorted.get(middle).unwrap_or_default();
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

/// The order in which run `run` visits `count` rows: rotated by one row per run, so that no
/// row always follows the same neighbour (or always comes first after the files are
/// written, when the kernel is still settling them).
pub fn rotation(count: usize, run: usize) -> impl Iterator<Item = usize> {
    (0..count).map(move |i| (i + run) % count.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn paired_ratios_cancel_a_slow_run() {
        // The machine is twice as slow in the second run, for both rows.
        let ours = [1.0, 2.0, 1.1];
        let theirs = [2.0, 4.0, 2.2];
        assert_eq!(paired_ratio(&ours, &theirs), Some(0.5));
        assert_eq!(paired_ratio(&ours, &[]), None);
    }

    #[test]
    fn rotation_changes_who_goes_first() {
        assert_eq!(rotation(3, 0).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rotation(3, 1).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(rotation(3, 4).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(rotation(0, 2).count(), 0);
    }
}
