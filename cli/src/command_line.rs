//! The command line: every command and its arguments, and the examples and exit codes its
//! help shows.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use keycodec::KeyDigest;

use crate::params;

const EXAMPLES: &str = "\
Examples:
  keycodec inspect prover.pk                 what the file holds, and whether it is intact
  keycodec verify prover.pk --digest 4f1e…   fail unless intact and recording that digest
  keycodec digest prover.pk                  the key digest to pin (KeyOptions::pin)
  keycodec convert prover.pk prover.rkyv --codec rkyv --digest 4f1e…   no circuit code needed
  keycodec verify-proof --vk verifier.vk --params kzg_bn254_20.srs --proof proof.bin \
      --instances instances.json --transcript 0x1b7e…                 no circuit code needed
  keycodec inspect --json prover.pk | jq .k
  keycodec params import kzg_bn254_22.srs params-22.kc   check halo2's file, save a container
  keycodec params downsize params-22.kc params-20.kc --k 20
  keycodec params export params-22.kc kzg_bn254_22.srs --format processed
  keycodec push prover.pk s3://provers/keys/prover.pk --digest 4f1e…
  keycodec pull s3://provers/keys/prover.pk prover.pk --digest 4f1e… --codecs rawbytes
  keycodec params fetch https://example.org/kzg_bn254_22.srs --sha256 5a1c… --k 20
  keycodec fetch --manifest prover.json --cache /var/cache/prover   every artifact, checked
  keycodec verify --manifest prover.json --cache /var/cache/prover  what is there, no request

Object storage (push, pull, params fetch from s3://) is configured from the environment as
the AWS tools are: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT (an
S3-compatible server), AWS_ALLOW_HTTP=true (a plain-HTTP endpoint), AWS_SKIP_SIGNATURE=true (a
public bucket). params fetch also takes https:// and http:// URLs (any server that answers
ranged GETs).

Exit codes:
  0  the file is intact (and records the digest asked for)
  1  it is not: not a container, corrupt, truncated, another digest, another SHA-256, a
     backend not accepted
  2  the command line is wrong
  3  the file could not be read or written
  4  object storage failed (no such object, refused credentials, unreachable)

A container records its key's digest when it is saved (version 2). These commands check the
file's header and payload checksums, which detect corruption; the digest they print is the
one the file records. A load pinned to a digest (KeyOptions::pin) recomputes it from the key
itself, so a forged record is caught there (convert --digest does).";

/// Look at, check and pin keycodec containers (halo2 proving and verifying keys) without
/// the circuit's code.
#[derive(Parser, Debug)]
#[command(name = "keycodec", version, after_help = EXAMPLES)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Print what a container holds (codec, mode, kind, k, circuit fingerprint, sizes, the
    /// recorded key digest) and whether its payload is intact.
    Inspect {
        /// The container file.
        file: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check a container: its header, its length, its payload checksum, and with --digest
    /// that it records that key digest; or, with --manifest, every artifact a prover's
    /// manifest declares, where a start would find it (nothing is fetched). Exits 0 only if
    /// every check passes.
    Verify {
        /// The container file.
        #[arg(required_unless_present = "manifest", conflicts_with = "manifest")]
        file: Option<PathBuf>,
        /// A prover's manifest (docs/manifest.md): check each artifact it declares.
        #[arg(long, value_name = "MANIFEST")]
        manifest: Option<PathBuf>,
        /// The cache directory artifacts at URLs are in [default: ~/.cache/keycodec/artifacts].
        #[arg(long, requires = "manifest")]
        cache: Option<PathBuf>,
        /// The key digest the file must record (64 hex digits).
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print the key digest a container records, after checking the container.
    Digest {
        /// The container file.
        file: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Fetch every artifact a prover's manifest declares at a URL into the cache, each checked
    /// before it is kept (the parameters' pin, each key's container and recorded digest), at
    /// once, with progress per artifact; artifacts at paths are checked where they are. A
    /// warm cache makes no request.
    Fetch {
        /// The manifest (docs/manifest.md).
        #[arg(long, value_name = "MANIFEST")]
        manifest: PathBuf,
        /// The cache directory [default: ~/.cache/keycodec/artifacts].
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Convert a key (proving or verifying) whose container records its circuit to another
    /// backend, with no circuit code: every value is checked on the load, the output is
    /// written atomically, and the key's digest is kept (and printed). Pin the key with
    /// --digest: its record authenticates nothing.
    Convert {
        /// The key's container.
        input: PathBuf,
        /// The container to write.
        output: PathBuf,
        /// The backend to write with: rawbytes, bincode, rkyv or compact.
        #[arg(long)]
        codec: keycodec::Backend,
        /// The key's digest (64 hex digits): another key is refused.
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check a proof with a verifying key whose container records its circuit (a verifying
    /// key's or a proving key's file), its KZG parameters and its instances, no circuit code:
    /// a Blake2b transcript, SHPLONK (halo2-lib's gen_proof) or GWC. Pin the key (--digest
    /// or --transcript): its record authenticates nothing. Exits 0 only if the proof verifies.
    VerifyProof {
        /// The verifying key's (or proving key's) container.
        #[arg(long)]
        vk: PathBuf,
        /// The KZG parameters (a container or halo2's file; larger ones are downsized).
        #[arg(long)]
        params: PathBuf,
        /// The proof: the transcript's bytes.
        #[arg(long)]
        proof: PathBuf,
        /// The instances: JSON, one array of strings per instance column ("0x2a" or "42").
        #[arg(long)]
        instances: Option<PathBuf>,
        /// The verifying key's digest (64 hex digits): another key is refused.
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// The verifying key's transcript_repr (0x and 64 hex digits), as a verifier or a
        /// contract carries it: another key is refused.
        #[arg(long)]
        transcript: Option<String>,
        /// The multi-open scheme: shplonk (halo2-lib's) or gwc.
        #[arg(long, default_value = "shplonk", value_parser = ["shplonk", "gwc"])]
        scheme: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// KZG parameters: inspect, import halo2's files, export them, fetch them by URL, downsize.
    #[command(subcommand)]
    Params(params::ParamsCommand),
    /// Check a container, then upload it to object storage (s3://bucket/path). Nothing
    /// appears at the URL unless the whole upload succeeds.
    Push {
        /// The container file.
        file: PathBuf,
        /// Where to: s3://bucket/path.
        url: String,
        /// The key digest the file must record (64 hex digits).
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Download a container from object storage (s3://bucket/path), check it, and only then
    /// put it at FILE (atomically: a failed pull leaves FILE as it was).
    Pull {
        /// Where from: s3://bucket/path.
        url: String,
        /// The file to write.
        file: PathBuf,
        /// The key digest the object must record (64 hex digits).
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// The backends whose containers to accept, comma-separated (the object's header
        /// names its backend; another is refused before anything else is downloaded)
        /// [default: every backend].
        #[arg(long, value_delimiter = ',')]
        codecs: Vec<keycodec::Backend>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}
