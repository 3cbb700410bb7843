//! How connections to the database are made: plain TCP, or TLS with rustls (the `ring`
//! provider, as the rest of keel).
//!
//! The URL's `sslmode` decides (tokio-postgres itself knows only disable, prefer and
//! require, so keel reads `verify-ca`, `verify-full` and `sslrootcert` itself):
//! - absent, `disable`, `prefer`: plain TCP (keel does not try TLS opportunistically);
//! - `require`, `verify-ca`: TLS, the server's certificate chain verified against the
//!   roots (keel never accepts an unverified certificate), not its name;
//! - `verify-full`: TLS, chain and host name verified.
//!
//! Roots: the system's (`SSL_CERT_FILE`/`SSL_CERT_DIR` or the platform store) plus the
//! PEM file of `sslrootcert=PATH` in the URL or `KEEL_STORE_CA`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use keel_session::{SessionError, SessionErrorKind};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, Config, Connection, Socket};

/// What the URL asks of the connection's security.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Plain TCP.
    Plain,
    /// TLS; the certificate chain verified, not the host name.
    VerifyChain,
    /// TLS; chain and host name verified.
    VerifyFull,
}

/// A URL with keel's own TLS settings taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    /// The URL for tokio-postgres (`sslmode=require` for any TLS mode).
    pub url: String,
    pub mode: Mode,
    /// `sslrootcert`, when given.
    pub root_cert: Option<String>,
}

fn invalid(message: String) -> SessionError {
    SessionError::new(SessionErrorKind::Invalid, message)
}

/// `%XX` decoded (query values of a URL).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Takes `sslmode` and `sslrootcert` out of a `postgres://` URL's query. Other forms
/// (`host=… dbname=…`) go to tokio-postgres as they are.
pub(crate) fn split_url(url: &str) -> Result<Split, SessionError> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let Some((base, query)) = url.split_once('?').filter(|_| is_url) else {
        return Ok(Split { url: url.to_owned(), mode: Mode::Plain, root_cert: None });
    };
    let (mut mode, mut root_cert, mut kept) = (Mode::Plain, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                mode = match percent_decode(value).as_str() {
                    "disable" | "prefer" | "allow" => Mode::Plain,
                    "require" | "verify-ca" => Mode::VerifyChain,
                    "verify-full" => Mode::VerifyFull,
                    other => {
                        return Err(invalid(format!(
                            "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
                        )));
                    }
                };
            }
            "sslrootcert" => root_cert = Some(percent_decode(value)),
            _ => kept.push(pair),
        }
    }
    let ssl = match mode {
        Mode::Plain => "sslmode=disable",
        Mode::VerifyChain | Mode::VerifyFull => "sslmode=require",
    };
    kept.push(ssl);
    Ok(Split { url: format!("{base}?{}", kept.join("&")), mode, root_cert })
}

/// Connection security settings of a store.
#[derive(Clone, Default)]
pub(crate) struct Tls {
    /// `None`: plain TCP.
    config: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("tls", &self.config.is_some()).finish()
    }
}

impl Tls {
    /// The settings `mode` asks for, with roots from the system and `ca_file` (PEM).
    pub(crate) fn new(mode: Mode, ca_file: Option<&str>) -> Result<Tls, SessionError> {
        if mode == Mode::Plain {
            return Ok(Tls::default());
        }
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        let (added, _ignored) = roots.add_parsable_certificates(native.certs);
        if let Some(path) = ca_file {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect())
                .map_err(|e| invalid(format!("the database CA file {path}: {e}")))?;
            if certs.is_empty() {
                return Err(invalid(format!("the database CA file {path} holds no certificate")));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| invalid(format!("the database CA file {path}: {e}")))?;
            }
        } else if added == 0 {
            return Err(invalid(
                "TLS to the database needs root certificates: none found on the system; give a CA file (sslrootcert=PATH or KEEL_STORE_CA)"
                    .into(),
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(roots);
        let webpki =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
                .build()
                .map_err(|e| invalid(format!("TLS roots: {e}")))?;
        let verifier: Arc<dyn ServerCertVerifier> = match mode {
            Mode::VerifyChain => Arc::new(ChainOnly(webpki)),
            Mode::VerifyFull | Mode::Plain => webpki,
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Tls { config: Some(Arc::new(config)) })
    }

    /// Whether connections use TLS.
    pub(crate) fn enabled(&self) -> bool {
        self.config.is_some()
    }

    /// Opens a connection and runs it on the current runtime until it ends.
    pub(crate) async fn connect(&self, config: &Config) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.connect_raw(config).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    /// Opens a connection; the caller drives it (to read notices).
    pub(crate) async fn connect_raw(
        &self,
        config: &Config,
    ) -> Result<(Client, Connection<Socket, Stream>), tokio_postgres::Error> {
        config.connect(self.clone()).await
    }
}

/// Verifies the chain; a certificate for another name is accepted (`verify-ca`).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl MakeTlsConnect<Socket> for Tls {
    type Stream = Stream;
    type TlsConnect = Connector;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Connector, io::Error> {
        Ok(Connector { config: self.config.clone(), domain: domain.to_owned() })
    }
}

/// One connection's TLS handshake.
pub(crate) struct Connector {
    config: Option<Arc<rustls::ClientConfig>>,
    domain: String,
}

impl TlsConnect<Socket> for Connector {
    type Stream = Stream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Stream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let Some(config) = self.config else {
                return Err(io::Error::other("TLS is not configured (sslmode=disable)"));
            };
            let name = ServerName::try_from(self.domain.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: {e}", self.domain)))?;
            let tls = tokio_rustls::TlsConnector::from(config).connect(name, stream).await?;
            Ok(Stream(Box::new(tls)))
        })
    }
}

/// A TLS stream to the database.
pub(crate) struct Stream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl tokio_postgres::tls::TlsStream for Stream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Split {
        split_url(url).unwrap()
    }

    #[test]
    fn sslmode_and_rootcert_are_read_and_taken_out() {
        assert_eq!(
            split("postgres://keel@db:5432/keel"),
            Split { url: "postgres://keel@db:5432/keel".into(), mode: Mode::Plain, root_cert: None }
        );
        assert_eq!(
            split(
                "postgres://keel@db/keel?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"
            ),
            Split {
                url: "postgres://keel@db/keel?application_name=x&sslmode=require".into(),
                mode: Mode::VerifyFull,
                root_cert: Some("/etc/ca.pem".into()),
            }
        );
        assert_eq!(
            split("postgresql://db/keel?sslmode=require"),
            Split {
                url: "postgresql://db/keel?sslmode=require".into(),
                mode: Mode::VerifyChain,
                root_cert: None
            }
        );
        assert_eq!(
            split("postgres://db/keel?sslmode=verify-ca"),
            Split {
                url: "postgres://db/keel?sslmode=require".into(),
                mode: Mode::VerifyChain,
                root_cert: None
            }
        );
        assert_eq!(
            split("postgres://db/keel?sslmode=prefer"),
            Split { url: "postgres://db/keel?sslmode=disable".into(), mode: Mode::Plain, root_cert: None }
        );
        assert_eq!(
            split("host=db dbname=keel sslmode=disable"),
            Split { url: "host=db dbname=keel sslmode=disable".into(), mode: Mode::Plain, root_cert: None }
        );
    }

    #[test]
    fn an_unknown_sslmode_is_refused() {
        let err = split_url("postgres://db/keel?sslmode=maybe").unwrap_err();
        assert_eq!(
            (err.kind, err.message),
            (
                SessionErrorKind::Invalid,
                "sslmode=maybe is not one of disable, prefer, require, verify-ca, verify-full".to_owned()
            )
        );
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_an_error() {
        let err = Tls::new(Mode::VerifyFull, Some("/nonexistent/ca.pem")).unwrap_err();
        assert_eq!(err.kind, SessionErrorKind::Invalid);
        assert!(err.message.starts_with("the database CA file /nonexistent/ca.pem: "), "{err}");
        let dir = std::env::temp_dir().join(format!("keel-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let err = Tls::new(Mode::VerifyChain, empty.to_str()).unwrap_err();
        assert_eq!(
            (err.kind, err.message),
            (
                SessionErrorKind::Invalid,
                format!("the database CA file {} holds no certificate", empty.display())
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn plain_needs_no_roots() {
        assert!(!Tls::new(Mode::Plain, None).unwrap().enabled());
    }
}
