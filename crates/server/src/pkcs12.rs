//! PKCS12 keystores and truststores (`ssl.keystore.type=PKCS12`), as `openssl pkcs12 -export`
//! and Java's `keytool` write them: the integrity check (HMAC with SHA-1 or SHA-2 under the
//! PKCS12 key derivation), certificates and private keys in plain or password-encrypted bags,
//! PBES2 (PBKDF2 with AES-CBC: OpenSSL 3's and Java 17's default) and the legacy PKCS12 schemes
//! (SHA-1 with 3DES, or RC2: OpenSSL 1.1's and Java 8's). The RustCrypto crates read the ASN.1
//! and decrypt; this module decides what the store holds. Public-key-encrypted stores (RFC
//! 7292's EnvelopedData) and PBMAC1 are not read.

use der::asn1::OctetString;
use der::{Decode, Encode};
use hmac::Mac;
use pkcs12::kdf::{derive_key_utf8, Pkcs12KeyType};
use pkcs12::pfx::Pfx;
use pkcs12::safe_bag::SafeContents;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use spki::AlgorithmIdentifierOwned;

/// What a PKCS12 store holds: its certificates (the private key's own first, when it has one)
/// and its first private key.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) certificates: Vec<CertificateDer<'static>>,
    pub(crate) key: Option<PrivateKeyDer<'static>>,
}

const ID_DATA: &str = "1.2.840.113549.1.7.1";
const ID_ENCRYPTED_DATA: &str = "1.2.840.113549.1.7.6";
const X509_CERTIFICATE: &str = "1.2.840.113549.1.9.22.1";
const LOCAL_KEY_ID: &str = "1.2.840.113549.1.9.21";
const PBES2: &str = "1.2.840.113549.1.5.13";
const PBE_SHA1_3DES: &str = "1.2.840.113549.1.12.1.3";
const PBE_SHA1_RC2_128: &str = "1.2.840.113549.1.12.1.5";
const PBE_SHA1_RC2_40: &str = "1.2.840.113549.1.12.1.6";
const SHA1: &str = "1.3.14.3.2.26";
const SHA256: &str = "2.16.840.1.101.3.4.2.1";
const SHA384: &str = "2.16.840.1.101.3.4.2.2";
const SHA512: &str = "2.16.840.1.101.3.4.2.3";

/// Why a store could not be read; `Display` is the end of a sentence naming the file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pkcs12Error {
    /// Not DER, not a PFX, or a part of it is not what RFC 7292 says.
    Malformed(String),
    /// The integrity check failed, or a bag did not decrypt: the password is wrong.
    WrongPassword,
    /// An algorithm this module does not read.
    Unsupported(String),
}

impl std::fmt::Display for Pkcs12Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pkcs12Error::Malformed(what) => write!(f, "is not a PKCS12 store Sluice can read ({what})"),
            Pkcs12Error::WrongPassword => write!(f, "does not open with the password given (its integrity check or decryption failed)"),
            Pkcs12Error::Unsupported(what) => write!(f, "uses {what}, which Sluice does not read; export it again with openssl pkcs12 -export (AES-256-CBC, the default of OpenSSL 3) or keytool (Java 17+)"),
        }
    }
}

fn malformed(what: &str) -> impl Fn(der::Error) -> Pkcs12Error + '_ {
    move |e| Pkcs12Error::Malformed(format!("{what}: {e}"))
}

/// Read the store `bytes` with `password` (empty: none given; a store with an integrity check
/// then opens only if nothing in it is encrypted, as Java's `KeyStore.load` with no password);
/// its private key is decrypted with `key_password` when given (`ssl.key.password`), else with
/// `password`.
pub(crate) fn read(
    bytes: &[u8],
    password: &str,
    key_password: Option<&str>,
) -> Result<Store, Pkcs12Error> {
    let pfx = Pfx::from_der(bytes).map_err(malformed("the outer PFX"))?;
    if pfx.auth_safe.content_type.to_string() != ID_DATA {
        return Err(Pkcs12Error::Unsupported(format!(
            "public-key integrity ({})",
            pfx.auth_safe.content_type
        )));
    }
    let data = pfx
        .auth_safe
        .content
        .decode_as::<OctetString>()
        .map_err(malformed("the authenticated safe"))?;
    let data = data.as_bytes();
    if let Some(mac) = &pfx.mac_data {
        if !password.is_empty() {
            check_mac(mac, data, password)?;
        }
    }
    let safes = Vec::<cms::content_info::ContentInfo>::from_der(data)
        .map_err(malformed("the authenticated safe"))?;
    let mut certs: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    let mut keys: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for safe in safes {
        let contents = match safe.content_type.to_string().as_str() {
            ID_DATA => safe
                .content
                .decode_as::<OctetString>()
                .map_err(malformed("a safe"))?
                .into_bytes(),
            ID_ENCRYPTED_DATA => {
                let encrypted = safe
                    .content
                    .decode_as::<cms::encrypted_data::EncryptedData>()
                    .map_err(malformed("an encrypted safe"))?;
                let info = encrypted.enc_content_info;
                let Some(ciphertext) = info.encrypted_content else {
                    continue;
                };
                decrypt(&info.content_enc_alg, ciphertext.as_bytes(), password)?
            }
            other => {
                return Err(Pkcs12Error::Unsupported(format!(
                    "a safe of content type {other} (public-key encryption)"
                )))
            }
        };
        let bags = SafeContents::from_der(&contents).map_err(malformed("the bags of a safe"))?;
        for bag in bags {
            let key_id = bag.bag_attributes.as_ref().and_then(|attrs| {
                attrs
                    .iter()
                    .find(|a| a.oid.to_string() == LOCAL_KEY_ID)
                    .and_then(|a| a.values.get(0))
                    .map(|v| v.value().to_vec())
            });
            // The bag's value is [0] EXPLICIT: its one inner element.
            let value = der::asn1::ContextSpecific::<der::Any>::from_der(&bag.bag_value)
                .map_err(malformed("a bag"))?
                .value
                .to_der()
                .map_err(malformed("a bag"))?;
            match bag.bag_id {
                pkcs12::PKCS_12_CERT_BAG_OID => {
                    let cert = pkcs12::cert_type::CertBag::from_der(&value)
                        .map_err(malformed("a certificate bag"))?;
                    if cert.cert_id.to_string() == X509_CERTIFICATE {
                        certs.push((cert.cert_value.into_bytes(), key_id));
                    }
                }
                pkcs12::PKCS_12_KEY_BAG_OID => keys.push((value, key_id)),
                pkcs12::PKCS_12_PKCS8_KEY_BAG_OID => {
                    let shrouded = pkcs12::pbe_params::EncryptedPrivateKeyInfo::from_der(&value)
                        .map_err(malformed("a private key bag"))?;
                    let key = decrypt(
                        &shrouded.encryption_algorithm,
                        shrouded.encrypted_data.as_bytes(),
                        key_password.unwrap_or(password),
                    )?;
                    keys.push((key, key_id));
                }
                // CRLs, secrets and nested safes: nothing a TLS listener uses.
                _ => {}
            }
        }
    }
    // The key's own certificate first (rustls takes the chain leaf first): the one with its
    // localKeyId, else the first.
    let key = keys.into_iter().next();
    if let Some((_, Some(id))) = &key {
        if let Some(at) = certs.iter().position(|(_, cid)| cid.as_ref() == Some(id)) {
            let own = certs.remove(at);
            certs.insert(0, own);
        }
    }
    Ok(Store {
        certificates: certs
            .into_iter()
            .map(|(der, _)| CertificateDer::from(der))
            .collect(),
        key: key.map(|(der, _)| PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der))),
    })
}

/// RFC 7292's integrity check: an HMAC of the authenticated safe under a key derived from the
/// password with the PKCS12 key derivation, of the hash the MAC names.
fn check_mac(
    mac: &pkcs12::mac_data::MacData,
    data: &[u8],
    password: &str,
) -> Result<(), Pkcs12Error> {
    let salt = mac.mac_salt.as_bytes();
    let rounds = mac.iterations;
    let expected = mac.mac.digest.as_bytes();
    let algorithm = mac.mac.algorithm.oid.to_string();
    fn verify<D>(
        password: &str,
        salt: &[u8],
        rounds: i32,
        data: &[u8],
        expected: &[u8],
    ) -> Result<bool, Pkcs12Error>
    where
        D: digest::Digest + digest::FixedOutputReset + digest::core_api::BlockSizeUser,
    {
        let key = derive_key_utf8::<D>(
            password,
            salt,
            Pkcs12KeyType::Mac,
            rounds,
            <D as digest::Digest>::output_size(),
        )
        .map_err(|e| Pkcs12Error::Malformed(format!("the password: {e}")))?;
        let mut mac = hmac::SimpleHmac::<D>::new_from_slice(&key)
            .map_err(|e| Pkcs12Error::Malformed(format!("the MAC key: {e}")))?;
        mac.update(data);
        Ok(mac.verify_slice(expected).is_ok())
    }
    let ok = match algorithm.as_str() {
        SHA1 => verify::<sha1::Sha1>(password, salt, rounds, data, expected)?,
        SHA256 => verify::<sha2::Sha256>(password, salt, rounds, data, expected)?,
        SHA384 => verify::<sha2::Sha384>(password, salt, rounds, data, expected)?,
        SHA512 => verify::<sha2::Sha512>(password, salt, rounds, data, expected)?,
        other => {
            return Err(Pkcs12Error::Unsupported(format!(
                "an integrity check with {other}"
            )))
        }
    };
    if ok {
        Ok(())
    } else {
        Err(Pkcs12Error::WrongPassword)
    }
}

/// Decrypt a bag or safe encrypted under `alg` with `password`.
fn decrypt(
    alg: &AlgorithmIdentifierOwned,
    ciphertext: &[u8],
    password: &str,
) -> Result<Vec<u8>, Pkcs12Error> {
    use cbc::cipher::{block_padding::Pkcs7, BlockDecryptMut, InnerIvInit, KeyIvInit};
    let oid = alg.oid.to_string();
    let legacy = |key_len: usize| -> Result<(Vec<u8>, Vec<u8>), Pkcs12Error> {
        let params = alg
            .parameters
            .as_ref()
            .ok_or_else(|| Pkcs12Error::Malformed("encryption parameters missing".into()))?
            .decode_as::<pkcs12::pbe_params::Pkcs12PbeParams>()
            .map_err(malformed("the encryption parameters"))?;
        let derive = |id, len| {
            derive_key_utf8::<sha1::Sha1>(
                password,
                params.salt.as_bytes(),
                id,
                params.iterations,
                len,
            )
            .map_err(|e| Pkcs12Error::Malformed(format!("the password: {e}")))
        };
        Ok((
            derive(Pkcs12KeyType::EncryptionKey, key_len)?,
            derive(Pkcs12KeyType::Iv, 8)?,
        ))
    };
    let wrong = |_| Pkcs12Error::WrongPassword;
    match oid.as_str() {
        PBES2 => {
            let der = alg
                .to_der()
                .map_err(malformed("the encryption parameters"))?;
            let scheme = pkcs5::EncryptionScheme::try_from(der.as_slice())
                .map_err(|e| Pkcs12Error::Unsupported(format!("the PBES2 parameters ({e})")))?;
            scheme
                .decrypt(password.as_bytes(), ciphertext)
                .map_err(|e| match e {
                    pkcs5::Error::DecryptFailed => Pkcs12Error::WrongPassword,
                    other => {
                        Pkcs12Error::Unsupported(format!("PBES2 as this store has it ({other})"))
                    }
                })
        }
        PBE_SHA1_3DES => {
            let (key, iv) = legacy(24)?;
            cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
                .map_err(|e| Pkcs12Error::Malformed(format!("3DES key: {e}")))?
                .decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
                .map_err(wrong)
        }
        PBE_SHA1_RC2_40 | PBE_SHA1_RC2_128 => {
            let bits = if oid == PBE_SHA1_RC2_40 { 40 } else { 128 };
            let (key, iv) = legacy(bits / 8)?;
            let cipher = rc2::Rc2::new_with_eff_key_len(&key, bits);
            let iv = cbc::cipher::generic_array::GenericArray::from_slice(&iv);
            cbc::Decryptor::<rc2::Rc2>::inner_iv_init(cipher, iv)
                .decrypt_padded_vec_mut::<Pkcs7>(ciphertext)
                .map_err(wrong)
        }
        other => Err(Pkcs12Error::Unsupported(format!("the encryption {other}"))),
    }
}
