//! A plan's parts: the files runs write and the cases they time, how they are added,
//! and how each case is linked to the rows it is compared with.

use std::path::{Path, PathBuf};

use keycodec_core::Size;

use super::{Kind, State, FLOOR, HALO2_NATIVE, IMPORT_PROCESSED};
use crate::exec::Sample;
use crate::measure::Written;

/// Measures one write of a file or object: its timings, and its size.
pub(super) type Write<'a> = Box<dyn Fn(Size) -> Result<(Written, u64), String> + 'a>;

/// Writes a file at a path with a buffer of this size.
pub(super) type WriteFile<'a> = Box<dyn Fn(&Path, Size) -> Result<Written, String> + 'a>;

/// Removes what a write wrote.
pub(super) type Remove<'a> = Box<dyn Fn() -> Result<(), String> + 'a>;

/// Measures one load of the case's files.
pub(super) type Run<'a> = Box<dyn Fn(&[&Path], Size) -> Result<Sample, String> + 'a>;

/// Primes the memory before a load in a new process, taking this many bytes
/// ([`crate::exec::prime_in_child`]).
pub(crate) type Prime<'a> = Box<dyn Fn(u64) -> Result<(), String> + 'a>;

/// Something runs write (every run until the minimum of runs, then those whose saves are
/// still wide): a file, or an object in object storage.
pub struct File<'a> {
    /// What it holds.
    pub kind: Kind,
    /// Who writes it.
    pub backend: &'static str,
    /// Its layout.
    pub mode: &'static str,
    /// Where the file is (for an object: where nothing is).
    pub path: PathBuf,
    /// The file whose durable write this one's is compared with (halo2's of the same kind).
    pub reference: Option<usize>,
    /// Whether its saves are rows of the saves table (the files loads are measured on;
    /// not a remote load's local copy).
    pub shown: bool,
    write: Write<'a>,
    remove: Remove<'a>,
}

impl File<'_> {
    /// What the progress bar calls it.
    pub fn name(&self) -> String {
        format!("{} {}", self.backend, self.mode)
    }

    /// Writes it with `buffer`; returns its timings and the bytes written.
    ///
    /// # Errors
    ///
    /// The writer's error, as text.
    pub fn write(&self, buffer: Size) -> Result<(Written, u64), String> {
        (self.write)(buffer)
    }

    /// Removes it, if it is there.
    ///
    /// # Errors
    ///
    /// The file system's or the store's error, as text.
    pub fn remove(&self) -> Result<(), String> {
        (self.remove)()
    }
}

/// One timed load: a row of the table.
pub struct Case<'a> {
    /// What it loads.
    pub kind: Kind,
    /// Backend name as the table shows it.
    pub backend: &'static str,
    /// The file layout.
    pub mode: &'static str,
    /// `checked`, `trusted` or `pinned` (checked, digest pinned).
    pub validation: &'static str,
    /// The process it runs in.
    pub state: State,
    /// The files it reads (indices into [`Plan::files`]).
    pub files: Vec<usize>,
    /// The case it is compared with, if any: halo2's own way to load the same thing in the
    /// same state (for a remote load, downloading the object and then loading the file).
    pub reference: Option<usize>,
    /// The floors of its files in its state, one per file it reads (a cold start's
    /// parameters and key), or none when a file has none: the row is compared with their
    /// sum.
    pub floors: Vec<usize>,
    run: Run<'a>,
}

impl Case<'_> {
    /// Bytes of the files it reads, each file's length in `bytes` (indexed as
    /// [`Plan::files`]; a file not written yet counts nothing).
    pub fn bytes_read(&self, bytes: &[u64]) -> u64 {
        self.files.iter().filter_map(|&file| bytes.get(file)).sum()
    }

    /// Loads and checks what it loaded.
    ///
    /// # Errors
    ///
    /// The loader's error, as text.
    pub fn run(&self, paths: &[&Path], buffer: Size) -> Result<Sample, String> {
        (self.run)(paths, buffer)
    }
}

/// The files and cases runs take.
pub struct Plan<'a> {
    /// Written first in a run.
    pub files: Vec<File<'a>>,
    /// Then timed, one after the other.
    pub cases: Vec<Case<'a>>,
    /// What primes the memory before a load in a new process where that load needs it (see
    /// `runs`); none in a plan without such loads.
    primer: Option<Prime<'a>>,
}

/// A row's identity: kind, backend, layout, values, state.
type Identity = (Kind, &'static str, &'static str, &'static str, State);

impl<'a> Plan<'a> {
    /// A plan with nothing in it.
    pub(crate) fn empty() -> Self {
        Plan {
            files: Vec::new(),
            cases: Vec::new(),
            primer: None,
        }
    }

    /// Primes with `prime` (see [`Plan::prime`]).
    pub(crate) fn primed_by(&mut self, prime: Prime<'a>) {
        self.primer = Some(prime);
    }

    /// Primes the memory before a load in a new process, taking `bytes`; nothing in a plan
    /// without a primer.
    ///
    /// # Errors
    ///
    /// The primer's failure, as text.
    pub(crate) fn prime(&self, bytes: u64) -> Result<(), String> {
        self.primer.as_ref().map_or(Ok(()), |prime| prime(bytes))
    }

    /// Compares `case` with `reference` (see [`Case::reference`]) and `floor`.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn compare(&mut self, case: usize, reference: Option<usize>, floor: Option<usize>) {
        if let Some(case) = self.cases.get_mut(case) {
            case.reference = reference;
            case.floors = floor.into_iter().collect();
        }
    }

    /// Adds a file in `scratch`, written by `write`.
    pub(crate) fn file(
        &mut self,
        (kind, backend, mode): (Kind, &'static str, &'static str),
        write: WriteFile<'a>,
        scratch: &Path,
    ) -> usize {
        let path = scratch.join(format!("{backend}-{mode}.{kind:?}").to_lowercase());
        let (written, removed) = (path.clone(), path.clone());
        self.files.push(File {
            kind,
            backend,
            mode,
            path,
            reference: None,
            shown: true,
            write: Box::new(move |buffer| {
                let timings = write(&written, buffer)?;
                let bytes = std::fs::metadata(&written)
                    .map_err(|e| e.to_string())?
                    .len();
                Ok((timings, bytes))
            }),
            remove: Box::new(move || match std::fs::remove_file(&removed) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err.to_string()),
                _ => Ok(()),
            }),
        });
        self.files.len() - 1
    }

    /// Adds something that is not a local file (an object in object storage).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn object(
        &mut self,
        (kind, backend, mode): (Kind, &'static str, &'static str),
        write: Write<'a>,
        remove: Remove<'a>,
    ) -> usize {
        self.files.push(File {
            kind,
            backend,
            mode,
            path: PathBuf::new(),
            reference: None,
            shown: true,
            write,
            remove,
        });
        self.files.len() - 1
    }

    /// Hides a file's saves from the saves table (a remote load's local copy).
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn hide(&mut self, file: usize) {
        if let Some(file) = self.files.get_mut(file) {
            file.shown = false;
        }
    }

    /// Adds a case.
    pub(crate) fn case(&mut self, identity: Identity, files: Vec<usize>, run: Run<'a>) -> usize {
        let (kind, backend, mode, validation, state) = identity;
        self.cases.push(Case {
            kind,
            backend,
            mode,
            validation,
            state,
            files,
            reference: None,
            floors: Vec::new(),
            run,
        });
        self.cases.len() - 1
    }

    /// Links every case to halo2's case of the same kind, layout class, validation and state
    /// (a pinned row to the checked one; where halo2 has no such row, its checked one), and to
    /// the floor of the same file in the same state; every file to halo2's raw file of its kind.
    pub(super) fn link(&mut self) {
        let references: Vec<(Identity, usize)> = self
            .cases
            .iter()
            .enumerate()
            .filter(|(_, case)| case.backend == HALO2_NATIVE)
            .map(|(index, case)| {
                (
                    (case.kind, "", case.mode, case.validation, case.state),
                    index,
                )
            })
            .collect();
        // Each floor reads one file.
        let floors: Vec<(State, usize, usize)> = self
            .cases
            .iter()
            .enumerate()
            .filter(|(_, case)| case.backend == FLOOR)
            .filter_map(|(index, case)| match case.files.as_slice() {
                [file] => Some((case.state, *file, index)),
                _ => None,
            })
            .collect();
        for case in &mut self.cases {
            if case.backend == FLOOR {
                continue;
            }
            let floor_of = |file: &usize| {
                floors
                    .iter()
                    .find(|(state, floored, _)| *state == case.state && floored == file)
                    .map(|&(.., floor)| floor)
            };
            case.floors = case
                .files
                .iter()
                .map(floor_of)
                .collect::<Option<Vec<usize>>>()
                .unwrap_or_default();
            if case.backend == HALO2_NATIVE {
                continue;
            }
            let find = |validation: &str| {
                references
                    .iter()
                    .find(|((kind, _, mode, v, state), _)| {
                        *kind == case.kind
                            && *state == case.state
                            && *v == validation
                            && reference_mode(case.mode) == *mode
                    })
                    .map(|(_, reference)| *reference)
            };
            let validation = match case.validation {
                "pinned" => "checked",
                other => other,
            };
            case.reference = find(validation).or_else(|| find("checked"));
        }
        let native_files: Vec<(Kind, usize)> = self
            .files
            .iter()
            .enumerate()
            .filter(|(_, file)| file.backend == HALO2_NATIVE && file.mode == "RawBytes")
            .map(|(index, file)| (file.kind, index))
            .collect();
        for (index, file) in self.files.iter_mut().enumerate() {
            file.reference = native_files
                .iter()
                .find(|(kind, native)| *kind == file.kind && *native != index)
                .map(|(_, native)| *native);
        }
    }
}

/// The halo2 layout a case is compared with: keycodec's compressed layout, and its import
/// of halo2's compressed parameters, with halo2's read of its compressed files; everything
/// else with halo2's raw layout.
fn reference_mode(mode: &str) -> &'static str {
    if mode == IMPORT_PROCESSED || mode == "Processed" {
        "Processed"
    } else {
        "RawBytes"
    }
}
