//! The backend list: the one place a backend is registered, and where codecs chosen at run
//! time by name are erased to `&dyn KeyCodec`.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

#[allow(unused_imports)] // used by the codecs of the backends compiled in
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::header::Header;
use keycodec_core::{CodecId, Error, KeyCodec, Result};

/// One backend: how users name it, the id its files carry, the Cargo feature that compiles
/// it in (named like the backend), and its codecs when compiled in.
struct Entry {
    name: &'static str,
    id: CodecId,
    summary: &'static str,
    /// The codecs of each wire mode the backend writes, its default first; `None` when the
    /// backend's feature is off.
    codecs: Option<&'static [&'static dyn KeyCodec]>,
}

/// An [`Entry`], with its codecs only when the Cargo feature named like the backend is on.
macro_rules! backend {
    ($name:literal, $id:expr, $summary:literal, [$($codec:expr),+ $(,)?]) => {
        Entry {
            name: $name,
            id: $id,
            summary: $summary,
            codecs: {
                #[cfg(feature = $name)]
                const CODECS: Option<&'static [&'static dyn KeyCodec]> = Some(&[$(&$codec),+]);
                #[cfg(not(feature = $name))]
                const CODECS: Option<&'static [&'static dyn KeyCodec]> = None;
                CODECS
            },
        }
    };
}

/// Every backend this crate knows, compiled in or not, in the order reports list them.
const BACKENDS: &[Entry] = &[
    backend!(
        "rawbytes",
        CodecId::RAWBYTES,
        "halo2's own layout (byte-compatible with pk.write): the fastest loads",
        [
            keycodec_rawbytes::RawBytesCodec::new(SerdeFormat::RawBytes),
            keycodec_rawbytes::RawBytesCodec::new(SerdeFormat::Processed),
        ]
    ),
    backend!(
        "bincode",
        CodecId::BINCODE,
        "serde + bincode 1.3.3: for pipelines built on serde",
        [keycodec_bincode::BincodeCodec]
    ),
    backend!(
        "rkyv",
        CodecId::RKYV,
        "rkyv archives, validated in place with bytecheck",
        [keycodec_rkyv::RkyvCodec]
    ),
    backend!(
        "compact",
        CodecId::COMPACT,
        "only what cannot be recomputed: the smallest files, slower loads",
        [keycodec_compact::CompactCodec]
    ),
];

/// A backend, by the name users type. Every backend this crate knows exists in every build;
/// using one whose Cargo feature is off returns [`Error::NotCompiled`] naming the feature.
#[derive(Clone, Copy)]
pub struct Backend(&'static Entry);

// The indexes are evaluated at compile time: one out of range fails the build.
#[allow(clippy::indexing_slicing)]
impl Backend {
    /// halo2's own layout (byte-compatible with `pk.write`): the fastest loads; what a save
    /// writes when [`KeyOptions::backend`](crate::KeyOptions::backend) names none.
    pub const RAWBYTES: Backend = Backend(&BACKENDS[0]);
    /// serde + bincode 1.3.3: for pipelines built on serde.
    pub const BINCODE: Backend = Backend(&BACKENDS[1]);
    /// rkyv archives, validated in place.
    pub const RKYV: Backend = Backend(&BACKENDS[2]);
    /// Only what cannot be recomputed: the smallest files, slower loads.
    pub const COMPACT: Backend = Backend(&BACKENDS[3]);

    /// Every backend, compiled in or not.
    pub fn all() -> impl Iterator<Item = Backend> {
        BACKENDS.iter().map(Backend)
    }

    /// The backends this build includes.
    pub fn compiled() -> impl Iterator<Item = Backend> {
        Backend::all().filter(|backend| backend.is_compiled())
    }

    /// The backend whose files carry `id`, if this crate knows one.
    pub fn of_id(id: CodecId) -> Option<Backend> {
        Backend::all().find(|backend| backend.id() == id)
    }

    /// The name users type, as `FromStr` parses it and `Display` prints it.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// One line on what the backend is for.
    pub fn summary(self) -> &'static str {
        self.0.summary
    }

    /// The Cargo feature of the `keycodec` crate that compiles this backend in.
    pub fn feature(self) -> &'static str {
        self.0.name
    }

    /// The id this backend writes into container headers.
    pub fn id(self) -> CodecId {
        self.0.id
    }

    /// Whether this build includes the backend.
    pub fn is_compiled(self) -> bool {
        self.0.codecs.is_some()
    }

    /// The backend's default codec.
    ///
    /// # Errors
    ///
    /// [`Error::NotCompiled`] when the backend's feature is off.
    pub fn codec(self) -> Result<&'static dyn KeyCodec> {
        self.codecs()?
            .first()
            .copied()
            .ok_or_else(|| Error::Internal(format!("backend `{}` lists no codec", self.name())))
    }

    /// A codec for each wire mode the backend writes, its default first (rawbytes: halo2's
    /// `RawBytes`, then `Processed`).
    ///
    /// # Errors
    ///
    /// [`Error::NotCompiled`] when the backend's feature is off.
    pub fn codecs(self) -> Result<&'static [&'static dyn KeyCodec]> {
        self.0.codecs.ok_or_else(|| Error::NotCompiled {
            what: format!("backend `{}`", self.name()),
            feature: self.feature(),
        })
    }

    /// The backend that wrote the container at `path`, read from its header.
    ///
    /// # Errors
    ///
    /// I/O errors, header errors ([`Error::BadMagic`], [`Error::HeaderChecksum`], ...), or
    /// [`Error::UnknownCodec`] for a codec id this crate does not know.
    pub fn of_file(path: &Path) -> Result<Backend> {
        let read = || {
            let file = std::fs::File::open(path).map_err(|err| Error::io("open", err))?;
            Backend::of_open_file(&file)
        };
        read().map_err(|err| err.at_path(path))
    }

    /// The backend that wrote the container in `file`, read from its header
    /// ([`header::read_header`](keycodec_core::header::read_header)).
    ///
    /// # Errors
    ///
    /// As [`Backend::of_file`], naming no path.
    pub(crate) fn of_open_file(file: &std::fs::File) -> Result<Backend> {
        let (header, _) = keycodec_core::header::read_header(file)?;
        Backend::of_id(header.codec).ok_or(Error::UnknownCodec {
            found: header.codec,
        })
    }
}

/// Checks a container's header against a key declared by its backend, kind and (optionally)
/// digest, without decoding it: the codec is `backend`'s; the kind is `kind` (a verifying key
/// may come in a proving key's container); the recorded digest, when the container is of that
/// kind, is `digest`. What a manifest's fetch and check look at before a start loads the key
/// (which recomputes the digest from the key itself).
///
/// # Errors
///
/// [`Error::CodecMismatch`], [`Error::KindMismatch`] or [`Error::DigestMismatch`].
pub(crate) fn expect_key(
    header: &Header,
    backend: Backend,
    kind: keycodec_core::ArtifactKind,
    digest: Option<keycodec_core::KeyDigest>,
) -> Result<()> {
    use keycodec_core::ArtifactKind;
    if header.codec != backend.id() {
        return Err(Error::CodecMismatch {
            expected: backend.id(),
            expected_name: backend.name(),
            found: header.codec,
        });
    }
    if header.kind != kind
        && !(kind == ArtifactKind::Verifying && header.kind == ArtifactKind::Proving)
    {
        return Err(Error::KindMismatch {
            expected: kind,
            found: header.kind,
        });
    }
    match (digest, header.digest) {
        (Some(expected), Some(found)) if header.kind == kind && found != expected => {
            Err(Error::DigestMismatch {
                kind,
                path: None,
                expected,
                found,
            })
        }
        _ => Ok(()),
    }
}

impl PartialEq for Backend {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Backend {}

impl std::hash::Hash for Backend {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state);
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Backend({})", self.name())
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend name that names no backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseBackendError {
    name: String,
}

impl fmt::Display for ParseBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Backend::all().map(Backend::name).collect();
        write!(
            f,
            "unknown backend `{}` (known: {})",
            self.name,
            known.join(", ")
        )
    }
}

impl std::error::Error for ParseBackendError {}

impl FromStr for Backend {
    type Err = ParseBackendError;

    fn from_str(name: &str) -> std::result::Result<Self, ParseBackendError> {
        let wanted = name.trim().to_ascii_lowercase();
        Backend::all()
            .find(|backend| backend.name() == wanted)
            .ok_or_else(|| ParseBackendError {
                name: name.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for backend in Backend::all() {
            assert_eq!(backend.to_string().parse::<Backend>().ok(), Some(backend));
        }
        assert_eq!(
            " RawBytes ".parse::<Backend>().map(Backend::name).ok(),
            Some("rawbytes")
        );
    }

    /// The list agrees with the registry and the codecs: names, ids and wire modes, no two
    /// backends alike, every registered id listed.
    #[test]
    fn the_list_agrees_with_its_codecs() {
        assert_eq!(Backend::all().count(), CodecId::REGISTRY.len());
        let mut ids = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for backend in Backend::all() {
            assert!(ids.insert(backend.id()), "{backend}: id used twice");
            assert!(names.insert(backend.name()), "{backend}: name used twice");
            assert_eq!(Backend::of_id(backend.id()), Some(backend));
            assert_eq!(backend.id().registered_name(), Some(backend.name()));
            assert!(CodecId::REGISTRY.contains(&(backend.id(), backend.name())));
            let Ok(codecs) = backend.codecs() else {
                continue;
            };
            assert!(!codecs.is_empty());
            for codec in codecs {
                assert_eq!(codec.name(), backend.name());
                assert_eq!(codec.id(), backend.id());
                assert!(codec.wire_modes().contains(&codec.wire_mode()));
            }
        }
    }

    #[test]
    fn compiled_out_backends_name_their_feature() {
        for backend in Backend::all().filter(|b| !b.is_compiled()) {
            let result = backend.codec();
            assert!(
                matches!(&result, Err(Error::NotCompiled { feature, .. }) if *feature == backend.feature()),
                "{backend}: {:?}",
                result.err()
            );
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = "protobuf"
            .parse::<Backend>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("unknown backend `protobuf` (known: rawbytes, "),
            "{err}"
        );
        assert!(
            Backend::all().all(|backend| err.contains(backend.name())),
            "{err}"
        );
    }
}
