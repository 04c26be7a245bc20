//! The one error type of the workspace.
//!
//! Longer than a module should be, on purpose: it is one enum, every variant a case a user
//! matches with its documented contract, and the few helpers that wrap an error in where it
//! happened (a path, an object). Split by area, it would still be one `match` for its users.

use std::io;
use std::path::{Path, PathBuf};

use halo2curves::bn256::Fr;

use crate::ids::{ArtifactKind, CodecId, Fingerprint, KeyDigest};

/// `Result` with this workspace's [`enum@Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while saving or loading a key.
///
/// Every decode path reports one of these; none panics on bad input. Variants name what was
/// wrong so that a caller (or an operator reading a log) can tell a truncated download from a
/// key for another circuit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system reported an I/O failure (not an early end of data).
    #[error("could not {operation}{}: {source}", path.as_deref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Io {
        /// What was being done ("open", "read", "write", "rename over", ...).
        operation: &'static str,
        /// The file it was done to, when there is one.
        path: Option<PathBuf>,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The data ended before the structure it declares was complete.
    #[error("truncated input: data ended while reading {context}")]
    Truncated {
        /// What was being read when the data ran out.
        context: &'static str,
    },

    /// The first bytes are not a keycodec container.
    #[error("not a keycodec container: bad magic bytes")]
    BadMagic,

    /// The container was written by a newer (or unknown) container version.
    #[error("unsupported container version {found} (this build reads version {supported})")]
    UnsupportedVersion {
        /// Version found in the header.
        found: u16,
        /// Version this build reads.
        supported: u16,
    },

    /// The header's own checksum does not match its bytes: the header is corrupt.
    #[error("container header is corrupt (header checksum mismatch)")]
    HeaderChecksum,

    /// The payload's checksum does not match the one recorded in the header.
    #[error("payload is corrupt: checksum {found:#018x} does not match recorded {expected:#018x}")]
    PayloadChecksum {
        /// Checksum recorded in the header.
        expected: u64,
        /// Checksum of the bytes actually read.
        found: u64,
    },

    /// A reserved header field that must be zero is not.
    #[error("container header has non-zero reserved field `{field}`")]
    ReservedField {
        /// The reserved field's name.
        field: &'static str,
    },

    /// The header's key-kind byte names no kind this build knows.
    #[error("container header names an unknown key kind (byte {found})")]
    UnknownKeyKind {
        /// The byte found.
        found: u8,
    },

    /// The file was written by another backend than the one loading it.
    #[error("file was written by {found} but is being loaded with {expected_name} ({expected})")]
    CodecMismatch {
        /// The codec doing the load.
        expected: CodecId,
        /// Its name.
        expected_name: &'static str,
        /// The codec named in the header.
        found: CodecId,
    },

    /// The header names a codec this build does not know (or has not compiled in).
    #[error("file was written by {found}, which this build does not know")]
    UnknownCodec {
        /// The codec named in the header.
        found: CodecId,
    },

    /// The file's codec is not among those the load accepts ([`crate::LoadOptions::codecs`]).
    #[error("file was written by {found}, which this load does not accept (LoadOptions::codecs)")]
    CodecNotAllowed {
        /// The codec named in the header.
        found: CodecId,
    },

    /// The header names a wire mode (payload layout) that the codec does not know.
    #[error("codec {codec} has no wire mode {mode}")]
    UnsupportedMode {
        /// The codec doing the load.
        codec: &'static str,
        /// The mode byte found in the header.
        mode: u8,
    },

    /// A proving key was asked for and the file holds a verifying key, or the reverse.
    #[error("file holds a {found} but a {expected} was requested")]
    KindMismatch {
        /// The kind requested.
        expected: ArtifactKind,
        /// The kind found in the header.
        found: ArtifactKind,
    },

    /// The key is for another curve than BN254.
    #[error("file is for curve id {found}; this build supports only BN254 (id 1)")]
    CurveMismatch {
        /// Curve id found in the header.
        found: u8,
    },

    /// The codec has no layout for this kind (KZG parameters are stored by rawbytes).
    #[error("the {codec} backend does not store {kind}")]
    KindNotSupported {
        /// The codec.
        codec: &'static str,
        /// The kind it does not store.
        kind: ArtifactKind,
    },

    /// The key's circuit size `k` is not the one the caller expected.
    #[error("file holds a key for k = {found}, expected k = {expected}")]
    KMismatch {
        /// The `k` the caller expected.
        expected: u32,
        /// The `k` found in the file.
        found: u32,
    },

    /// The key's circuit size `k` is impossible for this field, or above the configured limit.
    #[error("k = {k} is out of range (must be between 1 and {max}; raise Limits::max_k up to 28 to accept more)")]
    KOutOfRange {
        /// The `k` found in the file.
        k: u32,
        /// The largest `k` accepted.
        max: u32,
    },

    /// The file was written for another circuit (its constraint system differs).
    #[error("file is for another circuit: fingerprint {found} does not match expected {expected}")]
    CircuitMismatch {
        /// Fingerprint of the circuit type the caller is loading with.
        expected: Fingerprint,
        /// Fingerprint recorded in the file.
        found: Fingerprint,
    },

    /// The file's circuit fingerprint is not this circuit's, and the file was written against
    /// another halo2 than this build's: the fingerprint hashes halo2's `Debug` form of the
    /// constraint system, which a halo2 upgrade may change for the same circuit, so the key may
    /// well be this circuit's. Not proof of another circuit: a cold start does not regenerate
    /// over it.
    #[error("file's circuit fingerprint {found} is not this circuit's {expected}, but it was written with {written_with} and is read with {read_with}: the fingerprint hashes halo2's Debug output of the constraint system, which may differ between halo2 versions. If the circuit is unchanged, load the key with the build that wrote it and save it again with this one, or regenerate it")]
    CircuitMismatchAcrossHalo2 {
        /// Fingerprint of the circuit type the caller is loading with.
        expected: Fingerprint,
        /// Fingerprint recorded in the file.
        found: Fingerprint,
        /// The halo2 the file was written with.
        written_with: String,
        /// The halo2 this build reads with.
        read_with: &'static str,
    },

    /// The header's declared payload length does not match the bytes actually present.
    #[error("header declares a {declared}-byte payload but {available} bytes follow the header")]
    LengthMismatch {
        /// Payload length declared in the header.
        declared: u64,
        /// Bytes actually present after the header.
        available: u64,
    },

    /// Bytes remain after a complete key was decoded.
    #[error("{count} unexpected trailing bytes after the key")]
    TrailingBytes {
        /// How many bytes were left over (at least this many, for streams).
        count: u64,
    },

    /// The key (or the parameters) is valid but not the pinned one: its digest differs from
    /// the pin ([`crate::LoadOptions::expected_digest`], or a cold start's pin of that
    /// artifact): another key for the same circuit, another `k`, other constants, other
    /// parameters. Checked before it is returned.
    #[error("{}the {kind}'s digest {found} is not the pinned digest {expected}", path.as_deref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    DigestMismatch {
        /// What was pinned: a proving key, a verifying key, parameters.
        kind: ArtifactKind,
        /// The file it was loaded from, when a file.
        path: Option<PathBuf>,
        /// The pinned digest.
        expected: KeyDigest,
        /// The loaded artifact's digest.
        found: KeyDigest,
    },

    /// A file (as published: halo2's `kzg_bn254_22.srs`, say) is not the pinned one: its
    /// SHA-256 differs from the pin. Nothing read from it is used, or kept in a cache.
    #[error("{file}: SHA-256 {found} is not the pinned {expected}")]
    FileHashMismatch {
        /// The file or URL.
        file: String,
        /// The pinned SHA-256, hex.
        expected: String,
        /// The file's, hex.
        found: String,
    },

    /// The key's verifying key is not the pinned one: its `transcript_repr()` differs from
    /// [`crate::LoadOptions::expected_transcript`].
    #[error("the verifying key's transcript_repr {found:?} is not the pinned {expected:?}")]
    TranscriptMismatch {
        /// The pinned value.
        expected: Fr,
        /// The loaded verifying key's.
        found: Fr,
    },

    /// The digest recorded in the file's header is not the digest of the key it holds: the
    /// header was forged or the file assembled from parts.
    #[error("the file records key digest {recorded}, but its key's digest is {found}")]
    RecordedDigestMismatch {
        /// The digest the header records.
        recorded: KeyDigest,
        /// The digest of the key decoded from the file.
        found: KeyDigest,
    },

    /// Loading would spend memory the input's bytes do not justify beyond the memory budget.
    #[error("{what} needs {requested} bytes of memory that the input does not justify, over the memory budget of {budget} bytes (raise Limits::memory_budget to allow it)")]
    OverBudget {
        /// What would be allocated or computed.
        what: &'static str,
        /// The bytes it would take.
        requested: u64,
        /// The budget ([`crate::Limits::memory_budget`]).
        budget: u64,
    },

    /// The allocator could not provide memory the input justifies.
    #[error("could not allocate {bytes} bytes for {what}")]
    OutOfMemory {
        /// What was being allocated.
        what: &'static str,
        /// How much.
        bytes: u64,
    },

    /// A declared size is larger than the configured limit or than the data can hold.
    #[error("{what}: {requested} exceeds the limit of {limit}")]
    LimitExceeded {
        /// What was being sized.
        what: &'static str,
        /// The size requested by the data.
        requested: u64,
        /// The limit it broke.
        limit: u64,
    },

    /// A field element is not a canonical encoding (not below the modulus).
    #[error("invalid field element in {context}: not below the field modulus")]
    InvalidFieldElement {
        /// Where the element was found.
        context: &'static str,
    },

    /// A curve point is not on the curve, or its encoding is malformed.
    #[error("invalid curve point in {context}: not on the curve or malformed")]
    InvalidPoint {
        /// Where the point was found.
        context: &'static str,
    },

    /// The key's structure does not fit the circuit (column counts, polynomial lengths...).
    #[error("structure mismatch in {what}: expected {expected}, found {found}")]
    Structure {
        /// The quantity that disagrees.
        what: &'static str,
        /// The value the circuit implies.
        expected: u64,
        /// The value found in the data.
        found: u64,
    },

    /// The payload is malformed in a way specific to one backend's format.
    #[error("malformed payload: {0}")]
    Malformed(String),

    /// A backend-specific decoding failure, kept as the source.
    #[error("{codec} payload refused by the backend's own decoder")]
    Backend {
        /// The backend that failed.
        codec: &'static str,
        /// The backend's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The backend cannot store this key in its layout (nothing was written).
    #[error("the {codec} backend cannot store this key: {reason}")]
    NotStorable {
        /// The backend that refused.
        codec: &'static str,
        /// Why.
        reason: String,
    },

    /// A feature this call needs was compiled out of this build.
    #[error("{what} is not compiled in: enable the Cargo feature `{feature}`")]
    NotCompiled {
        /// What is missing (a backend, remote storage...).
        what: String,
        /// The Cargo feature of the `keycodec` crate that compiles it in.
        feature: &'static str,
    },

    /// Something went wrong with an object in object storage: `source` says what (an
    /// error of the store, a changed object, or any error a load of its bytes can report:
    /// a truncated or corrupt object, a pin mismatch...).
    #[error("{object}: {source}")]
    Remote {
        /// The object (`s3://bucket/path`, or the store and path).
        object: String,
        /// What went wrong.
        source: Box<Error>,
    },

    /// The object store reported a failure that its retries did not overcome (a missing
    /// object, refused credentials, a server that kept failing).
    #[error("object storage could not {operation}: {source}")]
    ObjectStore {
        /// What was being done: `read the metadata of`, `read a range of`, `upload`...
        operation: &'static str,
        /// The store's error.
        source: Box<dyn std::error::Error + Send + Sync>,
        /// The store said the object is not there (a cold start generates it).
        missing: bool,
    },

    /// The object was replaced while it was read (its ETag changed between requests): what
    /// was read would mix two versions, so nothing was loaded. Loading again reads the new
    /// version.
    #[error("the object changed while it was read (it was version {expected}); load it again")]
    ObjectChanged {
        /// The ETag (or version) the load started with.
        expected: String,
    },

    /// A file changed while it was read (its length, or its modification or change time,
    /// moved between the start and the end of the read): what was read may mix two versions,
    /// so nothing read from it is used. Reading it again reads the new file.
    #[error("{}: the file changed while it was read, so nothing read from it is used (read it again)", path.display())]
    FileChanged {
        /// The file.
        path: PathBuf,
    },

    /// The KZG parameters were made from a public seed: their secret is known, so anyone can
    /// forge proofs under them ([`crate::test_setup`]).
    #[error("INSECURE: these KZG parameters were made from a public seed ({origin}): their secret is known, so anyone can forge proofs under them. Use a ceremony's parameters; a test that means to use them sets test_setup: TestSetup::Allowed (LoadOptions, ParamsOptions) or passes --allow-test-setup")]
    TestSetup {
        /// Which seed.
        origin: &'static str,
    },

    /// Unpinned KZG parameters were asked for over plain `http://`: anyone on the path could
    /// hand over other parameters (a test setup whose secret they know), and nothing would
    /// tell. Pin them, or fetch them over `https://`.
    #[error("{url}: unpinned KZG parameters over plain http:// are refused (anyone on the path could substitute them): pin them (ParamsPin::Sha256, a manifest's \"sha256\") or use https://")]
    UnpinnedOverHttp {
        /// The URL.
        url: String,
    },

    /// A manifest (a prover's artifacts declared once) is malformed, or does not name what
    /// was asked of it.
    #[error("{}: {message}", path.display())]
    Manifest {
        /// The manifest's file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// An artifact a manifest names could not be had: `source` says why (missing, another
    /// digest, a store that failed...).
    #[error("the manifest's {name}: {source}")]
    Artifact {
        /// The artifact's name in the manifest (`params`, or a key's name).
        name: String,
        /// What went wrong.
        source: Box<Error>,
    },

    /// A proof did not verify with the verifying key, the parameters and the instances given
    /// (halo2's reason: a wrong proof or wrong instances; instances of another count of
    /// columns; a proof cut short).
    #[error("the proof does not verify: {reason}")]
    ProofRejected {
        /// halo2's error.
        reason: String,
    },

    /// The container holds no record of its circuit (saved before keycodec recorded circuits,
    /// or of a circuit whose constraint system could not be recorded): load the key with its
    /// circuit type.
    #[error("the container holds no record of its circuit: load the key with its circuit type")]
    NotRecorded,

    /// The circuit's parameters a record carries are missing (the key was saved without them)
    /// or not of the type asked for.
    #[error("the circuit's recorded parameters: {0}")]
    CircuitParams(String),

    /// A bug in keycodec or a backend (a broken internal invariant, a worker thread that
    /// panicked), reported instead of panicking.
    #[error("internal error: {0} (please report this)")]
    Internal(String),
}

impl Error {
    /// An I/O failure while doing `operation`, to no particular path (yet: see
    /// [`Error::at_path`]).
    pub fn io(operation: &'static str, source: io::Error) -> Self {
        Error::Io {
            operation,
            path: None,
            source,
        }
    }

    /// `self`, as the error of the object `object` (unless it already names one).
    #[must_use]
    pub fn in_object(self, object: &str) -> Self {
        match self {
            remote @ Error::Remote { .. } => remote,
            other => Error::Remote {
                object: object.to_owned(),
                source: Box::new(other),
            },
        }
    }

    /// The error under any [`Error::Remote`] and [`Error::Artifact`] wrappers: what went
    /// wrong, wherever it did.
    pub fn cause(&self) -> &Error {
        match self {
            Error::Remote { source, .. } | Error::Artifact { source, .. } => source.cause(),
            other => other,
        }
    }

    /// Whether the file or object is not there (a missing file, a missing object): a cold
    /// start generates it.
    pub fn is_missing(&self) -> bool {
        match self.cause() {
            Error::Io { source, .. } => source.kind() == io::ErrorKind::NotFound,
            Error::ObjectStore { missing, .. } => *missing,
            _ => false,
        }
    }

    /// Whether the bytes read are damaged: not a sound container (or halo2 file) at all, as
    /// its checksums, lengths, structure or values prove. A cache removes such a file and
    /// fetches it again.
    pub fn is_damage(&self) -> bool {
        matches!(
            self.cause(),
            Error::Truncated { .. }
                | Error::BadMagic
                | Error::HeaderChecksum
                | Error::PayloadChecksum { .. }
                | Error::ReservedField { .. }
                | Error::UnknownKeyKind { .. }
                | Error::LengthMismatch { .. }
                | Error::TrailingBytes { .. }
                | Error::RecordedDigestMismatch { .. }
                | Error::InvalidFieldElement { .. }
                | Error::InvalidPoint { .. }
                | Error::Structure { .. }
                | Error::Malformed(_)
                | Error::Backend { .. }
        )
    }

    /// Whether the error came through a transport: the bytes were an object store's or a
    /// server's answer ([`Error::Remote`] anywhere in the chain), not a file of this machine.
    pub fn is_remote(&self) -> bool {
        match self {
            Error::Remote { .. } => true,
            Error::Artifact { source, .. } => source.is_remote(),
            _ => false,
        }
    }

    /// **The one rule** by which keycodec replaces an artifact (a file, a cache entry, an
    /// object): whether this error, from one complete read of one version of it, proves it is
    /// not the artifact asked for.
    ///
    /// It does when the artifact's own bytes say so: another circuit, `k`, kind or curve,
    /// another digest, transcript or file hash than the pinned one; or, for a file of this
    /// machine, damage its checksums, lengths, structure or values prove
    /// ([`Error::is_damage`]). It never does for:
    ///
    /// - damage seen through a transport ([`Error::is_remote`]): a short or long body, a size
    ///   that disagrees with the header, a checksum over bytes a proxy or a broken connection
    ///   handed over are the transfer's failure as much as the object's, so an object is never
    ///   replaced for them (load it again; delete it to have it regenerated);
    /// - a verifying key asked of a proving key's container ([`Error::KindMismatch`] with
    ///   `expected` verifying and `found` proving): that container holds it;
    /// - I/O and store failures, a file that changed while it was read
    ///   ([`Error::FileChanged`]), the caller's own limits, budget or codecs, a newer format
    ///   or codec, a fingerprint written by another halo2.
    ///
    /// A missing artifact ([`Error::is_missing`]) is not disproved: it is absent, and a start
    /// creates it.
    pub fn disproves_artifact(&self) -> bool {
        let cause = self.cause();
        let another = match cause {
            Error::KindMismatch {
                expected: ArtifactKind::Verifying,
                found: ArtifactKind::Proving,
            } => false,
            Error::CurveMismatch { .. }
            | Error::KindMismatch { .. }
            | Error::KMismatch { .. }
            | Error::CircuitMismatch { .. }
            | Error::DigestMismatch { .. }
            | Error::TranscriptMismatch { .. }
            | Error::FileHashMismatch { .. } => true,
            _ => false,
        };
        another || (cause.is_damage() && !self.is_remote())
    }

    /// Maps an I/O error raised while reading `context`, turning an early end of data into
    /// [`Error::Truncated`].
    pub fn from_read(err: io::Error, context: &'static str) -> Self {
        if err.kind() == io::ErrorKind::UnexpectedEof {
            Error::Truncated { context }
        } else {
            Error::io("read", err)
        }
    }

    /// Names `path` in an [`Error::Io`] or an [`Error::DigestMismatch`] that names no path
    /// yet; other errors are returned as they are.
    #[must_use]
    pub fn at_path(self, path: &Path) -> Self {
        match self {
            Error::Io {
                operation,
                path: None,
                source,
            } => Error::Io {
                operation,
                path: Some(path.to_path_buf()),
                source,
            },
            Error::DigestMismatch {
                kind,
                path: None,
                expected,
                found,
            } => Error::DigestMismatch {
                kind,
                path: Some(path.to_path_buf()),
                expected,
                found,
            },
            other => other,
        }
    }
}

/// Maps `io::Result`s into [`Error::Io`] naming the operation: `out.write_all(b).during("write")?`.
/// The path, where there is one, is added by whoever knows it ([`Error::at_path`]).
pub trait IoContext<T> {
    /// The error, as a failure to do `operation`.
    fn during(self, operation: &'static str) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn during(self, operation: &'static str) -> Result<T> {
        self.map_err(|err| Error::io(operation, err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_name_the_operation_and_the_path() {
        let err = Error::io("open", io::Error::from(io::ErrorKind::NotFound))
            .at_path(Path::new("keys/circuit.pk"));
        let text = err.to_string();
        assert!(
            text.starts_with("could not open keys/circuit.pk: "),
            "{text}"
        );
        // A path already named is kept.
        let again = err.at_path(Path::new("other"));
        assert!(again.to_string().contains("keys/circuit.pk"), "{again}");
        let streamed = Error::from_read(io::Error::other("reset"), "payload");
        assert!(
            streamed.to_string().starts_with("could not read: "),
            "{streamed}"
        );
        assert!(matches!(
            Error::from_read(io::Error::from(io::ErrorKind::UnexpectedEof), "payload"),
            Error::Truncated { context: "payload" }
        ));
    }
}
