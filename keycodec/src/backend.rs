//! Backends chosen at run time by name: the one place where the static codecs are erased.

// With every backend compiled out, the dispatching methods ignore their arguments.
#![cfg_attr(
    not(any(
        feature = "rawbytes",
        feature = "bincode",
        feature = "rkyv",
        feature = "compact"
    )),
    allow(unused_variables)
)]

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use codec_core::halo2_proofs::plonk::Circuit;
use codec_core::halo2curves::bn256::Fr;
use codec_core::header::{Header, HEADER_LEN};
use codec_core::{CodecId, Error, HaloKey, LoadOptions, Result, SaveOptions};

/// Runs `$body` with `$codec` bound to the backend's default codec, or returns
/// [`Error::BackendNotCompiled`].
macro_rules! with_codec {
    ($backend:expr, $codec:ident => $body:expr) => {{
        #[allow(unused_imports)]
        use codec_core::KeyCodec as _;
        match $backend {
            Backend::RawBytes => {
                #[cfg(feature = "rawbytes")]
                {
                    let $codec = codec_rawbytes::RawBytesCodec::default();
                    $body
                }
                #[cfg(not(feature = "rawbytes"))]
                {
                    Err(not_compiled(Backend::RawBytes))
                }
            }
            Backend::Bincode => {
                #[cfg(feature = "bincode")]
                {
                    let $codec = codec_bincode::BincodeCodec;
                    $body
                }
                #[cfg(not(feature = "bincode"))]
                {
                    Err(not_compiled(Backend::Bincode))
                }
            }
            Backend::Rkyv => {
                #[cfg(feature = "rkyv")]
                {
                    let $codec = codec_rkyv::RkyvCodec;
                    $body
                }
                #[cfg(not(feature = "rkyv"))]
                {
                    Err(not_compiled(Backend::Rkyv))
                }
            }
            Backend::Compact => {
                #[cfg(feature = "compact")]
                {
                    let $codec = codec_compact::CompactCodec;
                    $body
                }
                #[cfg(not(feature = "compact"))]
                {
                    Err(not_compiled(Backend::Compact))
                }
            }
        }
    }};
}

/// A backend, by the name users type. Every variant exists in every build; using one whose
/// Cargo feature is off returns [`Error::BackendNotCompiled`] naming the feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// halo2's own `RawBytes` layout (`codec-rawbytes`, feature `rawbytes`).
    RawBytes,
    /// serde + bincode 1.3.3 (`codec-bincode`, feature `bincode`).
    Bincode,
    /// rkyv archives, memory-mapped on load (`codec-rkyv`, feature `rkyv`).
    Rkyv,
    /// Only the non-derivable data, the rest recomputed on load (`codec-compact`, feature
    /// `compact`).
    Compact,
}

/// The names [`Backend`] parses, comma-separated, for error messages.
const KNOWN: &str = "rawbytes, bincode, rkyv, compact";

impl Backend {
    /// Every backend, compiled in or not.
    pub const ALL: [Backend; 4] = [
        Backend::RawBytes,
        Backend::Bincode,
        Backend::Rkyv,
        Backend::Compact,
    ];

    /// The name users type, as `FromStr` parses it and `Display` prints it.
    pub fn name(self) -> &'static str {
        self.codec_id().name()
    }

    /// The Cargo feature of the `keycodec` crate that compiles this backend in.
    pub fn feature(self) -> &'static str {
        match self {
            Backend::RawBytes => "rawbytes",
            Backend::Bincode => "bincode",
            Backend::Rkyv => "rkyv",
            Backend::Compact => "compact",
        }
    }

    /// The id this backend writes into container headers.
    pub fn codec_id(self) -> CodecId {
        match self {
            Backend::RawBytes => CodecId::RawBytes,
            Backend::Bincode => CodecId::Bincode,
            Backend::Rkyv => CodecId::Rkyv,
            Backend::Compact => CodecId::Compact,
        }
    }

    /// Whether this build includes the backend.
    pub fn is_compiled(self) -> bool {
        match self {
            Backend::RawBytes => cfg!(feature = "rawbytes"),
            Backend::Bincode => cfg!(feature = "bincode"),
            Backend::Rkyv => cfg!(feature = "rkyv"),
            Backend::Compact => cfg!(feature = "compact"),
        }
    }

    /// The backends this build includes.
    pub fn compiled() -> impl Iterator<Item = Backend> {
        Backend::ALL
            .into_iter()
            .filter(|backend| backend.is_compiled())
    }

    /// The backend that wrote the container at `path`, read from its header.
    ///
    /// # Errors
    ///
    /// I/O errors, header errors ([`Error::BadMagic`], [`Error::HeaderChecksum`], ...), or
    /// [`Error::UnknownBackend`] for a codec id this build does not know.
    pub fn of_file(path: &Path) -> Result<Backend> {
        let mut bytes = [0u8; HEADER_LEN];
        std::fs::File::open(path)?
            .read_exact(&mut bytes)
            .map_err(|err| Error::from_read(err, "container header"))?;
        let header = Header::from_bytes(&bytes)?;
        Backend::ALL
            .into_iter()
            .find(|backend| backend.codec_id() == header.codec)
            .ok_or_else(|| Error::UnknownBackend {
                name: header.codec.to_string(),
                known: KNOWN,
            })
    }

    /// Saves a key with this backend's default mode; see [`codec_core::KeyCodec::save`].
    ///
    /// # Errors
    ///
    /// [`Error::BackendNotCompiled`], or the codec's save errors.
    pub fn save<C: Circuit<Fr>, K: HaloKey>(
        self,
        path: &Path,
        key: &K,
        circuit_params: C::Params,
        options: &SaveOptions,
    ) -> Result<()> {
        with_codec!(self, codec => codec.save::<C, K>(path, key, circuit_params, options))
    }

    /// Loads a key with this backend; see [`codec_core::KeyCodec::load`].
    ///
    /// # Errors
    ///
    /// [`Error::BackendNotCompiled`], or the codec's load errors.
    pub fn load<C: Circuit<Fr>, K: HaloKey>(
        self,
        path: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        with_codec!(self, codec => codec.load::<C, K>(path, circuit_params, options))
    }

    /// Encodes a container into memory; see [`codec_core::KeyCodec::to_vec`].
    ///
    /// # Errors
    ///
    /// [`Error::BackendNotCompiled`], or the codec's errors.
    pub fn to_vec<C: Circuit<Fr>, K: HaloKey>(
        self,
        key: &K,
        circuit_params: C::Params,
    ) -> Result<Vec<u8>> {
        with_codec!(self, codec => codec.to_vec::<C, K>(key, circuit_params))
    }

    /// Reads one container from a stream; see [`codec_core::KeyCodec::read`].
    ///
    /// # Errors
    ///
    /// [`Error::BackendNotCompiled`], or the codec's load errors.
    pub fn read<C: Circuit<Fr>, K: HaloKey>(
        self,
        reader: &mut impl Read,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        with_codec!(self, codec => codec.read::<C, K>(reader, circuit_params, options))
    }

    /// Decodes a container held in memory; see [`codec_core::KeyCodec::read_slice`].
    ///
    /// # Errors
    ///
    /// [`Error::BackendNotCompiled`], or the codec's load errors.
    pub fn read_slice<C: Circuit<Fr>, K: HaloKey>(
        self,
        bytes: &[u8],
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        with_codec!(self, codec => codec.read_slice::<C, K>(bytes, circuit_params, options))
    }
}

/// Loads a key with whichever backend wrote it (read from the file's header).
///
/// # Errors
///
/// As [`Backend::of_file`] and [`Backend::load`].
pub fn load_any<C: Circuit<Fr>, K: HaloKey>(
    path: &Path,
    circuit_params: C::Params,
    options: &LoadOptions,
) -> Result<K> {
    Backend::of_file(path)?.load::<C, K>(path, circuit_params, options)
}

#[allow(dead_code)]
fn not_compiled(backend: Backend) -> Error {
    Error::BackendNotCompiled {
        backend: backend.name(),
        feature: backend.feature(),
    }
}

impl FromStr for Backend {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        let wanted = name.trim().to_ascii_lowercase();
        Backend::ALL
            .into_iter()
            .find(|backend| backend.name() == wanted)
            .ok_or_else(|| Error::UnknownBackend {
                name: name.to_owned(),
                known: KNOWN,
            })
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for backend in Backend::ALL {
            assert_eq!(backend.to_string().parse::<Backend>().ok(), Some(backend));
        }
        assert_eq!(
            " RawBytes ".parse::<Backend>().ok(),
            Some(Backend::RawBytes)
        );
    }

    #[test]
    fn compiled_out_backends_name_their_feature() {
        for backend in Backend::ALL.into_iter().filter(|b| !b.is_compiled()) {
            let result = backend.to_vec::<Unused, codec_core::halo2_proofs::plonk::VerifyingKey<
                codec_core::halo2curves::bn256::G1Affine,
            >>(codec_core::testing::standard_plonk().vk(), ());
            assert!(
                matches!(result, Err(Error::BackendNotCompiled { feature, .. }) if feature == backend.feature()),
                "{backend}: {:?}",
                result.err()
            );
        }
    }

    type Unused = codec_core::testing::StandardPlonk;

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = "protobuf".parse::<Backend>().err();
        assert!(
            matches!(&err, Some(Error::UnknownBackend { name, known }) if name == "protobuf" && known.contains("rawbytes")),
            "{err:?}"
        );
    }
}
