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
use keycodec_core::{ArtifactKind, Error, FileStamp, Result};

/// What a read of an artifact found.
pub(crate) enum Found<T> {
    /// The artifact asked for.
    Usable(T),
    /// Missing (`None`), or proven not the artifact asked for (the error that proves it).
    Replaceable(Option<Error>),
}

/// The stamp of a file when a read found it replaceable (`None`: there was none), checked
/// again just before it is replaced ([`Witness::still`]). An object needs none: the store's
/// conditional requests keep each read to one version.
pub(crate) struct Witness(Option<FileStamp>);

/// The verdict of the one rule on a read's result: usable; replaceable, when the artifact is
/// missing or `rule` says the error proves it is not the one asked for
/// ([`Error::disproves_artifact`], or a caller's wider rule for a format without checksums);
/// or the read's error, which says nothing against the artifact.
///
/// # Errors
///
/// The read's error when it is neither a missing artifact nor one `rule` holds for.
pub(crate) fn judge<T>(read: Result<T>, rule: impl Fn(&Error) -> bool) -> Result<Found<T>> {
    match read {
        Ok(value) => Ok(Found::Usable(value)),
        Err(err) if err.is_missing() => Ok(Found::Replaceable(None)),
        Err(err) if rule(&err) => Ok(Found::Replaceable(Some(err))),
        Err(err) => Err(err),
    }
}

/// [`judge`] of `read`, a read of the file at `path`, which is replaceable only when the
/// file's stamp is the same before and after the read (one version of it was read); with the
/// stamp, to check again before replacing it.
///
/// # Errors
///
/// As [`judge`]; [`Error::FileChanged`] when the file changed during a read that found it
/// replaceable; [`Error::Io`] reading the file's metadata.
pub(crate) fn judge_file<T>(
    path: &Path,
    read: impl FnOnce() -> Result<T>,
    rule: impl Fn(&Error) -> bool,
) -> Result<(Found<T>, Witness)> {
    let before = FileStamp::of_path(path)?;
    let found = judge(read(), rule)?;
    if matches!(found, Found::Replaceable(_)) && FileStamp::of_path(path)? != before {
        return Err(changed(path));
    }
    Ok((found, Witness(before)))
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
        match FileStamp::of_path(path)? == self.0 {
            true => Ok(()),
            false => Err(changed(path)),
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
    kind: ArtifactKind,
    header_kind: Option<ArtifactKind>,
    proof: Option<Error>,
) -> Result<()> {
    if kind == ArtifactKind::Verifying && header_kind == Some(ArtifactKind::Proving) {
        return Err(proof.unwrap_or(Error::KindMismatch {
            expected: kind,
            found: ArtifactKind::Proving,
        }));
    }
    Ok(())
}

/// The kind the container at `path` names in its header, if it is a readable container.
pub(crate) fn file_kind(path: &Path) -> Option<ArtifactKind> {
    let file = std::fs::File::open(path).ok()?;
    read_header(&file).ok().map(|(header, _)| header.kind)
}

fn changed(path: &Path) -> Error {
    Error::FileChanged {
        path: path.to_path_buf(),
    }
}
