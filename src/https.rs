//! HTTPS for LAN mode: browsers grant `getUserMedia` only in a secure context, which plain HTTP
//! is on loopback and nowhere else, so a phone or a second laptop needs TLS to get a microphone.
//!
//! The certificate is the user's own (`--tls-cert`/`--tls-key`, PEM) or a self-signed one made
//! on first use and kept in a cache directory. Keeping it matters: a browser remembers "accept
//! this certificate" per certificate, so a phone that accepted it once keeps working across
//! restarts. It is made anew only when it no longer names every address the user may type.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::Context;
use axum::Router;
use axum_server::tls_rustls::RustlsConfig;

use crate::http_server::{HttpLimits, HttpServer};

/// Where the HTTPS listener's certificate comes from.
#[derive(Debug, Clone)]
pub enum CertSource {
    /// PEM files the user provides (a certificate chain, and its private key).
    Files { cert: PathBuf, key: PathBuf },
    /// Self-signed for `names` (host names and IP addresses), cached in `cache_dir`.
    SelfSigned {
        cache_dir: PathBuf,
        names: Vec<String>,
    },
}

/// A certificate and key in PEM, and what the startup banner says about them.
pub struct CertPem {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub origin: String,
}

const CERT_FILE: &str = "lan-cert.pem";
const KEY_FILE: &str = "lan-key.pem";
/// The names the cached certificate was made for, one per line: reading them back is simpler
/// than parsing the certificate's SAN extension, and the files are only ever written together.
const NAMES_FILE: &str = "lan-cert.names";

impl CertSource {
    pub fn load(&self) -> anyhow::Result<CertPem> {
        match self {
            CertSource::Files { cert, key } => Ok(CertPem {
                cert: std::fs::read(cert)
                    .with_context(|| format!("reading --tls-cert {}", cert.display()))?,
                key: std::fs::read(key)
                    .with_context(|| format!("reading --tls-key {}", key.display()))?,
                origin: format!("certificate {}", cert.display()),
            }),
            CertSource::SelfSigned { cache_dir, names } => self_signed(cache_dir, names),
        }
    }
}

fn self_signed(dir: &Path, names: &[String]) -> anyhow::Result<CertPem> {
    let (cert_path, key_path, names_path) = (
        dir.join(CERT_FILE),
        dir.join(KEY_FILE),
        dir.join(NAMES_FILE),
    );
    if let (Ok(cert), Ok(key), Ok(cached)) = (
        std::fs::read(&cert_path),
        std::fs::read(&key_path),
        std::fs::read_to_string(&names_path),
    ) {
        let cached: Vec<&str> = cached.lines().collect();
        if names.iter().all(|n| cached.contains(&n.as_str())) {
            return Ok(CertPem {
                cert,
                key,
                origin: format!("self-signed certificate {}", cert_path.display()),
            });
        }
    }
    let made = rcgen::generate_simple_self_signed(names.to_vec())
        .context("generating a self-signed certificate")?;
    let (cert, key) = (made.cert.pem(), made.signing_key.serialize_pem());
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_private(&key_path, key.as_bytes())?;
    std::fs::write(&cert_path, &cert)
        .with_context(|| format!("writing {}", cert_path.display()))?;
    std::fs::write(&names_path, names.join("\n"))
        .with_context(|| format!("writing {}", names_path.display()))?;
    Ok(CertPem {
        cert: cert.into_bytes(),
        key: key.into_bytes(),
        origin: format!("new self-signed certificate {}", cert_path.display()),
    })
}

/// The key file is readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(bytes)?;
    Ok(())
}

/// The names a self-signed certificate should carry: what a user may type to reach this
/// machine (`localhost`, loopback, each address in `ips`, the host name).
pub fn names_for(ips: &[IpAddr]) -> Vec<String> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    for ip in ips {
        let s = ip.to_string();
        if !names.contains(&s) {
            names.push(s);
        }
    }
    if let Some(h) = hostname()
        && !names.contains(&h)
    {
        names.push(h);
    }
    names
}

fn hostname() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim();
    (!h.is_empty()).then(|| h.to_owned())
}

/// `$XDG_CACHE_HOME/voice-edge`, else `~/.cache/voice-edge`, else a directory under /tmp.
pub fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("voice-edge")
}

/// An HTTPS listener serving `router`, already bound so its address is known and a bind error
/// surfaces at startup; served within [`HttpLimits`] like every other listener.
pub struct HttpsServer {
    pub addr: SocketAddr,
    server: HttpServer,
}

impl HttpsServer {
    pub async fn start(
        addr: SocketAddr,
        pem: CertPem,
        router: Router,
        limits: HttpLimits,
    ) -> anyhow::Result<Self> {
        // axum-server's loader only turns the PEM into a rustls config; serving is ours.
        let config = RustlsConfig::from_pem(pem.cert, pem.key)
            .await
            .context("loading the TLS certificate and key (PEM)")?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding HTTPS on {addr}"))?;
        let server = HttpServer::spawn(listener, router, limits, Some(config.get_inner()))?;
        Ok(HttpsServer {
            addr: server.addr,
            server,
        })
    }

    /// Stops accepting; requests in flight get a moment to finish.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "voice-edge-https-{tag}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_self_signed_certificate_is_kept_until_it_misses_a_name() {
        let dir = temp_dir("cache");
        let src = |names: &[&str]| CertSource::SelfSigned {
            cache_dir: dir.clone(),
            names: names.iter().map(|s| s.to_string()).collect(),
        };
        let first = src(&["localhost", "192.168.1.23"]).load().unwrap();
        assert!(first.origin.starts_with("new "));
        let again = src(&["192.168.1.23"]).load().unwrap();
        assert_eq!(
            again.cert, first.cert,
            "same names: the cached one is reused"
        );
        let moved = src(&["localhost", "10.0.0.7"]).load().unwrap();
        assert_ne!(
            moved.cert, first.cert,
            "a new LAN address needs a new certificate"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the key is private: {mode:o}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn user_files_that_are_missing_are_a_clear_error() {
        let err = CertSource::Files {
            cert: "/nonexistent/cert.pem".into(),
            key: "/nonexistent/key.pem".into(),
        }
        .load()
        .err()
        .unwrap();
        assert!(format!("{err:#}").contains("--tls-cert /nonexistent/cert.pem"));
    }

    #[test]
    fn names_cover_loopback_and_every_given_address() {
        let n = names_for(&[
            "192.168.1.23".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
        ]);
        assert!(n.contains(&"localhost".to_owned()));
        assert!(n.contains(&"192.168.1.23".to_owned()));
        assert_eq!(n.iter().filter(|s| *s == "127.0.0.1").count(), 1);
    }
}
