//! A drop-in for snark-verifier-sdk's and halo2-base's key and parameter files: the same
//! signatures, so switching is one `use` line:
//!
//! ```text
//! - use snark_verifier_sdk::{gen_pk, read_pk};
//! + use keycodec::compat::{gen_pk, read_pk};
//! ```
//!
//! What changes behind them: [`read_pk`] reads keycodec containers (any backend) and the
//! headerless files snark-verifier-sdk writes (halo2's `RawBytes` / `RawBytesUnchecked`
//! layout, the same bytes), checks every value, and returns an `io::Error` for a truncated or
//! damaged file instead of panicking; [`gen_pk`] regenerates only a missing or provably wrong
//! file and writes atomically and durably (a killed `gen_pk` leaves the previous file or the
//! new one, never a torn one); [`read_params`] follows halo2-base's `PARAMS_DIR` convention but
//! never generates parameters, and refuses a test setup (halo2-base's `gen_srs` makes them
//! from a public seed).
//!
//! Files snark-verifier-sdk already wrote are left as they are, and keys `gen_pk` generates are
//! written in the same headerless layout: a fleet where some processes still read with
//! snark-verifier-sdk's `read_pk` keeps working while it switches. (That layout has no
//! checksum: damage is caught by the value and structure checks, not always; once every
//! reader has switched, save containers with [`save_key`](crate::save_key),
//! which `read_pk` reads too, to get checksums and digest pins.)

use keycodec_core::record::RecordableParams;
use std::io;
use std::path::{Path, PathBuf};

use keycodec_core::halo2_proofs::plonk::{keygen_pk, keygen_vk, Circuit, ProvingKey};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2_proofs::poly::kzg::commitment::ParamsKZG;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::halo2curves::bn256::{Bn256, Fr, G1Affine};
use keycodec_core::{Error, LoadOptions};
use keycodec_rawbytes::RawBytesCodec;

use crate::params::ParamsOptions;
use crate::replace::{judge_file, Found};

/// Reads the proving key at `path`, as snark-verifier-sdk's `read_pk` does (`params` are the
/// circuit's, `circuit.params()`): a keycodec container of any backend, or halo2's headerless
/// layout (what snark-verifier-sdk's `gen_pk` writes), every value checked.
///
/// # Errors
///
/// An `io::Error` carrying keycodec's [`Error`] as its source: kind `NotFound` for a missing
/// file, `InvalidData` for one that is truncated, damaged or another circuit's key (what
/// [`gen_pk`] regenerates), the operating system's kind for an I/O failure, `OutOfMemory`.
pub fn read_pk<C: Circuit<Fr>>(path: &Path, params: C::Params) -> io::Result<ProvingKey<G1Affine>> {
    load_pk::<C>(path, params, &LoadOptions::default()).map_err(into_io)
}

fn load_pk<C: Circuit<Fr>>(
    path: &Path,
    params: C::Params,
    options: &LoadOptions,
) -> Result<ProvingKey<G1Affine>, Error> {
    let file = std::fs::File::open(path).map_err(|err| Error::io("open", err).at_path(path))?;
    if crate::params::is_container(&file).map_err(|err| err.at_path(path))? {
        crate::key::load_open_file::<C, _>(&file, params, options).map_err(|err| err.at_path(path))
    } else {
        RawBytesCodec::new(SerdeFormat::RawBytes).import_file::<C, _>(path, params, options)
    }
}

/// The proving key at `path`, as snark-verifier-sdk's `gen_pk`: read when it is there and is
/// this circuit's key for `params`'s `k`; generated with halo2's keygen (and written to `path`, its folder
/// created) when `path` is `None`, the file is missing, or it is provably not this key
/// (truncated, damaged, another circuit's or `k`'s: a torn file snark-verifier-sdk left is
/// regenerated, where its `gen_pk` panicked on it). A file that changes while it is read or
/// while the key is generated (a deploy copying a key over it) is not replaced.
///
/// The signature has no room for an error, so: a file that cannot be read for another reason
/// (permissions, an I/O error) is not overwritten, and the generated key is returned; a save
/// that fails (a full disk) leaves the previous file as it was and returns the generated key
/// all the same: the caller's key is never lost to a failed save. Both are reported on
/// standard error. Panics only where snark-verifier-sdk's does too: when halo2's keygen fails
/// (the circuit's bug, not a file's).
pub fn gen_pk<C: Circuit<Fr>>(
    params: &ParamsKZG<Bn256>,
    circuit: &C,
    path: Option<&Path>,
) -> ProvingKey<G1Affine>
where
    C::Params: RecordableParams,
{
    // halo2-lib's `configure` does not depend on `k`: only `expected_k` tells a key for
    // another `k` (a user who changed it) from this one.
    let options = LoadOptions {
        expected_k: Some(params.k()),
        ..LoadOptions::default()
    };
    let mut witness = None;
    if let Some(path) = path {
        let read = || load_pk::<C>(path, circuit.params(), &options);
        match judge_file(path, read, disproves) {
            Ok((Found::Usable(pk), _)) => return pk,
            Ok((Found::Replaceable(_), found)) => witness = Some(found),
            Err(err) => eprintln!(
                "keycodec: {} could not be read ({err}); generating the key without replacing the file",
                path.display()
            ),
        }
    }
    #[allow(clippy::expect_used)] // As snark-verifier-sdk: keygen fails only on a circuit's bug.
    let pk = {
        let vk = keygen_vk(params, circuit).expect("halo2's keygen_vk failed for this circuit");
        keygen_pk(params, vk, circuit).expect("halo2's keygen_pk failed for this circuit")
    };
    if let (Some(path), Some(witness)) = (path, witness) {
        if let Err(err) = witness.still(path).and_then(|()| write_pk(path, &pk)) {
            eprintln!(
                "keycodec: the generated key was not saved to {} ({err}); the file is as it was",
                path.display()
            );
        }
    }
    pk
}

/// Whether a load error proves the file is not this key. The drop-in loads with the default
/// limits (a terabyte), so a `LimitExceeded` is the file's own counts claiming more than its
/// bytes: a torn headerless file reads so.
fn disproves(err: &Error) -> bool {
    err.disproves_artifact() || matches!(err.cause(), Error::LimitExceeded { .. })
}

/// Writes `pk` in halo2's headerless layout, atomically and durably, its folder created.
fn write_pk(path: &Path, pk: &ProvingKey<G1Affine>) -> Result<(), Error> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|err| Error::io("create the folder", err).at_path(dir))?;
    }
    keycodec_core::replace_atomically(path, |file| {
        let mut writer = io::BufWriter::with_capacity(1 << 20, file);
        RawBytesCodec::new(SerdeFormat::RawBytes).export(pk, &mut writer)?;
        io::Write::flush(&mut writer).map_err(|err| Error::io("write", err))
    })
    .map_err(|err| err.at_path(path))
}

/// Where halo2-base looks for the parameters of `k`: `{PARAMS_DIR or ./params}/kzg_bn254_{k}.srs`.
pub fn params_path(k: u32) -> PathBuf {
    let dir =
        std::env::var_os("PARAMS_DIR").map_or_else(|| PathBuf::from("./params"), PathBuf::from);
    dir.join(format!("kzg_bn254_{k}.srs"))
}

/// Reads the parameters halo2-base's `read_params(k)` reads ([`params_path`]): halo2's file in
/// any format, or a keycodec container, every point checked. Unlike halo2-base's `gen_srs`,
/// it never generates parameters when the file is missing, and it refuses parameters made
/// from a public seed (what `gen_srs` writes under that very name).
///
/// # Errors
///
/// An `io::Error` carrying keycodec's [`Error`]: `NotFound` for a missing file,
/// `InvalidData` for a damaged one, another `k`, or a test setup ([`Error::TestSetup`]).
pub fn read_params(k: u32) -> io::Result<ParamsKZG<Bn256>> {
    let options = ParamsOptions {
        k: Some(k),
        ..ParamsOptions::default()
    };
    crate::params::open_params(params_path(k), &options).map_err(into_io)
}

/// keycodec's error as the `io::Error` the drop-in's signatures return.
fn into_io(err: Error) -> io::Error {
    let kind = match err.cause() {
        Error::Io { source, .. } => source.kind(),
        _ if err.is_missing() => io::ErrorKind::NotFound,
        Error::OutOfMemory { .. } => io::ErrorKind::OutOfMemory,
        _ => io::ErrorKind::InvalidData,
    };
    io::Error::new(kind, err)
}

/// The format of halo2's headerless parameters file at `path` (`ParamsKZG::write_custom`),
/// from its length.
pub use crate::params::halo2_params_format;
