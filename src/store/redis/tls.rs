//! TLS options of a `rediss://` store: the CA to trust (PEM; default: the system's roots), a
//! client certificate and key for `tls-auth-clients`, and `reject_unauthorized: false` to skip
//! the server's certificate check (its handshake signatures are still verified). Error messages
//! name the option, never its content: a key must not reach a log.

use crate::error::{Error, Result};
use fred::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use fred::rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use fred::rustls::pki_types::pem::PemObject;
use fred::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use fred::rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct TlsOptions {
  /// PEM certificates of the CAs to trust instead of the system's.
  pub ca: Option<String>,
  /// PEM certificate chain of this client (with `key`).
  pub cert: Option<String>,
  /// PEM private key of this client (with `cert`).
  pub key: Option<String>,
  /// Check the server's certificate (default true).
  pub reject_unauthorized: bool,
}

impl std::fmt::Debug for TlsOptions {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    // never the key
    f.debug_struct("TlsOptions")
      .field("ca", &self.ca.is_some())
      .field("cert", &self.cert.is_some())
      .field("key", &self.key.as_ref().map(|_| "***"))
      .field("reject_unauthorized", &self.reject_unauthorized)
      .finish()
  }
}

fn certificates(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>> {
  let certs: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
    .collect::<std::result::Result<_, _>>()
    .map_err(|_| Error::config(format!("tls.{what} is not valid PEM")))?;
  if certs.is_empty() {
    return Err(Error::config(format!("tls.{what} holds no PEM certificate")));
  }
  Ok(certs)
}

fn provider() -> Arc<CryptoProvider> {
  CryptoProvider::get_default().cloned().unwrap_or_else(|| Arc::new(fred::rustls::crypto::ring::default_provider()))
}

/// The rustls configuration for `o`.
pub fn client_config(o: &TlsOptions) -> Result<ClientConfig> {
  let provider = provider();
  let builder = ClientConfig::builder_with_provider(provider.clone())
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::config(format!("tls: {e}")))?;
  let builder = if !o.reject_unauthorized {
    builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
  } else {
    let mut roots = RootCertStore::empty();
    match &o.ca {
      Some(pem) => {
        for cert in certificates(pem, "ca")? {
          roots.add(cert).map_err(|_| Error::config("tls.ca holds a certificate that is not a valid CA"))?;
        }
      }
      None => {
        for cert in fred::rustls_native_certs::load_native_certs().certs {
          let _ = roots.add(cert);
        }
      }
    }
    builder.with_root_certificates(roots)
  };
  match (&o.cert, &o.key) {
    (None, None) => Ok(builder.with_no_client_auth()),
    (Some(cert), Some(key)) => {
      let chain = certificates(cert, "cert")?;
      let key =
        PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|_| Error::config("tls.key is not a PEM private key"))?;
      builder
        .with_client_auth_cert(chain, key)
        .map_err(|_| Error::config("tls.cert and tls.key do not make a usable client certificate"))
    }
    _ => Err(Error::config("tls.cert and tls.key go together")),
  }
}

/// `rejectUnauthorized: false`: any server certificate is accepted; the handshake's signatures
/// are still checked against it.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
  fn verify_server_cert(
    &self,
    _end_entity: &CertificateDer<'_>,
    _intermediates: &[CertificateDer<'_>],
    _server_name: &ServerName<'_>,
    _ocsp_response: &[u8],
    _now: UnixTime,
  ) -> std::result::Result<ServerCertVerified, fred::rustls::Error> {
    Ok(ServerCertVerified::assertion())
  }

  fn verify_tls12_signature(
    &self,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
  ) -> std::result::Result<HandshakeSignatureValid, fred::rustls::Error> {
    verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
  }

  fn verify_tls13_signature(
    &self,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
  ) -> std::result::Result<HandshakeSignatureValid, fred::rustls::Error> {
    verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
  }

  fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
    self.0.signature_verification_algorithms.supported_schemes()
  }
}
