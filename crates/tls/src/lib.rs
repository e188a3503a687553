//! TLS key material for rustls, shared by both ends of Sluice's TLS: the server (its SSL
//! listeners and the inter-broker client, `crates/server/src/tls.rs`) and the metadata
//! crate (its etcd client, `crates/meta/src/etcd.rs`).
//!
//! Owns: reading certificates and private keys in PEM, from a file or inline text
//! ([`sluice_config::Pem`]), into rustls's types, and a set of trust roots from
//! certificates; every error is a sentence for the operator naming the file.
//! Does not own: which settings ask for TLS (sluice-config), handshakes and sockets (the
//! server, and the etcd client), PKCS12 stores (the server's `pkcs12.rs`: Kafka keystores
//! are a listener's concern; etcd's certificates are PEM files).

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sluice_config::Pem;

fn pem_text(pem: &Pem) -> Result<Vec<u8>, String> {
    match pem {
        Pem::File(path) => {
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        }
        // Kafka's inline PEM values are often written on one line in a properties file.
        Pem::Inline(text) => Ok(text.replace("\\n", "\n").into_bytes()),
    }
}

/// Where the PEM text comes from, for a message: the file's path, or "the inline PEM".
pub fn describe(pem: &Pem) -> String {
    match pem {
        Pem::File(path) => path.display().to_string(),
        Pem::Inline(_) => "the inline PEM".into(),
    }
}

/// Every certificate in the PEM text, in order (none is an empty list, not an error).
pub fn certificates(pem: &Pem) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = pem_text(pem)?;
    CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot read the certificates of {}: {e}", describe(pem)))
}

/// The first private key in the PEM text (PKCS#8, PKCS#1 or SEC1), unencrypted.
pub fn private_key(pem: &Pem) -> Result<PrivateKeyDer<'static>, String> {
    let text = pem_text(pem)?;
    if text
        .windows(b"ENCRYPTED PRIVATE KEY".len())
        .any(|w| w == b"ENCRYPTED PRIVATE KEY")
    {
        return Err(format!(
            "the private key in {} is encrypted, which Sluice does not read; store it unencrypted (openssl pkcs8 -topk8 -nocrypt) and protect the file",
            describe(pem)
        ));
    }
    PrivateKeyDer::from_pem_slice(&text)
        .map_err(|e| format!("cannot read a private key from {}: {e}", describe(pem)))
}

/// Trust roots made of `certs`, at least one.
pub fn roots(certs: Vec<CertificateDer<'static>>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("a truststore certificate is not usable: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the truststore holds no certificate".into());
    }
    Ok(roots)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // Base64 that decodes (to zeros): enough for the PEM layer, which does not parse DER.
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    #[test]
    fn reads_inline_pem_written_on_one_line() {
        let one_line = format!("{KEY}{CERT}{CERT}").replace('\n', "\\n");
        let pem = Pem::Inline(one_line);
        assert_eq!(certificates(&pem).unwrap().len(), 2);
        assert!(private_key(&pem).is_ok());
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Pem::File(dir.path().join("missing.pem"));
        let e = certificates(&missing).unwrap_err();
        assert!(
            e.contains("cannot read") && e.contains("missing.pem"),
            "{e}"
        );

        let path = dir.path().join("encrypted.pem");
        std::fs::write(
            &path,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = private_key(&Pem::File(path)).unwrap_err();
        assert!(
            e.contains("encrypted") && e.contains("encrypted.pem"),
            "{e}"
        );

        let path = dir.path().join("certs-only.pem");
        std::fs::write(&path, CERT).unwrap();
        let e = private_key(&Pem::File(path)).unwrap_err();
        assert!(e.contains("certs-only.pem"), "{e}");
    }

    #[test]
    fn roots_refuse_nothing_and_garbage() {
        assert!(roots(Vec::new()).unwrap_err().contains("no certificate"));
        let garbage = certificates(&Pem::Inline(CERT.into())).unwrap();
        assert!(roots(garbage).unwrap_err().contains("not usable"));
    }
}
