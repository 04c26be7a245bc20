//! The table, the JSON file and the SVG chart.

use std::fmt::Write as _;
use std::path::Path;

use keycodec::Size;
use plotters::prelude::*;

use crate::plan::Kind;
use crate::{Report, Row};

/// The report as a plain-text table per kind, with the machine's limits and the fixture
/// underneath.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}, k = {}, {} runs per row, rows interleaved (order rotated each run){}{}{}",
        match report.circuit {
            crate::CircuitName::StandardPlonk => "StandardPlonk",
            crate::CircuitName::Dense => "dense circuit",
        },
        report.k,
        report.repeat,
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
    let _ = writeln!(
        out,
        "read s: median; min: fastest run; spread: (max - min) / median; x floor: this load over \
         its kind's floor; x ref: the reference's load over this one (halo2's reader; for a \
         remote load, downloading then loading; for a cache hit, the local load), each ratio \
         taken within a run (median over runs)"
    );
    for (kind, title) in [
        (Kind::Pk, "proving key"),
        (Kind::Params, "KZG parameters"),
        (Kind::ColdStart, "cold start: parameters + proving key"),
        (
            Kind::Remote,
            "proving key in object storage (loopback S3 server; floor: its plain download)",
        ),
    ] {
        let title = match (kind, report.remote_server) {
            (Kind::Remote, Some(server)) => format!("{title}, server {server}"),
            _ => title.to_owned(),
        };
        // keycodec's rows, then halo2's, then the floor (remote rows: by backend, as run).
        let mut rows: Vec<&Row> = report.rows.iter().filter(|row| row.kind == kind).collect();
        rows.sort_by_key(|row| match row.backend {
            _ if kind == Kind::Remote => 0,
            crate::plan::HALO2_NATIVE => 1,
            crate::plan::FLOOR => 2,
            _ => 0,
        });
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{title}");
        let _ = writeln!(
            out,
            "{:<13} {:<16} {:<8} {:>6} {:>8} {:>8} {:>8} {:>6} {:>7} {:>7} {:>14} {:>7} {:>9} {:>3}",
            "backend",
            "mode",
            "values",
            "buffer",
            "write s",
            "read s",
            "min s",
            "spread",
            "x floor",
            "x ref",
            "file bytes",
            "r GB/s",
            "load RSS",
            "ok"
        );
        for row in rows {
            let _ = writeln!(
                out,
                "{:<13} {:<16} {:<8} {:>6} {:>8} {:>8.3} {:>8.3} {:>5.0}% {:>7} {:>7} {:>14} {:>7.2} {:>9} {:>3}",
                row.backend,
                row.mode,
                row.validation,
                Size(row.buffer_bytes).to_string(),
                optional(row.write_s, 3),
                row.read_s,
                row.read_min_s,
                row.read_spread * 100.0,
                optional(row.read_vs_floor, 2),
                optional(row.speedup_vs_reference, 2),
                row.file_bytes,
                row.read_gbps,
                row.peak_rss_bytes.map_or("n/a".to_owned(), mib),
                if row.verified { "yes" } else { "NO" },
            );
        }
    }
    let limits = &report.limits;
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
    let fixture = &report.fixture;
    let key = match fixture.domain_memory_bytes {
        Some(domain) => {
            let whole = fixture.key_memory_bytes + domain;
            format!(
                "{} of field elements + {} of evaluation domain = {} (x 1.1 + 64 MiB = {}, the load-RSS bound)",
                mib(fixture.key_memory_bytes),
                mib(domain),
                mib(whole),
                mib(whole + whole / 10 + (64 << 20)),
            )
        }
        None => format!("{} of field elements", mib(fixture.key_memory_bytes)),
    };
    let _ = writeln!(
        out,
        "key in memory: {key}; its digest (BLAKE3, every core, in memory) {:.3} s; fixture: {} in {:.1} s; harness peak RSS: {}",
        report.fixture.digest_s,
        report.fixture.origin,
        report.fixture.seconds,
        report.harness_peak_rss_bytes.map_or("n/a".to_owned(), mib),
    );
    out
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
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

/// Draws write and read throughput (GB/s) against buffer size, one line per backend/mode.
///
/// # Errors
///
/// Drawing or I/O errors, as text.
pub fn write_plot(report: &Report, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (1280, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(640);
    // Proving-key loads and saves by buffer: the rows a buffer changes.
    let rows: Vec<&Row> = report
        .rows
        .iter()
        .filter(|row| row.kind == Kind::Pk && row.write_gbps.is_some())
        .collect();
    let series = series_names(&rows);
    for (area, title, value) in [
        (
            &left,
            "save (GB/s)",
            (|row: &Row| row.write_gbps.unwrap_or(0.0)) as fn(&Row) -> f64,
        ),
        (&right, "load (GB/s)", |row: &Row| row.read_gbps),
    ] {
        let x_min = rows
            .iter()
            .map(|r| (r.buffer_bytes as f64).log2())
            .fold(f64::INFINITY, f64::min);
        let x_max = rows
            .iter()
            .map(|r| (r.buffer_bytes as f64).log2())
            .fold(f64::NEG_INFINITY, f64::max);
        let y_max = rows.iter().map(|row| value(row)).fold(0.0, f64::max) * 1.15 + 0.01;
        let (x_min, x_max) = if x_min < x_max {
            (x_min, x_max)
        } else {
            (x_min - 1.0, x_min + 1.0)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(format!("k = {}: {title}", report.k), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("buffer")
            .x_label_formatter(&|x| Size(x.exp2().round() as u64).to_string())
            .y_desc("GB/s")
            .draw()
            .map_err(|e| e.to_string())?;
        for (index, name) in series.iter().enumerate() {
            let color = Palette99::pick(index).to_rgba();
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|row| &series_name(row) == name)
                .map(|row| ((row.buffer_bytes as f64).log2(), value(row)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

fn series_name(row: &Row) -> String {
    format!("{} {} {}", row.backend, row.mode, row.validation)
}

fn series_names(rows: &[&Row]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for row in rows {
        let name = series_name(row);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}
