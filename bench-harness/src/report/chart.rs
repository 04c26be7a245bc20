//! The SVG chart: proving-key load and save times against the key file's size.

use std::path::Path;

use plotters::prelude::*;

use crate::plan::{Kind, FLOOR, HALO2_NATIVE};
use crate::Report;

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
