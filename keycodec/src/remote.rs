//! Keys and parameters in object storage (S3 and compatible; HTTP(S) for parameters), with a
//! local cache.

use std::path::Path;

pub use keycodec_remote::*;

use keycodec_core::halo2_proofs::plonk::Circuit;
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_core::{Error, HaloKey, KeyCodec, LoadOptions, Result};
use keycodec_remote::object_store::path::Path as ObjectPath;

pub use crate::cache::{fetch_params, pinned_name, CacheOutcome, Fetched};
use crate::Backend;

/// What the facade adds to [`Remote`]: loads through the machine's
/// cache, and loads whose backend the object's own header names, as [`crate::load_any`] does for
/// files.
pub trait RemoteExt {
    /// Loads a key from `location` through the cache directory `cache` (created if missing),
    /// the machine's one cache of objects (its files named by pin or by the object's version,
    /// a lock with a deadline, an entry replaced only when proven damaged). A hit is a file load with every check a file load makes,
    /// the pin among them; with a pin ([`LoadOptions::expected_digest`]) it needs no request
    /// to the store at all. A miss downloads one version of the object once per machine,
    /// loading it as it lands; the file takes its name only once the key has loaded. A
    /// verifying key may come from a proving key's container.
    ///
    /// # Errors
    ///
    /// As [`Remote::load`], and [`Error::Io`] naming the cache's
    /// files (a lock held past
    /// [`RemoteOptions::lock_timeout`] among them).
    fn load_cached<C: Circuit<Fr>, K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        cache: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<(K, CacheOutcome)>;

    /// The backend that wrote the container at `location`, from its header (one ranged GET
    /// of its first bytes), if `options.codecs` allows it.
    ///
    /// # Errors
    ///
    /// As [`Remote::header`], [`Error::UnknownCodec`] for a
    /// codec id this crate does not know, [`Error::CodecNotAllowed`].
    fn backend_of(&self, location: &ObjectPath, options: &LoadOptions) -> Result<Backend>;

    /// Loads a key from `location` with whichever backend wrote it (as
    /// [`backend_of`](RemoteExt::backend_of) finds it: a codec `options.codecs` refuses is
    /// refused before the key is read), with every check of
    /// [`Remote::load`].
    ///
    /// # Errors
    ///
    /// As [`RemoteExt::backend_of`], [`Backend::codec`] and
    /// [`Remote::load`].
    fn load_any<C: Circuit<Fr>, K: HaloKey>(
        &self,
        location: &ObjectPath,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K>;
}

impl RemoteExt for Remote {
    fn load_cached<C: Circuit<Fr>, K: HaloKey>(
        &self,
        codec: &dyn KeyCodec,
        location: &ObjectPath,
        cache: &Path,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<(K, CacheOutcome)> {
        crate::cache::key::load_cached::<C, K>(
            self,
            codec,
            location,
            cache,
            circuit_params,
            options,
        )
    }

    fn backend_of(&self, location: &ObjectPath, options: &LoadOptions) -> Result<Backend> {
        let header = self.header(location)?;
        let refused = |err: Error| err.in_object(&self.name(location));
        if !options.codecs.contains(header.codec) {
            return Err(refused(Error::CodecNotAllowed {
                found: header.codec,
            }));
        }
        Backend::of_id(header.codec).ok_or_else(|| {
            refused(Error::UnknownCodec {
                found: header.codec,
            })
        })
    }

    fn load_any<C: Circuit<Fr>, K: HaloKey>(
        &self,
        location: &ObjectPath,
        circuit_params: C::Params,
        options: &LoadOptions,
    ) -> Result<K> {
        let codec = self.backend_of(location, options)?.codec()?;
        self.load::<C, K>(codec, location, circuit_params, options)
    }
}
