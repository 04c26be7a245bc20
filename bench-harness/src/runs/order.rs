//! Which case a run takes when, and what primes the memory a new process meets before it.

use crate::exec::Sample;
use crate::plan::{Case, Plan, State, FLOOR, HALO2_NATIVE};
use crate::stats::rotation;

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
pub(super) fn visiting_order(plan: &Plan<'_>, run: usize) -> Vec<usize> {
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
pub(super) struct After {
    state: State,
    /// It took at least [`PRIMED_BYTES`], none of it in huge pages.
    small_pages: bool,
}

impl After {
    /// What `sample`, a load in `state`, left.
    pub(super) fn of(state: State, sample: &Sample) -> Self {
        After {
            state,
            small_pages: sample.huge_pages == Some(0)
                && sample.rss_rise.is_some_and(|rise| rise >= PRIMED_BYTES),
        }
    }
}

/// A load that took this much memory in small pages is followed by a primer.
pub(super) const PRIMED_BYTES: u64 = 256 << 20;

/// Whether a load in `state`, after `before`, is first primed: a load in a new process that
/// is the first of its state in the run, or follows a load that took its memory in small
/// pages (halo2's reader; every load from the disk), so that it meets memory a load of
/// keycodec's has just freed, as the rest of its group do (see [`visiting_order`]). A load
/// asking for huge pages right after one in small pages waited for memory the host had
/// taken back (a floor of the k = 18 key: 0.43-0.71 s after halo2's trusted read,
/// 0.29-0.39 s after a load of keycodec's).
pub(super) fn needs_priming(before: Option<After>, state: State) -> bool {
    state != State::Warm && before.is_none_or(|before| before.state != state || before.small_pages)
}

/// The load run untimed to prime the memory a new process meets: of keycodec's loads in a
/// new process, preferring one with its files in the page cache (a load from the disk would
/// only be slower), then one of a single file with its values trusted (the cheapest, as a
/// cold start of two files checked took twice as long for the same memory), then the
/// largest by `bytes` (each file's last save); not a floor (a cold floor takes its ways in
/// turn by visit).
pub(super) fn primer<'p, 'a>(plan: &'p Plan<'a>, bytes: &[u64]) -> Option<&'p Case<'a>> {
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
