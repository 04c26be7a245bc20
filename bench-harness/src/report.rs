//! The tables, the JSON file and the SVG chart.

use std::fmt::Write as _;
use std::path::Path;

use keycodec_core::Size;
use plotters::prelude::*;

use crate::plan::{durable_save_name, Kind, FLOOR, HALO2_NATIVE};
use crate::stats::Ratio;
use crate::{Report, Row, SaveRow, SizeReport};

const LEGEND: &str = "\
load s: median; min: fastest; spread: (max - min) / median; x floor: the median over the \
fastest of its own file's floor in its state (a floor row's mode names the file; BELOW: \
the row's fastest beat the floor, a measurement error); speedup: the reference's load over this one (halo2's reader of \
the same layout in the same state; for a remote load, downloading then loading; for a cache \
hit, a local load), run by run, median and 95% interval (bootstrap over the runs); saves: \
this save over halo2's pk.write + sync_all, run by run; no speedup is given for a BELOW row, and * marks an interval wider than --interval asked (a range, not a result)";

/// The report as plain-text tables: per size, a table per kind of load and one of saves,
/// with the machine's limits and the key underneath; then, for several sizes, the sweep.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    for size in &report.sizes {
        size_table(&mut out, report, size);
    }
    if report.sizes.len() > 1 {
        sweep(&mut out, report);
    }
    out
}

/// One size's tables: a table per kind of load, then the saves, then the machine's limits
/// and the key. Long on purpose: the tables in the order they print, each a block.
fn size_table(out: &mut String, report: &Report, size: &SizeReport) {
    let _ = writeln!(
        out,
        "{}, k = {}, {} runs ({}), rows interleaved (order rotated each run){}{}{}",
        report.circuit.title(),
        size.k,
        size.runs,
        size.stopped,
        if report.full { ", full sweep" } else { "" },
        match (report.cold.requested, report.cold.effective) {
            (false, _) => "",
            (true, true) => ", cold reads (page cache dropped before each read)",
            (true, false) => ", cold reads REQUESTED BUT REFUSED by the kernel: reads were warm",
        },
        if report.replace {
            ", saves replace the previous run's file"
        } else {
            ", saves to a new path"
        }
    );
    let _ = writeln!(out, "{LEGEND}");
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
            "{:<13} {:<21} {:<8} {:<5} {:>6} {:>8} {:>8} {:>6} {:>7} {:>20} {:>12} {:>9} {:>3} {:>17} {:>6}",
            "backend",
            "mode",
            "values",
            "state",
            "buffer",
            "load s",
            "min s",
            "spread",
            "x floor",
            "speedup [95%]",
            "file bytes",
            "load RSS",
            "ok",
            "huge pages",
            "stalls"
        );
        for row in rows {
            let floor = match (row.below_floor, row.read_vs_floor) {
                (true, _) => "BELOW".to_owned(),
                (false, value) => optional(value, 2),
            };
            let _ = writeln!(
                out,
                "{:<13} {:<21} {:<8} {:<5} {:>6} {:>8.3} {:>8.3} {:>5.0}% {:>7} {:>20} {:>12} {:>9} {:>3} {:>17} {:>6}",
                row.backend,
                row.mode,
                row.validation,
                row.state,
                Size(row.buffer_bytes).to_string(),
                row.read_s,
                row.read_min_s,
                row.read_spread * 100.0,
                floor,
                speedup_cell(row, report.stopping.interval),
                row.file_bytes,
                row.peak_rss_bytes.map_or("n/a".to_owned(), mib),
                if row.verified { "yes" } else { "NO" },
                huge_pages(&row.huge_pages_runs),
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
            "{:<7} {:<13} {:<16} {:<12} {:>6} {:>8} {:>8} {:>6} {:>22} {:>12}",
            "of",
            "backend",
            "mode",
            "timed",
            "buffer",
            "save s",
            "min s",
            "spread",
            "x write+sync [95%]",
            "file bytes"
        );
        for save in saves {
            let _ = writeln!(
                out,
                "{:<7} {:<13} {:<16} {:<12} {:>6} {:>8.3} {:>8.3} {:>5.0}% {:>22} {:>12}",
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

/// Every size side by side: per row, its speedup at each `k`; per save, its ratio.
fn sweep(out: &mut String, report: &Report) {
    let ks: Vec<u32> = report.sizes.iter().map(|size| size.k).collect();
    let _ = writeln!(
        out,
        "sweep: {}, k = {} (cells: median [95% interval]; loads: halo2's reader in the same state over this row; saves: this save over halo2's write + sync)",
        report.circuit.title(),
        ks.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    );
    let mut header = format!("{:<44}", "k");
    for k in &ks {
        let _ = write!(header, " {k:>19}");
    }
    let _ = writeln!(out, "{header}");
    let mut bytes = format!("{:<44}", "key file bytes (rawbytes)");
    for size in &report.sizes {
        let file = size
            .saves
            .iter()
            .find(|save| save.kind == Kind::Pk && save.backend == "rawbytes")
            .map_or(0, |save| save.file_bytes);
        let _ = write!(bytes, " {file:>19}");
    }
    let _ = writeln!(out, "{bytes}");
    let mut labels: Vec<(Kind, String)> = Vec::new();
    for size in &report.sizes {
        for row in size.rows.iter().filter(|row| row.speedup.is_some()) {
            let label = format!(
                "{} {} {} {} {}",
                kind_name(row.kind),
                row.backend,
                row.mode,
                row.validation,
                row.state
            );
            if !labels.iter().any(|(_, known)| *known == label) {
                labels.push((row.kind, label));
            }
        }
    }
    for (_, label) in &labels {
        let mut line = format!("{label:<44}");
        for size in &report.sizes {
            let cell = size
                .rows
                .iter()
                .find(|row| {
                    format!(
                        "{} {} {} {} {}",
                        kind_name(row.kind),
                        row.backend,
                        row.mode,
                        row.validation,
                        row.state
                    ) == *label
                })
                .map_or("-".to_owned(), |row| {
                    speedup_cell(row, report.stopping.interval)
                });
            let _ = write!(line, " {cell:>19}");
        }
        let _ = writeln!(out, "{line}");
    }
    let mut saves: Vec<String> = Vec::new();
    for size in &report.sizes {
        for save in size
            .saves
            .iter()
            .filter(|s| s.backend != HALO2_NATIVE || !s.durable)
        {
            let label = save_label(save);
            if !saves.contains(&label) {
                saves.push(label);
            }
        }
    }
    for label in &saves {
        let mut line = format!("{label:<44}");
        for size in &report.sizes {
            let cell = size
                .saves
                .iter()
                .find(|save| save_label(save) == *label)
                .and_then(|save| save.vs_reference)
                .map_or("-".to_owned(), |ratio| {
                    marked(ratio, report.stopping.interval)
                });
            let _ = write!(line, " {cell:>19}");
        }
        let _ = writeln!(out, "{line}");
    }
}

/// What a save row that is not the durable save timed: halo2's write before its sync, or an
/// upload to its last part.
fn short_of_durable(save: &SaveRow) -> &'static str {
    if save.kind == Kind::Remote {
        "to last part"
    } else {
        "write only"
    }
}

fn save_label(save: &SaveRow) -> String {
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

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Pk => "key",
        Kind::Params => "params",
        Kind::ColdStart => "start",
        Kind::Remote => "remote",
        Kind::RemoteStart => "remote start",
    }
}

/// A load row's speed-up: none for a row below its floor (a measurement error, not a
/// ratio), and marked when its interval missed the target.
fn speedup_cell(row: &Row, target: f64) -> String {
    match (row.below_floor, row.speedup) {
        (true, _) => "- (BELOW)".to_owned(),
        (false, Some(ratio)) => marked(ratio, target),
        (false, None) => "-".to_owned(),
    }
}

/// The interval, with `*` when it is wider than `target` (+-, relative).
fn marked(ratio: Ratio, target: f64) -> String {
    if ratio.half_width() > target {
        format!("{}*", interval(ratio))
    } else {
        interval(ratio)
    }
}

/// `2.31 [2.10, 2.52]`.
fn interval(ratio: Ratio) -> String {
    format!(
        "{:.2} [{:.2}, {:.2}]",
        ratio.estimate, ratio.low, ratio.high
    )
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// Memory in huge pages over the runs: median (least-most), or `n/a`.
fn huge_pages(runs: &[u64]) -> String {
    let mut sorted = runs.to_vec();
    sorted.sort_unstable();
    match (sorted.get(sorted.len() / 2), sorted.first(), sorted.last()) {
        (Some(&median), Some(&least), Some(&most)) => {
            format!("{} ({}-{})", mib(median), mib(least), mib(most))
        }
        _ => "n/a".to_owned(),
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.0}MiB", bytes as f64 / f64::from(1 << 20))
}

/// Writes the report as JSON.
///
/// # Errors
///
/// I/O or serialisation errors, as text.
pub fn write_json(report: &Report, path: &Path) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// One line of the chart: a name and its (bytes, seconds) points.
type Series = (String, Vec<(f64, f64)>);

/// Draws proving-key load time (left: keycodec's rows, halo2's readers and the floor, per
/// state) and save time (right: every writer, halo2's with and without its sync) against the
/// key file's size, both axes logarithmic: how each cost grows with the key.
///
/// # Errors
///
/// Drawing or I/O errors, as text.
pub fn write_plot(report: &Report, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1400, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(700);
    let mut loads: Vec<Series> = Vec::new();
    let mut saves: Vec<Series> = Vec::new();
    for size in &report.sizes {
        for row in size.rows.iter().filter(|row| row.kind == Kind::Pk) {
            let name = format!(
                "{} {} {} {}",
                row.backend, row.mode, row.validation, row.state
            );
            push(&mut loads, name, (row.file_bytes as f64, row.read_s));
        }
        for save in size.saves.iter().filter(|save| save.kind == Kind::Pk) {
            let name = match (save.backend, save.durable) {
                (HALO2_NATIVE, true) => format!("{} {} write + sync", save.backend, save.mode),
                (HALO2_NATIVE, false) => format!("{} {} write only", save.backend, save.mode),
                _ => format!("{} {} save", save.backend, save.mode),
            };
            push(&mut saves, name, (save.file_bytes as f64, save.save_s));
        }
    }
    let title = report.circuit.title();
    panel(&left, &format!("{title}: proving key load"), &loads)?;
    panel(&right, &format!("{title}: proving key save"), &saves)?;
    root.present().map_err(|e| e.to_string())
}

fn push(series: &mut Vec<Series>, name: String, point: (f64, f64)) {
    match series.iter_mut().find(|(known, _)| *known == name) {
        Some((_, points)) => points.push(point),
        None => series.push((name, vec![point])),
    }
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    series: &[Series],
) -> Result<(), String> {
    let points = series.iter().flat_map(|(_, points)| points.iter());
    let (mut x_min, mut x_max, mut y_min, mut y_max) =
        (f64::INFINITY, 0.0f64, f64::INFINITY, 0.0f64);
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if !(x_min.is_finite() && y_min.is_finite() && x_min > 0.0 && y_min > 0.0) {
        return Ok(());
    }
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(
            (x_min / 1.5..x_max * 1.5).log_scale(),
            (y_min / 1.5..y_max * 1.5).log_scale(),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("key file size")
        .x_label_formatter(&|x| human_bytes(*x))
        .y_desc("seconds")
        .y_label_formatter(&|y| format!("{y:.3}"))
        .draw()
        .map_err(|e| e.to_string())?;
    for (index, (name, points)) in series.iter().enumerate() {
        let mut points = points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(index).to_rgba();
        let dashed = name.contains(HALO2_NATIVE) || name.starts_with(FLOOR);
        let style = color.stroke_width(if dashed { 3 } else { 2 });
        chart
            .draw_series(LineSeries::new(points.clone(), style))
            .map_err(|e| e.to_string())?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&point| Circle::new(point, 3, color.filled())),
            )
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 11))
        .draw()
        .map_err(|e| e.to_string())
}

fn human_bytes(bytes: f64) -> String {
    match bytes {
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.0} MB", b / 1e6),
        b => format!("{:.0} kB", b / 1e3),
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
    }
}
