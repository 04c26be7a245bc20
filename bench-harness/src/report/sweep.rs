//! The sweep: every size side by side, a row's speedup (or a save's ratio) at each `k`.

use std::fmt::Write as _;

use super::cells::{kind_name, marked, save_label, speedup_cell};
use crate::plan::{Kind, HALO2_NATIVE};
use crate::Report;

/// Every size side by side: per row, its speedup at each `k`; per save, its ratio.
pub(super) fn sweep(out: &mut String, report: &Report) {
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
                    speedup_cell(row, row.speedup, report.stopping.interval)
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
