//! Reading and checking a container without the circuit's code: the header, the payload's
//! length and checksum, and the key digest the header records.

use std::fs::File;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use keycodec::{Backend, KeyDigest};
use keycodec_core::header::{read_header, version_of_len, Header};

/// What went wrong, by what the exit code says.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The file could not be read (exit code 3).
    Io(String),
    /// The file is not a valid container, or not the one asked for (exit code 1).
    Check(String),
    /// Object storage failed (exit code 4).
    Remote(String),
    /// A value on the command line is malformed (exit code 2, as clap's errors).
    Usage(String),
    /// A failure the report already printed describes (under `--json`, nothing more is
    /// printed): its exit code, and the message for people.
    Reported(u8, String),
}

/// A container's header and what checking its payload found.
#[derive(Debug)]
pub(crate) struct Inspection {
    /// The file.
    pub(crate) path: PathBuf,
    /// The file's length.
    pub(crate) file_bytes: u64,
    /// The container version (from the header's length, and 4 with a record).
    pub(crate) version: u16,
    /// The header.
    pub(crate) header: Header,
    /// The backend that wrote it, when this build knows its id.
    pub(crate) backend: Option<Backend>,
    /// The name of the header's wire mode, when the backend is compiled in and knows it.
    pub(crate) mode: Option<&'static str>,
    /// The payload's state.
    pub(crate) payload: PayloadState,
    /// The circuit's record (version 4): what it says, or why it cannot be read.
    pub(crate) record: Option<Result<Circuit, String>>,
}

/// What a container's record says of its circuit.
#[derive(Debug)]
pub(crate) struct Circuit {
    pub(crate) advice: usize,
    pub(crate) phases: usize,
    pub(crate) fixed: usize,
    pub(crate) instance: usize,
    pub(crate) selectors: usize,
    pub(crate) challenges: usize,
    pub(crate) gates: usize,
    pub(crate) lookups: usize,
    pub(crate) equality: usize,
    pub(crate) degree: usize,
    /// Rows a circuit can use: `2^k` less halo2's blinding rows.
    pub(crate) usable_rows: u64,
    /// The circuit's parameters (`Circuit::Params`) as recorded: JSON.
    pub(crate) params: Option<serde_json::Value>,
}

impl Circuit {
    fn of(record: &keycodec::CircuitRecord, k: u32) -> Circuit {
        let cs = record.replay();
        let phases = cs
            .advice_column_phase()
            .iter()
            .max()
            .map_or(0, |&p| usize::from(p) + 1);
        let rows = 1u64.checked_shl(k).unwrap_or(0);
        Circuit {
            advice: cs.num_advice_columns(),
            phases,
            fixed: cs.num_fixed_columns(),
            instance: cs.num_instance_columns(),
            selectors: cs.num_selectors(),
            challenges: cs.num_challenges(),
            gates: cs.gates().len(),
            lookups: cs.lookups().len(),
            equality: cs.permutation().get_columns().len(),
            degree: cs.degree(),
            usable_rows: rows.saturating_sub(cs.blinding_factors() as u64 + 1),
            params: record.circuit_params().ok(),
        }
    }
}

/// Whether the payload is what the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PayloadState {
    /// As long as declared, and its XXH3-64 is the recorded one.
    Intact,
    /// Not as long as declared.
    WrongLength {
        /// Declared by the header.
        declared: u64,
        /// Present after the header.
        present: u64,
    },
    /// Its checksum is not the recorded one: corrupt.
    Corrupt {
        /// Computed from the file.
        found: u64,
    },
}

impl Inspection {
    /// The failure a `verify` reports, if any.
    pub(crate) fn problem(&self) -> Option<String> {
        match self.payload {
            PayloadState::Intact => None,
            PayloadState::WrongLength { declared, present } => Some(format!(
                "the header declares a {declared}-byte payload but {present} bytes follow it"
            )),
            PayloadState::Corrupt { found } => Some(format!(
                "the payload is corrupt: its XXH3-64 is {found:#018x}, the header records {:#018x}",
                self.header.payload_checksum
            )),
        }
        .or_else(|| match &self.record {
            Some(Err(why)) => Some(format!("the circuit's record cannot be read: {why}")),
            _ => None,
        })
    }

    /// The key digest the header records, if any.
    pub(crate) fn digest(&self) -> Option<KeyDigest> {
        self.header.digest
    }
}

/// Reads `path`'s header and checks its payload (hashing it, with a progress bar on a
/// terminal for large files).
///
/// # Errors
///
/// [`Failure::Io`] when the file cannot be opened or read, [`Failure::Check`] when its header
/// is not a valid container header.
pub(crate) fn inspect(path: &Path) -> Result<Inspection, Failure> {
    let file = File::open(path)
        .map_err(|err| Failure::Io(format!("could not open {}: {err}", path.display())))?;
    inspect_open(&file, path)
}

/// [`inspect`] of a file already open, named `path` (its header is read where it is, the
/// payload from right after it, whatever the cursor).
///
/// # Errors
///
/// As [`inspect`].
pub(crate) fn inspect_open(file: &File, path: &Path) -> Result<Inspection, Failure> {
    let io = |what: &str, err: std::io::Error| {
        Failure::Io(format!("could not {what} {}: {err}", path.display()))
    };
    let file_bytes = file
        .metadata()
        .map_err(|err| io("read the metadata of", err))?
        .len();
    let not_a_container = |reason: String| Failure::Check(format!("{}: {reason}", path.display()));
    let (header, header_len) = read_header(file).map_err(|err| match err {
        keycodec::Error::Io { source, .. } => io("read", source),
        keycodec::Error::Truncated { .. } => {
            not_a_container("shorter than its container header".into())
        }
        other => not_a_container(other.to_string()),
    })?;
    let version = version_of_len(header_len).unwrap_or(1);
    let backend = Backend::of_id(header.codec);
    let mode = backend
        .and_then(|backend| backend.codec().ok())
        .and_then(|codec| {
            codec
                .wire_modes()
                .iter()
                .find(|mode| mode.byte() == header.mode)
                .map(|mode| mode.name())
        });
    let present = file_bytes
        .saturating_sub(header_len as u64)
        .saturating_sub(header.record_section_len());
    let payload = if present != header.payload_len {
        PayloadState::WrongLength {
            declared: header.payload_len,
            present,
        }
    } else {
        let found = hash(file, header_len as u64, present).map_err(|err| io("read", err))?;
        if found == header.payload_checksum {
            PayloadState::Intact
        } else {
            PayloadState::Corrupt { found }
        }
    };
    let record = (payload == PayloadState::Intact && header.record_len > 0).then(|| {
        keycodec_core::header::read_record_section(file, &header, header_len as u64)
            .map_err(|err| err.to_string())
            .and_then(|record| record.ok_or_else(|| "no record".to_owned()))
            .map(|record| Circuit::of(&record, header.k))
    });
    Ok(Inspection {
        path: path.to_path_buf(),
        file_bytes,
        version: if header.record_len > 0 { 4 } else { version },
        header,
        backend,
        mode,
        payload,
        record,
    })
}

/// The XXH3-64 of the `len` bytes of `file` from `at` (its payload), with a progress bar for
/// large payloads.
fn hash(file: &File, at: u64, len: u64) -> std::io::Result<u64> {
    let bar = (len >= 64 << 20).then(|| {
        ProgressBar::new(len).with_style(
            ProgressStyle::with_template(
                "checking the payload {bar:30} {bytes}/{total_bytes} {bytes_per_sec}, ~{eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        )
    });
    let found = keycodec_core::header::payload_checksum(file, at, len, &mut |step| {
        if let Some(bar) = &bar {
            bar.inc(step);
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    found
}

/// What `--allow-test-setup` asks of a load.
pub(crate) fn test_setup(allowed: bool) -> keycodec::TestSetup {
    match allowed {
        true => keycodec::TestSetup::Allowed,
        false => keycodec::TestSetup::Refused,
    }
}
