//! The loopback S3 servers the remote rows run against (s3s-fs, installed once, or moto),
//! and publishing a file on one for anyone to download by HTTP.

use std::net::SocketAddr;

use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::Remote;

/// The server the remote rows use, and its name.
pub(super) enum Server {
    /// s3s-fs, file-backed: serves a range of a large object at the cost of that range;
    /// with a second instance, without credentials, on the same files: the public web
    /// server of published parameters.
    S3sFs {
        server: keycodec_tests::s3::S3Server,
        public: keycodec_tests::s3::S3Server,
    },
    /// moto: copies the whole object for every ranged GET, so large keys load slowly from
    /// it through no fault of the loader; serves objects put `public-read` to anyone.
    Moto,
}

impl Server {
    pub(super) fn get(&self) -> &keycodec_tests::s3::S3Server {
        match self {
            Server::S3sFs { server, .. } => server,
            Server::Moto => keycodec_tests::s3::server(),
        }
    }
}

/// Puts files where anyone can download them by HTTP.
pub(super) struct Publisher<'a> {
    pub(super) server: &'a Server,
    pub(super) bucket: &'a str,
    pub(super) remote: &'a Remote,
    /// The address clients reach a server's address by (through the link, if any).
    pub(super) front: &'a dyn Fn(SocketAddr) -> SocketAddr,
}

impl Publisher<'_> {
    /// Publishes `file` as `name`; returns its URL.
    pub(super) fn publish(&self, file: &std::path::Path, name: &str) -> Result<String, String> {
        use keycodec_tests::s3::S3Server;
        match self.server {
            Server::S3sFs { public, .. } => {
                let open = std::fs::File::open(file).map_err(|e| e.to_string())?;
                self.remote
                    .upload_file(&open, file, &ObjectPath::from(name), &|_| {})
                    .map_err(|e| e.to_string())?;
                Ok(S3Server::public_url(
                    (self.front)(public.addr),
                    self.bucket,
                    name,
                ))
            }
            Server::Moto => {
                let server = self.server.get();
                let bytes = std::fs::read(file).map_err(|e| e.to_string())?;
                server.put_public(self.bucket, name, &bytes);
                Ok(S3Server::public_url(
                    (self.front)(server.addr),
                    self.bucket,
                    name,
                ))
            }
        }
    }
}

/// s3s-fs if it is on the `PATH` or in the harness's tools folder, installed there (from
/// crates.io, once: a few minutes) if not; moto if that fails.
pub(super) fn server(scratch: &std::path::Path) -> Result<(Server, &'static str), String> {
    let tools = scratch.join("../tools");
    let installed = tools.join("bin").join("s3s-fs");
    let on_path = std::process::Command::new("s3s-fs")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    let binary = if on_path {
        Some(std::path::PathBuf::from("s3s-fs"))
    } else if installed.exists() {
        Some(installed.clone())
    } else {
        let spinner = crate::fixture::spinner(
            "installing s3s-fs, the loopback S3 server, from crates.io (once; a few minutes)"
                .into(),
        );
        let status = std::process::Command::new("cargo")
            .args([
                "install",
                "--locked",
                "--quiet",
                "s3s-fs@0.14.1",
                "--features",
                "binary",
                "--root",
            ])
            .arg(&tools)
            .status();
        spinner.finish_and_clear();
        status
            .is_ok_and(|status| status.success())
            .then_some(installed)
    };
    let root = scratch.join("s3s-fs-root");
    let _ = std::fs::remove_dir_all(&root);
    Ok(match binary {
        Some(binary) => (
            Server::S3sFs {
                server: keycodec_tests::s3::S3Server::start_s3s_fs(&binary, &root),
                public: keycodec_tests::s3::S3Server::start_s3s_fs_public(&binary, &root),
            },
            "s3s-fs",
        ),
        None => {
            eprintln!("warning: s3s-fs could not be installed; the remote rows use moto");
            (Server::Moto, "moto")
        }
    })
}
