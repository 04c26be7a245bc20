//! How the tables name rows and print values: labels, ratios with their intervals, memory.

use crate::plan::Kind;
use crate::stats::Ratio;
use crate::{Row, SaveRow};

/// What a save row that is not the durable save timed: halo2's write before its sync, or an
/// upload to its last part.
pub(super) fn short_of_durable(save: &SaveRow) -> &'static str {
    if save.kind == Kind::Remote {
        "to last part"
    } else {
        "write only"
    }
}

pub(super) fn save_label(save: &SaveRow) -> String {
    format!(
        "save {} {} {} {}",
        kind_name(save.kind),
        save.backend,
        save.mode,
        if save.durable {
            String::new()
        } else {
            format!("({})", short_of_durable(save))
        }
    )
    .trim_end()
    .to_owned()
}

pub(super) fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Pk => "key",
        Kind::Params => "params",
        Kind::ColdStart => "start",
        Kind::Remote => "remote",
        Kind::RemoteStart => "remote start",
    }
}

/// A load row's speed-up (`ratio`: its `speedup` or its `steady_speedup`): none for a row
/// below its floor (a measurement error, not a ratio), and marked when its interval missed
/// the target.
pub(super) fn speedup_cell(row: &Row, ratio: Option<Ratio>, target: f64) -> String {
    match (row.below_floor, ratio) {
        (true, _) => "- (BELOW)".to_owned(),
        (false, Some(ratio)) => marked(ratio, target),
        (false, None) => "-".to_owned(),
    }
}

/// The interval, with `*` when it is wider than `target` (+-, relative).
pub(super) fn marked(ratio: Ratio, target: f64) -> String {
    if ratio.half_width() > target {
        format!("{}*", interval(ratio))
    } else {
        interval(ratio)
    }
}

/// `2.31 [2.10, 2.52]`.
pub(super) fn interval(ratio: Ratio) -> String {
    ratio.to_string()
}

/// Memory in huge pages over the runs: median (least-most), or `n/a`.
pub(super) fn huge_pages(runs: &[u64]) -> String {
    let mut sorted = runs.to_vec();
    sorted.sort_unstable();
    match (sorted.get(sorted.len() / 2), sorted.first(), sorted.last()) {
        (Some(&median), Some(&least), Some(&most)) => {
            format!("{} ({}-{})", mib(median), mib(least), mib(most))
        }
        _ => "n/a".to_owned(),
    }
}

pub(super) fn mib(bytes: u64) -> String {
    format!("{:.0}MiB", bytes as f64 / f64::from(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_wider_than_the_target_are_marked() {
        let ratio = |low, high| Ratio {
            estimate: 2.0,
            low,
            high,
            runs: 5,
        };
        assert_eq!(marked(ratio(1.9, 2.1), 0.1), "2.00 [1.90, 2.10]");
        assert_eq!(marked(ratio(1.0, 3.0), 0.1), "2.00 [1.00, 3.00]*");
        let one_run = Ratio {
            runs: 1,
            ..ratio(2.0, 2.0)
        };
        assert_eq!(marked(one_run, 0.1), "2.00 [1 run]*");
    }
}
