//! Which version of a file a read read.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, IoContext, Result};

/// What tells one version of a file from another: its device and inode (a file renamed
/// over the path is another), its length, and its modification and change times (a file
/// rewritten in place; the change time cannot be set back from user space). A read whose
/// file has the same stamp before and after read one version of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    identity: (u64, u64, i64, i64),
}

impl FileStamp {
    /// The stamp of an open file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when its metadata cannot be read.
    pub fn of(file: &File) -> Result<FileStamp> {
        file.metadata()
            .map(|meta| FileStamp::of_metadata(&meta))
            .during("read the metadata of")
    }

    /// The stamp of the file `path` names now (following links), `None` when there is none.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming `path` when its metadata cannot be read for another reason.
    pub fn of_path(path: &Path) -> Result<Option<FileStamp>> {
        match std::fs::metadata(path) {
            Ok(meta) => Ok(Some(FileStamp::of_metadata(&meta))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(Error::io("read the metadata of", err).at_path(path)),
        }
    }

    fn of_metadata(meta: &std::fs::Metadata) -> FileStamp {
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            identity: {
                use std::os::unix::fs::MetadataExt;
                (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
            },
        }
    }
}
