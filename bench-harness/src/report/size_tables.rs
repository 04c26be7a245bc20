//! One size's tables: a table per kind of load, the saves, the emulated link's share, then
//! the machine's limits and the key.

use std::fmt::Write as _;

use keycodec_core::Size;

use super::cells::{huge_pages, interval, kind_name, marked, mib, short_of_durable, speedup_cell};
use crate::measure::cpu::{CpuUse, FAULTS_TO_JUDGE, SYSTEM_S_TO_JUDGE};
use crate::plan::{durable_save_name, Kind, State, FLOOR, HALO2_NATIVE};
use crate::stats::{median, Ratio, SLOWED, SOUND_HALF_WIDTH as SOUND};
use crate::{Report, Row, SaveRow, SizeReport};

const LEGEND: &str = "\
load s: median; min: fastest; spread: (max - min) / median; runs: the runs that measured \
the row (after the minimum of runs, only the rows of the widest ratios are measured); x floor: this load over its own \
file's floor in its state (a floor row's mode names the file; a cold start's, its two files' \
floors added), run by run (each run's load over its floor's typical visit in that run and the \
runs near it, five or more; where it takes its ways in turn, of its fastest way), median and 95% interval (BELOW: the \
interval wholly below 0.95, a load beat the floor beyond the noise and a 5% tie: a measurement \
error); speedup: the reference's load over this one (halo2's reader of \
the same layout in the same state; for a remote load, downloading then loading; for a cache \
hit, a local load), run by run, median and 95% interval (bootstrap over the runs); saves: \
this save over halo2's pk.write + sync_all, run by run; no speedup is given for a BELOW row, and * marks an interval wider than --interval asked (a range, not a result); \
[1 run]: a ratio of one run, without an interval, never judged BELOW";

/// One size's tables: a table per kind of load, then the saves, then the machine's limits
/// and the key. Long on purpose: the tables in the order they print, each a block.
pub(super) fn size_table(out: &mut String, report: &Report, size: &SizeReport) {
    let _ = writeln!(
        out,
        "{}, k = {}, {} runs ({}), rows interleaved (order rotated each run){}{}{}",
        report.circuit.title(),
        size.k,
        size.runs,
        size.stopped,
        if report.full { ", full sweep" } else { "" },
        // `effective` holds unless a drop was refused (`--cold`, or the cold state).
        match (report.cold.requested, report.cold.effective) {
            (_, false) => ", cold reads REQUESTED BUT REFUSED by the kernel: reads were warm",
            (true, true) => ", cold reads (page cache dropped before each read)",
            (false, true) => "",
        },
        if report.replace {
            ", saves replace the previous run's file"
        } else {
            ", saves to a new path"
        }
    );
    let _ = writeln!(out, "{LEGEND}");
    let _ = writeln!(
        out,
        "{}",
        if report.huge_pages_asked {
            "memory: keycodec's loads of files in the page cache ask for transparent huge pages"
        } else {
            "memory: every load in small pages (this machine's balloon reports free memory to its \
             host, which takes back the blocks huge pages come from: a load asking for them took \
             three times as long after the machine idled)"
        }
    );
    let _ = writeln!(
        out,
        "{}",
        match report.points_checked_at_once {
            8 => "points: keycodec's checked loads check G1 points eight at a time (AVX-512 IFMA)",
            4 => {
                "points: keycodec's checked loads check G1 points four at a time (AVX2; this \
                 CPU has no AVX-512 IFMA)"
            }
            _ => {
                "points: keycodec's checked loads check G1 points one at a time (this CPU has \
                 no AVX2, or KEYCODEC_WIDE_POINT_CHECK=0)"
            }
        }
    );
    let every_cold = report.cold.requested;
    if let Some(cached) = residency(size, false, every_cold) {
        let _ = writeln!(out, "{cached}");
    }
    if let Some(faults) = fault_cost(size) {
        let _ = writeln!(out, "{faults}");
    }
    if let Some(wide) = wide_by_column(size) {
        let _ = writeln!(out, "{wide}");
    }
    if let Some(cold) = residency(size, true, every_cold) {
        let _ = writeln!(out, "{cold}");
        let _ = writeln!(
            out,
            "cold loads: {}; {}; the floor by two ways in turn, the faster counting",
            if report.cold.idle_s > 0.0 {
                format!(
                    "each {:.1} s after its files' pages were dropped, unprimed (memory freed \
                     that long before, as after an idle moment)",
                    report.cold.idle_s
                )
            } else {
                "each primed just before (memory just freed: the best case for a read through the \
                 page cache; --cold-idle 3s for a machine that idled)"
                    .to_owned()
            },
            if report.reads_past_page_cache {
                "keycodec's reads past the page cache (O_DIRECT) where a first look at a \
                 large file finds that pays, halo2's through it"
            } else {
                "every load reads through the page cache"
            }
        );
    }
    for (kind, title) in [
        (Kind::Pk, "proving key"),
        (Kind::Params, "KZG parameters"),
        (Kind::ColdStart, "cold start: parameters + proving key"),
        (
            Kind::Remote,
            "proving key in object storage (loopback S3 server; floor: its ranges fetched into memory)",
        ),
        (
            Kind::RemoteStart,
            "cold start from storage: parameters by URL + proving key in S3, through a cache",
        ),
    ] {
        let title = match (kind, report.remote_server, &report.link) {
            (Kind::Remote | Kind::RemoteStart, Some(server), None) => {
                format!("{title}, server {server}")
            }
            (Kind::Remote | Kind::RemoteStart, Some(server), Some(link)) => format!(
                "{title}, server {server} behind an emulated link {} (\"of link\": the \
                 load's throughput over the link's total cap)",
                link.profile
            ),
            _ => title.to_owned(),
        };
        // keycodec's rows, then halo2's, then the floor (remote rows: by backend, as run).
        let mut rows: Vec<&Row> = size.rows.iter().filter(|row| row.kind == kind).collect();
        rows.sort_by_key(|row| match row.backend {
            _ if matches!(kind, Kind::Remote | Kind::RemoteStart) => 0,
            HALO2_NATIVE => 1,
            FLOOR => 2,
            _ => 0,
        });
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{title}");
        let _ = writeln!(
            out,
            "{:<13} {:<21} {:<8} {:<5} {:>6} {:>8} {:>8} {:>6} {:>4} {:>19} {:>20} {:>20} {:>12} {:>9} {:>3} {:>17} {:>6} {:>6}",
            "backend",
            "mode",
            "values",
            "state",
            "buffer",
            "load s",
            "min s",
            "spread",
            "runs",
            "x floor",
            "speedup [95%]",
            "steady [95%]",
            "file bytes",
            "load RSS",
            "ok",
            "huge pages",
            "sys s",
            "stalls"
        );
        for row in rows {
            let floor = match (row.below_floor, row.read_vs_floor) {
                (true, _) => "BELOW".to_owned(),
                (false, Some(ratio)) => interval(ratio),
                (false, None) => "-".to_owned(),
            };
            let _ = writeln!(
                out,
                "{:<13} {:<21} {:<8} {:<5} {:>6} {:>8.3} {:>8.3} {:>5.0}% {:>4} {:>19} {:>20} {:>20} {:>12} {:>9} {:>3} {:>17} {:>6} {:>6}",
                row.backend,
                row.mode,
                row.validation,
                row.state,
                Size(row.buffer_bytes).to_string(),
                row.read_s,
                row.read_min_s,
                row.read_spread * 100.0,
                runs_of(&row.read_run_numbers),
                floor,
                speedup_cell(row, row.speedup, report.stopping.interval),
                speedup_cell(row, row.steady_speedup, report.stopping.interval),
                row.file_bytes,
                row.peak_rss_bytes.map_or("n/a".to_owned(), mib),
                if row.verified { "yes" } else { "NO" },
                huge_pages(&row.huge_pages_runs),
                system_seconds(&row.cpu_runs),
                row.compact_stalls.map_or("n/a".to_owned(), |n| n.to_string()),
            );
        }
    }
    let saves: Vec<&SaveRow> = size.saves.iter().collect();
    if !saves.is_empty() {
        let _ = writeln!(
            out,
            "\nsaves (keycodec's: atomic and durable; halo2's: File::create, pk.write, sync_all; \
             an upload behind a link also to its last part: when the link had carried every \
             byte, plus its latency, over the whole upload)"
        );
        let _ = writeln!(
            out,
            "{:<7} {:<13} {:<16} {:<12} {:>6} {:>8} {:>8} {:>6} {:>4} {:>22} {:>12}",
            "of",
            "backend",
            "mode",
            "timed",
            "buffer",
            "save s",
            "min s",
            "spread",
            "runs",
            "x write+sync [95%]",
            "file bytes"
        );
        for save in saves {
            let _ = writeln!(
                out,
                "{:<7} {:<13} {:<16} {:<12} {:>6} {:>8.3} {:>8.3} {:>5.0}% {:>4} {:>22} {:>12}",
                kind_name(save.kind),
                save.backend,
                save.mode,
                match save.durable {
                    false => short_of_durable(save),
                    true => durable_save_name(save.backend),
                },
                Size(save.buffer_bytes).to_string(),
                save.save_s,
                save.save_min_s,
                save.save_spread * 100.0,
                runs_of(&save.save_run_numbers),
                match (save.backend, save.durable) {
                    (HALO2_NATIVE, true) => "(reference)".to_owned(),
                    _ => save.vs_reference.map_or("-".to_owned(), |ratio| marked(
                        ratio,
                        report.stopping.interval
                    )),
                },
                save.file_bytes,
            );
        }
    }
    if let Some(link) = &report.link {
        link_fractions(out, size, link);
    }
    let limits = &size.limits;
    let gbps = |s: f64| limits.bytes as f64 / s / 1e9;
    let _ = writeln!(
        out,
        "\nmachine limits for {} bytes (same run): bulk write {:.3} s ({:.2} GB/s, synced); bulk read into fresh memory {:.3} s ({:.2} GB/s), the same over every core {:.3} s ({:.2} GB/s); into populated memory {:.3} s ({:.2} GB/s) after {:.3} s populating; payload checksum (XXH3-64, in memory) {:.3} s ({:.2} GB/s)",
        limits.bytes,
        limits.bulk_write_s,
        gbps(limits.bulk_write_s),
        limits.bulk_read_s,
        gbps(limits.bulk_read_s),
        limits.bulk_read_parallel_s,
        gbps(limits.bulk_read_parallel_s),
        limits.bulk_read_populated_s,
        gbps(limits.bulk_read_populated_s),
        limits.populate_s,
        limits.checksum_s,
        gbps(limits.checksum_s),
    );
    let fixture = &size.fixture;
    let key = match fixture.domain_memory_bytes {
        Some(domain) => {
            let whole = fixture.key_memory_bytes + domain;
            format!(
                "{} of field elements + {} of evaluation domain = {}",
                mib(fixture.key_memory_bytes),
                mib(domain),
                mib(whole),
            )
        }
        None => format!("{} of field elements", mib(fixture.key_memory_bytes)),
    };
    let _ = writeln!(
        out,
        "key in memory: {key}; its digest (BLAKE3, every core, in memory) {:.3} s; circuit {}; fixture: {} in {:.1} s; this size took {:.0} s\n",
        fixture.digest_s,
        fixture.circuit_params,
        fixture.origin,
        fixture.seconds,
        size.seconds,
    );
    if let Some(peak) = report.harness_peak_rss_bytes {
        let _ = writeln!(out, "harness peak RSS so far: {}\n", mib(peak));
    }
}

/// The remote loads and uploads as fractions of the emulated link's total cap (medians).
fn link_fractions(out: &mut String, size: &SizeReport, link: &crate::model::LinkInfo) {
    let of_link = |bytes: u64, seconds: f64| bytes as f64 / seconds / link.total_bytes_per_s;
    let _ = writeln!(
        out,
        "\nover the emulated link {} (median throughput / {:.0} MB/s):",
        link.profile,
        link.total_bytes_per_s / 1e6
    );
    let mut line = |backend: &str, mode: &str, validation: &str, bytes: u64, seconds: f64| {
        let _ = writeln!(
            out,
            "  {backend:<13} {mode:<16} {validation:<12} {:>5.0}% of the link ({seconds:.3} s)",
            100.0 * of_link(bytes, seconds),
        );
    };
    for row in size.rows.iter().filter(|row| row.kind == Kind::Remote) {
        line(
            row.backend,
            row.mode,
            row.validation,
            row.file_bytes,
            row.read_s,
        );
    }
    for save in size.saves.iter().filter(|save| save.kind == Kind::Remote) {
        let timed = if save.durable {
            "whole"
        } else {
            short_of_durable(save)
        };
        line(save.backend, save.mode, timed, save.file_bytes, save.save_s);
    }
    for crossover in crossovers(size) {
        let _ = writeln!(out, "  {crossover}");
    }
}

/// Where compact's remote load overtakes each other backend's: the link speed below which
/// it is faster. Each load is taken as two parts: moving its object (its floor's time, which
/// scales with the link) and the rest (its median over its floor: checks, and compact's
/// recomputation, which the link does not change); a part a backend overlaps with the
/// transfer counts as moved.
fn crossovers(size: &SizeReport) -> Vec<String> {
    // (bytes, seconds beyond moving them) of each backend's remote load.
    let parts = |backend: &str| {
        let median = |mode: &str| {
            size.rows
                .iter()
                .find(|row| row.kind == Kind::Remote && row.backend == backend && row.mode == mode)
                .map(|row| (row.file_bytes, row.read_s))
        };
        let ((bytes, load), (_, floor)) = median("ranged GETs").zip(median("GETs to memory"))?;
        Some((bytes as f64, (load - floor).max(0.0)))
    };
    let Some((compact_bytes, compact_rest)) = parts("compact") else {
        return Vec::new();
    };
    let mut backends: Vec<&str> = Vec::new();
    for row in size.rows.iter().filter(|row| row.kind == Kind::Remote) {
        if !backends.contains(&row.backend) {
            backends.push(row.backend);
        }
    }
    backends
        .into_iter()
        .filter(|&backend| backend != "compact")
        .filter_map(|backend| {
            let (bytes, rest) = parts(backend)?;
            let speed = match crossover((compact_bytes, compact_rest), (bytes, rest)) {
                Crossover::Never => "never (its object is no smaller)".to_owned(),
                Crossover::Always => "at any link speed".to_owned(),
                Crossover::Below(rate) => {
                    format!(
                        "below {:.0} MB/s ({:.1} Gbit/s)",
                        rate / 1e6,
                        rate * 8.0 / 1e9
                    )
                }
            };
            Some(format!(
                "compact loads faster than {backend} {speed}: {:.0} MB against {:.0} MB to \
                 move, {compact_rest:.2} s against {rest:.2} s beyond moving them",
                compact_bytes / 1e6,
                bytes / 1e6,
            ))
        })
        .collect()
}

/// Link speeds at which a load of a smaller object wins.
#[derive(Debug, PartialEq)]
enum Crossover {
    /// Its object is no smaller: it never wins by moving less.
    Never,
    /// It is no slower beyond moving its bytes either.
    Always,
    /// Below this many bytes per second.
    Below(f64),
}

/// Where a load of `small` = (bytes, seconds beyond moving them) beats one of `other`: at a
/// link of `r` bytes per second each takes `bytes / r + seconds`.
fn crossover(small: (f64, f64), other: (f64, f64)) -> Crossover {
    let (saved, extra) = (other.0 - small.0, small.1 - other.1);
    if saved <= 0.0 {
        Crossover::Never
    } else if extra <= 0.0 {
        Crossover::Always
    } else {
        Crossover::Below(saved / extra)
    }
}

/// A row's median system time a load, or `-` where its loads' were not measured.
fn system_seconds(runs: &[CpuUse]) -> String {
    let seconds: Vec<f64> = runs.iter().map(|used| used.system_s).collect();
    match seconds.is_empty() {
        true => "-".to_owned(),
        false => format!("{:.2}", median(&seconds)),
    }
}

/// What the kernel's time came to a page fault over the fresh loads that took enough to tell
/// ([`CpuUse::fault_cost_us`]), if any did: its range, and how far it swung within a row (the
/// same loader's loads, comparable with each other). A fresh load's memory is mapped as it is
/// filled, and where that cost swings, so do fresh loads, whoever's reader they are.
fn fault_cost(size: &SizeReport) -> Option<String> {
    let per_row: Vec<Vec<f64>> = size
        .rows
        .iter()
        .filter(|row| row.state == State::Fresh.name())
        .map(|row| {
            row.cpu_runs
                .iter()
                .filter_map(CpuUse::fault_cost_us)
                .collect()
        })
        .collect();
    let mut micros: Vec<f64> = per_row.iter().flatten().copied().collect();
    micros.sort_by(f64::total_cmp);
    let (least, most) = (*micros.first()?, *micros.last()?);
    let swing = per_row
        .iter()
        .filter_map(|costs| {
            let least = costs.iter().copied().reduce(f64::min)?;
            let most = costs.iter().copied().reduce(f64::max)?;
            Some(most / least)
        })
        .fold(1.0, f64::max);
    Some(format!(
        "fresh loads: {least:.1}-{most:.1} µs of system time a page fault (median {:.1}; {} \
         loads of {FAULTS_TO_JUDGE} faults and {SYSTEM_S_TO_JUDGE} s or more; system time \
         also copies from the page cache), up to {swing:.1}x within a row{}",
        median(&micros),
        micros.len(),
        match swing >= 2.0 {
            true => {
                ": the kernel's cost of mapping memory swung twofold or more, and fresh \
                 loads' times, halo2's and keycodec's alike, swing with it"
            }
            false => "",
        },
    ))
}

/// How many load ratios to halo2, in every state, are too wide to claim (wider than
/// [`SOUND`], without an interval, or below their floor) with every load and in the steady
/// column; `None` without such ratios.
fn wide_by_column(size: &SizeReport) -> Option<String> {
    let to_halo2: Vec<&Row> = size
        .rows
        .iter()
        .filter(|row| {
            row.reference
                .as_ref()
                .is_some_and(|r| r.backend == HALO2_NATIVE)
        })
        .collect();
    if to_halo2.is_empty() {
        return None;
    }
    let too_wide = |row: &Row, ratio: Option<Ratio>| {
        row.below_floor || ratio.is_none_or(|ratio| ratio.too_wide_to_claim())
    };
    Some(format!(
        "load ratios to halo2 too wide to claim (wider than ±{:.0}%, without an interval or \
         BELOW): {} of {} with every load; {} in the steady column (each row's loads that took \
         over {SLOWED}x its usual system time a page fault left out, with the other side's \
         load of that run)",
        SOUND * 100.0,
        to_halo2
            .iter()
            .filter(|row| too_wide(row, row.speedup))
            .count(),
        to_halo2.len(),
        to_halo2
            .iter()
            .filter(|row| too_wide(row, row.steady_speedup))
            .count(),
    ))
}

/// What the page cache held of the files of the `cold` rows (every row under `--cold`,
/// `every_cold`), or of the others (warm and fresh, those whose share was measured), as
/// their loads began, if there are such rows: a cold row is only cold if that is near
/// nothing, and another only reads from the page cache if it is near everything.
fn residency(size: &SizeReport, cold: bool, every_cold: bool) -> Option<String> {
    let shares: Vec<Option<f64>> = size
        .rows
        .iter()
        .filter(|row| (every_cold || row.state == State::Cold.name()) == cold)
        // A remote load's files are the server's: the others' without a share are skipped.
        .filter(|row| cold || row.cached_before.is_some())
        .map(|row| row.cached_before)
        .collect();
    let rows = if cold { "cold rows" } else { "other rows" };
    if shares.is_empty() {
        return None;
    }
    Some(match shares.into_iter().collect::<Option<Vec<f64>>>() {
        Some(shares) => {
            let (bound, share, off) = if cold {
                let most = shares.into_iter().fold(0.0, f64::max);
                ("at most", most, (most > 0.1).then_some(": NOT COLD"))
            } else {
                let least = shares.into_iter().fold(1.0, f64::min);
                (
                    "at least",
                    least,
                    (least < 0.9).then_some(": NOT ALL CACHED"),
                )
            };
            format!(
                "{rows}: {bound} {:.1}% of a load's file pages were in the page cache as it \
                 began (mincore){}",
                share * 100.0,
                off.unwrap_or_default()
            )
        }
        None => {
            format!("{rows}: what the page cache held as a load began could not be told (mincore)")
        }
    })
}

/// How many runs measured a row, of its samples' run numbers (several samples of a run, as
/// a floor took before it was visited once a run, count once).
fn runs_of(run_numbers: &[usize]) -> usize {
    let mut runs = run_numbers.to_vec();
    runs.dedup();
    runs.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two samples of a run (a floor's in earlier reports) count as one run.
    #[test]
    fn a_rows_runs_are_its_distinct_run_numbers() {
        assert_eq!(runs_of(&[1, 1, 2, 2, 5, 5]), 3);
        assert_eq!(runs_of(&[1, 2, 3]), 3);
        assert_eq!(runs_of(&[]), 0);
    }

    /// compact's 47 MB with 3.5 s of recomputation against rawbytes' 1.13 GB with 0.4 s:
    /// level at 350 MB/s, where both take 3.63 s.
    #[test]
    fn a_smaller_slower_load_wins_below_the_link_speed_where_both_take_as_long() {
        let (small, large) = ((47e6, 3.5), (1.132e9, 0.4));
        let Crossover::Below(rate) = crossover(small, large) else {
            panic!("no crossover");
        };
        let time = |(bytes, rest): (f64, f64), rate: f64| bytes / rate + rest;
        assert!((time(small, rate) - time(large, rate)).abs() < 1e-9);
        assert!(time(small, rate * 0.9) < time(large, rate * 0.9));
        assert!(time(small, rate * 1.1) > time(large, rate * 1.1));
        assert_eq!(crossover(small, (47e6, 0.1)), Crossover::Never);
        assert_eq!(crossover((47e6, 0.1), large), Crossover::Always);
    }
}
