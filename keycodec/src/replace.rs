//! When keycodec may replace an artifact, and the checks it makes just before it does: the
//! one rule ([`Error::disproves_artifact`]) applied to a file or an object that a start
//! (or the snark-verifier-sdk drop-in) would generate a key over.
//!
//! An artifact is replaced only when it is missing, or when one complete read of one version
//! of it proved it is not the artifact asked for. For a file, "one version" is checked: the
//! file's stamp ([`FileStamp`]: inode, length, times) is the same before and after the read
//! that disproved it, or the read's verdict is [`Error::FileChanged`] (a deploy's `cp` in
//! progress); and just before the replacement is written the path must still name that
//! version, or nothing is written. A verifying key is never written over a proving key's
//! container (which holds one: a manifest may read it from there).

use std::path::Path;

use keycodec_core::header::read_header;
use keycodec_core::{Error, FileStamp, KeyKind, Result};

/// What a read of an artifact found.
pub(crate) enum Found<T> {
    /// The artifact asked for.
    Usable(T),
    /// Missing (`None`), or proven not the artifact asked for (the error that proves it):
    /// it may be replaced, once [`Found`]'s caller has checked [`Witness`].
    Replaceable(Option<Error>, Witness),
}

/// What was at the artifact's place when a read found it replaceable, checked again just
/// before it is replaced ([`Witness::still`]).
pub(crate) enum Witness {
    /// The stamp of the file (`None`: there was none).
    File(Option<FileStamp>),
    /// An object: the store's conditional requests keep each read to one version.
    #[cfg(feature = "remote")]
    Object,
}

/// The verdict of `read` on the file at `path` under `rule` (which errors prove the file is
/// not the artifact: [`Error::disproves_artifact`], or a caller's wider rule for a format
/// without checksums): usable, replaceable (missing, or disproved by a read of one version),
/// or the read's error, which says nothing against the file.
///
/// # Errors
///
/// The read's error when `rule` does not hold for it; [`Error::FileChanged`] when the file
/// changed during a read that failed; [`Error::Io`] reading the file's metadata.
pub(crate) fn judge_file<T>(
    path: &Path,
    read: impl FnOnce() -> Result<T>,
    rule: impl Fn(&Error) -> bool,
) -> Result<Found<T>> {
    let before = FileStamp::of_path(path)?;
    match read() {
        Ok(value) => Ok(Found::Usable(value)),
        Err(err) if err.is_missing() || rule(&err) => {
            if FileStamp::of_path(path)? != before {
                return Err(changed(path));
            }
            let proof = (!err.is_missing()).then_some(err);
            Ok(Found::Replaceable(proof, Witness::File(before)))
        }
        Err(err) => Err(err),
    }
}

/// The verdict of `read` on an object (through its cache): usable, replaceable (missing, or
/// disproved by its own bytes: see [`Error::disproves_artifact`]), or the read's error.
///
/// # Errors
///
/// The read's error when it does not disprove the object.
#[cfg(feature = "remote")]
pub(crate) fn judge_object<T>(read: Result<T>) -> Result<Found<T>> {
    match read {
        Ok(value) => Ok(Found::Usable(value)),
        Err(err) if err.is_missing() => Ok(Found::Replaceable(None, Witness::Object)),
        Err(err) if err.disproves_artifact() => Ok(Found::Replaceable(Some(err), Witness::Object)),
        Err(err) => Err(err),
    }
}

impl Witness {
    /// Checks, just before a file is replaced, that `path` still names the version a read
    /// disproved (or still names none).
    ///
    /// # Errors
    ///
    /// [`Error::FileChanged`] when another version is there now (a deploy copied a key over
    /// it while this one was generated: that file is kept); [`Error::Io`] reading metadata.
    pub(crate) fn still(&self, path: &Path) -> Result<()> {
        match self {
            Witness::File(stamp) if FileStamp::of_path(path)? != *stamp => Err(changed(path)),
            _ => Ok(()),
        }
    }
}

/// Refuses to write a verifying key (`kind`) over an artifact whose header says it holds a
/// proving key: that container holds a verifying key too, for another circuit or pin, and
/// is someone's proving key. `header_kind` is the kind the artifact's header names, if it
/// could be read. `proof` is the error that disproved the artifact, returned as it is.
///
/// # Errors
///
/// `proof` (or [`Error::KindMismatch`] when there is none) when the write is refused.
pub(crate) fn refuse_vk_over_pk(
    kind: KeyKind,
    header_kind: Option<KeyKind>,
    proof: Option<Error>,
) -> Result<()> {
    if kind == KeyKind::Verifying && header_kind == Some(KeyKind::Proving) {
        return Err(proof.unwrap_or(Error::KindMismatch {
            expected: kind,
            found: KeyKind::Proving,
        }));
    }
    Ok(())
}

/// The kind the container at `path` names in its header, if it is a readable container.
pub(crate) fn file_kind(path: &Path) -> Option<KeyKind> {
    let file = std::fs::File::open(path).ok()?;
    read_header(&file).ok().map(|(header, _)| header.kind)
}

fn changed(path: &Path) -> Error {
    Error::FileChanged {
        path: path.to_path_buf(),
    }
}
