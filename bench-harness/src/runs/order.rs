//! Which cases and files a run takes, in which order, and what primes the memory a new
//! process meets before a load.

use std::time::Duration;

use super::rows::Claim;
use crate::exec::Sample;
use crate::plan::{Case, Plan, State, FLOOR};
use crate::stats::rotation;

/// The cases and files a run measures: every one, or, after the minimum of runs, those of
/// the ratios still wide ([`wide_claims`], [`Selection::of_claims`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Selection {
    cases: Vec<bool>,
    files: Vec<bool>,
}

impl Selection {
    /// Every case and file of `plan`.
    pub(super) fn all(plan: &Plan<'_>) -> Self {
        Selection {
            cases: vec![true; plan.cases.len()],
            files: vec![true; plan.files.len()],
        }
    }

    /// The cases and files whose timings `wide`'s claims pair (each load, its reference and
    /// its floors; each save and halo2's), the widest first, each claim taken when the run
    /// still `fits` with it (a claim too long for the time left is passed over for the
    /// narrower ones after it): none when none fits.
    pub(super) fn of_claims(
        plan: &Plan<'_>,
        wide: &[&Claim],
        fits: impl Fn(&Selection) -> bool,
    ) -> Self {
        let mut selection = Selection::none(plan);
        for claim in wide {
            let mut with = selection.clone();
            for &case in &claim.cases {
                if let Some(taken) = with.cases.get_mut(case) {
                    *taken = true;
                }
            }
            for &file in &claim.files {
                if let Some(taken) = with.files.get_mut(file) {
                    *taken = true;
                }
            }
            if fits(&with) {
                selection = with;
            }
        }
        selection
    }

    /// No case and no file.
    pub(super) fn none(plan: &Plan<'_>) -> Self {
        Selection {
            cases: vec![false; plan.cases.len()],
            files: vec![false; plan.files.len()],
        }
    }

    /// Whether it measures case `index`.
    pub(super) fn case(&self, index: usize) -> bool {
        self.cases.get(index).copied().unwrap_or(false)
    }

    /// Whether it writes file `index`.
    pub(super) fn file(&self, index: usize) -> bool {
        self.files.get(index).copied().unwrap_or(false)
    }

    /// Whether it measures every case and writes every file.
    pub(super) fn is_all(&self) -> bool {
        self.cases.iter().chain(&self.files).all(|&taken| taken)
    }

    /// Whether it measures nothing.
    pub(super) fn is_empty(&self) -> bool {
        !self.cases.iter().chain(&self.files).any(|&taken| taken)
    }
}

/// The claims a run after the minimum measures, widest first, of those whose row was measured
/// in fewer than `max_runs` runs (a claim whose row was measured in as many is measured no
/// more): those wider than `sound` (+-25%), or, when none is, those wider than four fifths of
/// the widest, but not those within `interval` (the interval a run stops at). A row whose
/// ratios are all narrow enough is measured no more while others are still wide, and the
/// margin keeps a ratio just inside `sound` measured until the widest are no wider: the time
/// goes to the rows that need it. None when every claim is within `interval` or its row was
/// measured `max_runs` times.
pub(super) fn wide_claims(
    claims: &[Claim],
    sound: f64,
    interval: f64,
    max_runs: usize,
) -> Vec<&Claim> {
    let mut open: Vec<&Claim> = claims
        .iter()
        .filter(|claim| claim.runs < max_runs)
        .collect();
    open.sort_by(|a, b| b.ratio.half_width().total_cmp(&a.ratio.half_width()));
    let widest = open.first().map_or(0.0, |claim| claim.ratio.half_width());
    let limit = if widest > sound {
        sound
    } else {
        (widest * WIDEST_SHARE).max(interval)
    };
    open.retain(|claim| claim.ratio.half_width() > limit);
    open
}

/// Once every ratio is within +-25%, a run measures those wider than this share of the
/// widest. (In a default run at k = 18 that measured every row wider than `--interval`
/// instead, the one such run, the last, left 3 of 35 ratios wider than +-25% again; they had
/// all been within.)
const WIDEST_SHARE: f64 = 0.8;

/// What each case's visits (primers included) and each file's saves took in a run: the
/// length of a run that takes some of them is told from them.
pub(super) struct Costs {
    cases: Vec<Duration>,
    files: Vec<Duration>,
}

impl Costs {
    /// Nothing spent yet on `plan`'s cases and files.
    pub(super) fn of(plan: &Plan<'_>) -> Self {
        Costs {
            cases: vec![Duration::ZERO; plan.cases.len()],
            files: vec![Duration::ZERO; plan.files.len()],
        }
    }

    /// Adds a visit of case `index` that took `spent`.
    pub(super) fn add_case(&mut self, index: usize, spent: Duration) {
        if let Some(cost) = self.cases.get_mut(index) {
            *cost += spent;
        }
    }

    /// Adds a save of file `index` that took `spent`.
    pub(super) fn add_file(&mut self, index: usize, spent: Duration) {
        if let Some(cost) = self.files.get_mut(index) {
            *cost += spent;
        }
    }

    /// Takes the costs of what a run just spent on (the rest as last measured).
    pub(super) fn update(&mut self, spent: &Costs) {
        let take = |costs: &mut [Duration], spent: &[Duration]| {
            for (cost, &new) in costs.iter_mut().zip(spent) {
                if new > Duration::ZERO {
                    *cost = new;
                }
            }
        };
        take(&mut self.cases, &spent.cases);
        take(&mut self.files, &spent.files);
    }

    /// Seconds a run taking `selection` would spend, as last measured.
    pub(super) fn of_selection(&self, selection: &Selection) -> f64 {
        let sum = |costs: &[Duration], taken: &dyn Fn(usize) -> bool| -> f64 {
            costs
                .iter()
                .enumerate()
                .filter(|&(index, _)| taken(index))
                .map(|(_, cost)| cost.as_secs_f64())
                .sum()
        };
        sum(&self.cases, &|index| selection.case(index))
            + sum(&self.files, &|index| selection.file(index))
    }
}

/// The order in which run `run` takes the plan's cases (indices, each once): grouped by
/// state, the groups' order and the order within each rotated run by run ([`rotation`]).
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

/// The visits of `state`'s cases, each once a run: the loads in plan order, and between
/// them, spread evenly, the floors.
fn group_visits(plan: &Plan<'_>, state: State) -> Vec<usize> {
    let of_state = |floor: bool| -> Vec<usize> {
        plan.cases
            .iter()
            .enumerate()
            .filter(|(_, case)| case.state == state && (case.backend == FLOOR) == floor)
            .map(|(index, _)| index)
            .collect()
    };
    let (floors, mut visits) = (of_state(true), of_state(false));
    // From the last, so that each position counts loads only.
    let loads = visits.len();
    for (at, &index) in floors.iter().enumerate().rev() {
        let position = ((at + 1) * loads / (floors.len() + 1)).min(visits.len());
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
/// keycodec's has just freed, as the rest of its group do (see [`visiting_order`]).
///
/// - A load asking for huge pages right after one in small pages waited for memory the host
///   had taken back (a floor of the k = 18 key: 0.43-0.71 s after halo2's trusted read,
///   0.29-0.39 s after a load of keycodec's). Where loads ask for none (`huge_pages` false,
///   [`keycodec_core::asks_for_huge_pages`]), a load from the page cache costs the same
///   whatever came before it, and is not primed: a primer would only take the time of runs.
/// - A load from the disk fills the page cache, whose pages come from the blocks such a host
///   takes back unless memory was freed just before (the k = 18 key read from the disk on
///   one thread: 0.41-0.45 s right after its pages were dropped, 1.28-1.46 s 3 s after):
///   primed whatever pages loads ask for (a key's load from the disk takes small pages, so
///   each load after one is; one after the parameters' load, under [`PRIMED_BYTES`], is not),
///   by a process that takes memory in huge pages ([`crate::exec::prime_in_child`]) and
///   whose exit frees 2 MiB blocks. Unprimed, or primed by a load in small pages, a fifth
///   to a third of the cold key loads of a default run, halo2's and keycodec's, took
///   1.2-2.5 s against 0.5 s.
///   (`--cold-idle` waits before each cold load instead, unprimed: [`Runner::idle_before_cold`](super::Runner::idle_before_cold).)
pub(super) fn needs_priming(before: Option<After>, state: State, huge_pages: bool) -> bool {
    let after_other = before.is_none_or(|before| before.state != state || before.small_pages);
    match state {
        State::Warm => false,
        State::Fresh => huge_pages && after_other,
        State::Cold => after_other,
    }
}

/// How much memory the primer of `case` takes: twice what it reads (its memory, and the page
/// cache a read from the disk fills), up to the most any load in a new process reads (each
/// file as long as its last save, `bytes`). So a key's primer frees about what a load of
/// the key takes, and a primer of the parameters, 30 times smaller, costs as much less.
pub(super) fn primer_bytes(plan: &Plan<'_>, case: &Case<'_>, bytes: &[u64]) -> u64 {
    let largest = plan
        .cases
        .iter()
        .filter(|case| case.state != State::Warm)
        .map(|case| case.bytes_read(bytes))
        .max()
        .unwrap_or(0);
    case.bytes_read(bytes).saturating_mul(2).min(largest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Kind;
    use crate::stats::Ratio;

    #[test]
    fn fresh_loads_are_primed_only_where_loads_ask_for_huge_pages() {
        let after = |state, small_pages| Some(After { state, small_pages });
        for (before, state, primed) in [
            (None, State::Fresh, true),
            (after(State::Fresh, false), State::Fresh, false),
            (after(State::Fresh, true), State::Fresh, true),
            (after(State::Warm, false), State::Cold, true),
            (after(State::Cold, true), State::Cold, true),
            (after(State::Cold, false), State::Cold, false),
            (None, State::Warm, false),
        ] {
            assert_eq!(needs_priming(before, state, true), primed);
            assert_eq!(
                needs_priming(before, state, false),
                primed && state == State::Cold
            );
        }
    }

    #[test]
    fn a_primer_takes_twice_what_its_load_reads_up_to_the_largest_load() {
        let mut plan = Plan::empty();
        let mut case = |files: Vec<usize>, state| {
            plan.case(
                (Kind::Pk, "rawbytes", "RawBytes", "checked", state),
                files,
                Box::new(|_, _| Err("not run".to_owned())),
            )
        };
        let (key, parameters) = (case(vec![0], State::Cold), case(vec![1], State::Cold));
        let start = case(vec![1, 0], State::Fresh);
        // A larger file loaded only in the harness's own process counts for nothing.
        case(vec![2], State::Warm);
        let bytes = [1000, 30, 5000];
        let primer = |case: usize| primer_bytes(&plan, plan.cases.get(case).unwrap(), &bytes);
        assert_eq!(primer(key), 1030);
        assert_eq!(primer(parameters), 60);
        assert_eq!(primer(start), 1030);
    }

    /// A claim on `cases` of half width `half_width` around 1, its row and its ratio
    /// measured in `runs` runs.
    fn claim_of(half_width: f64, cases: Vec<usize>, runs: usize) -> Claim {
        Claim {
            ratio: Ratio {
                estimate: 1.0,
                low: 1.0 - half_width,
                high: 1.0 + half_width,
                runs,
            },
            runs,
            cases,
            files: Vec::new(),
        }
    }

    /// A claim on `cases` of half width `half_width` around 1, measured in 5 runs.
    fn claim(half_width: f64, cases: Vec<usize>) -> Claim {
        claim_of(half_width, cases, 5)
    }

    /// A state's floors, visited once a run as its loads are, are spread evenly among them,
    /// not bunched at the end where the plan adds them.
    #[test]
    fn a_states_floors_are_spread_among_its_loads() {
        let mut plan = six_cases();
        for _ in 0..2 {
            plan.case(
                (Kind::Pk, FLOOR, "rawbytes RawBytes", "-", State::Fresh),
                Vec::new(),
                Box::new(|_, _| Err("not run".to_owned())),
            );
        }
        assert_eq!(group_visits(&plan, State::Fresh), [0, 1, 6, 2, 3, 7, 4, 5]);
        assert!(group_visits(&plan, State::Cold).is_empty());
    }

    /// A plan of six cases.
    fn six_cases() -> Plan<'static> {
        let mut plan = Plan::empty();
        for _ in 0..6 {
            plan.case(
                (Kind::Pk, "rawbytes", "RawBytes", "checked", State::Fresh),
                Vec::new(),
                Box::new(|_, _| Err("not run".to_owned())),
            );
        }
        plan
    }

    /// The cases a selection takes.
    fn cases_of(selection: &Selection) -> Vec<usize> {
        (0..6).filter(|&case| selection.case(case)).collect()
    }

    /// Wider than +-25%: those alone. Then those wider than four fifths of the widest, never
    /// those within the interval a run stops at; none left: none.
    #[test]
    fn a_run_takes_the_widest_ratios_rows() {
        let plan = six_cases();
        let taken = |claims: &[Claim]| -> Vec<usize> {
            let wide = wide_claims(claims, 0.25, 0.1, 20);
            cases_of(&Selection::of_claims(&plan, &wide, |_| true))
        };
        let claims = [
            claim(0.4, vec![0, 1]),
            claim(0.3, vec![2, 1]),
            claim(0.24, vec![3, 1]),
        ];
        assert_eq!(taken(&claims), [0, 1, 2]);
        // Widest 0.28, over +-25%: not one just within it (0.23, over four fifths of 0.28).
        let claims = [claim(0.28, vec![0, 1]), claim(0.23, vec![2, 3])];
        assert_eq!(taken(&claims), [0, 1]);
        // Widest 0.2: those over 0.16.
        let claims = [
            claim(0.2, vec![0, 1]),
            claim(0.17, vec![2, 1]),
            claim(0.15, vec![3, 4]),
        ];
        assert_eq!(taken(&claims), [0, 1, 2]);
        // Widest 0.11: those over the interval, not over 0.088.
        let claims = [claim(0.11, vec![0, 1]), claim(0.095, vec![2, 1])];
        assert_eq!(taken(&claims), [0, 1]);
        // All within the interval: none.
        let claims = [claim(0.09, vec![0, 1])];
        assert!(wide_claims(&claims, 0.25, 0.1, 20).is_empty());
    }

    /// A claim measured in the most runs allowed is measured no more, and the rule applies
    /// to the others as if it were not there; when every wide claim has them, none is left.
    #[test]
    fn a_claim_at_the_most_runs_is_measured_no_more() {
        let plan = six_cases();
        let claims = [
            claim_of(0.5, vec![0, 1], 8),
            claim_of(0.2, vec![2, 1], 7),
            claim_of(0.17, vec![3, 4], 7),
            claim_of(0.1, vec![5], 7),
        ];
        let wide = wide_claims(&claims, 0.25, 0.05, 8);
        // Without the first, the widest is 0.2: those over 0.16.
        assert_eq!(
            cases_of(&Selection::of_claims(&plan, &wide, |_| true)),
            [1, 2, 3, 4]
        );
        let spent = [claim_of(0.5, vec![0, 1], 8), claim_of(0.09, vec![2], 8)];
        assert!(wide_claims(&spent, 0.25, 0.05, 8).is_empty());
        // Its row measured in the most runs, its ratio paired over fewer (a side missed a
        // run): measured no more.
        let mut paired_less = claim_of(0.5, vec![0, 1], 8);
        paired_less.ratio.runs = 6;
        assert!(wide_claims(&[paired_less], 0.25, 0.05, 8).is_empty());
    }

    /// Claims are taken widest first while the run fits; one that does not is passed over
    /// for narrower ones that do; none fitting, none.
    #[test]
    fn a_run_takes_as_many_of_the_widest_claims_as_fit() {
        let plan = six_cases();
        let claims = [
            claim(0.3, vec![0, 1]),
            claim(0.6, vec![2, 3, 4]),
            claim(0.4, vec![5, 1]),
        ];
        let wide = wide_claims(&claims, 0.25, 0.1, 20);
        let fitting = |most: usize| {
            cases_of(&Selection::of_claims(&plan, &wide, |selection| {
                cases_of(selection).len() <= most
            }))
        };
        assert_eq!(fitting(6), [0, 1, 2, 3, 4, 5]);
        // The widest (three cases), then the next (two more), not the third (a sixth).
        assert_eq!(fitting(5), [1, 2, 3, 4, 5]);
        // The widest is too long: the next two share a case and fit.
        assert_eq!(fitting(2), [1, 5]);
        assert_eq!(fitting(3), [2, 3, 4]);
        assert!(Selection::of_claims(&plan, &wide, |_| false).is_empty());
    }
}
