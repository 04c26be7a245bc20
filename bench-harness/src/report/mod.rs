//! The tables, the JSON file and the SVG chart.

mod cells;
mod chart;
mod size_tables;
mod sweep;

use std::path::Path;

use crate::Report;
use size_tables::size_table;
use sweep::sweep;

pub use chart::write_plot;

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

/// Writes the report as JSON.
///
/// # Errors
///
/// I/O or serialisation errors, as text.
pub fn write_json(report: &Report, path: &Path) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
}
