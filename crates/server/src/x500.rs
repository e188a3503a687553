//! A client certificate's subject as Java prints an `X500Principal` (`getName()`, RFC 2253):
//! what Kafka's `ssl.principal.mapping.rules` are written against, so Sluice must print it
//! character for character as Java does.
//!
//! Java's form: the RDNs last to first, joined by `,`; the attributes of a multi-valued RDN
//! joined by `+` in their encoded order; an attribute as `KEYWORD=value` for RFC 2253's
//! keywords (CN, C, L, ST, O, OU, STREET, DC, UID), else the dotted OID and `#` with the hex of
//! the value's DER encoding (so `emailAddress` is `1.2.840.113549.1.9.1=#16...`); a value of a
//! type that is not a string is `#` and hex too. In a string value `, = + < > # ; " \` get a
//! `\` before them, NUL is `\00`, and spaces (and CRs) at either end get a `\` each; anything
//! else, non-ASCII included, is printed as it is.

use der::{Decode, Encode, Tag, Tagged};

/// RFC 2253's keywords, by OID (Java's `AVAKeyword` entries marked RFC 2253 compliant).
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

fn parse(cert: &[u8]) -> Result<x509_cert::Certificate, String> {
    x509_cert::Certificate::from_der(cert).map_err(|e| format!("a certificate cannot be read: {e}"))
}

/// The subject of the certificate `cert` (DER) in Java's RFC 2253 form.
pub(crate) fn subject(cert: &[u8]) -> Result<String, String> {
    let cert = parse(cert)?;
    let rdns = &cert.tbs_certificate.subject.0;
    let mut out = String::new();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, atv) in rdn.0.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            attribute(&atv.oid.to_string(), &atv.value, &mut out)?;
        }
    }
    Ok(out)
}

/// The subject of `cert` as encoded (DER).
pub(crate) fn subject_der(cert: &[u8]) -> Result<Vec<u8>, String> {
    parse(cert)?
        .tbs_certificate
        .subject
        .to_der()
        .map_err(|e| format!("a certificate's subject cannot be encoded: {e}"))
}

/// The serial number of `cert`, in hex as openssl prints it.
pub(crate) fn serial(cert: &[u8]) -> Result<String, String> {
    let cert = parse(cert)?;
    Ok(cert
        .tbs_certificate
        .serial_number
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect())
}

/// One subject alternative name: equal when encoded alike; shown as Java's lists show them
/// (`DNS:localhost`, `IP:127.0.0.1`; other kinds by their tag and hex).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AltName(Vec<u8>);

impl std::fmt::Display for AltName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use x509_cert::ext::pkix::name::GeneralName;
        match GeneralName::from_der(&self.0) {
            Ok(GeneralName::DnsName(n)) => write!(f, "DNS:{}", n.as_str()),
            Ok(GeneralName::Rfc822Name(n)) => write!(f, "email:{}", n.as_str()),
            Ok(GeneralName::UniformResourceIdentifier(n)) => write!(f, "URI:{}", n.as_str()),
            Ok(GeneralName::IpAddress(ip)) => match ip.as_bytes().len() {
                4 => {
                    let b = ip.as_bytes();
                    write!(f, "IP:{}", std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]))
                }
                16 => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(ip.as_bytes());
                    write!(f, "IP:{}", std::net::Ipv6Addr::from(a))
                }
                _ => write!(f, "IP:#{}", hex(ip.as_bytes())),
            },
            _ => write!(f, "#{}", hex(&self.0)),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The subject alternative names of `cert` (none without the extension).
pub(crate) fn subject_alt_names(cert: &[u8]) -> Result<Vec<AltName>, String> {
    use x509_cert::der::oid::AssociatedOid;
    use x509_cert::ext::pkix::SubjectAltName;
    let cert = parse(cert)?;
    let Some(ext) = cert
        .tbs_certificate
        .extensions
        .iter()
        .flatten()
        .find(|e| e.extn_id == SubjectAltName::OID)
    else {
        return Ok(Vec::new());
    };
    let names = SubjectAltName::from_der(ext.extn_value.as_bytes())
        .map_err(|e| format!("a certificate's subject alternative names cannot be read: {e}"))?;
    names
        .0
        .iter()
        .map(|n| {
            n.to_der()
                .map(AltName)
                .map_err(|e| format!("a subject alternative name cannot be encoded: {e}"))
        })
        .collect()
}

fn attribute(oid: &str, value: &der::Any, out: &mut String) -> Result<(), String> {
    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
    out.push_str(keyword.unwrap_or(oid));
    out.push('=');
    match (keyword, string_value(value)) {
        (Some(_), Some(text)) => escape(&text, out),
        _ => {
            let der = value
                .to_der()
                .map_err(|e| format!("a subject attribute cannot be encoded: {e}"))?;
            out.push('#');
            for b in der {
                out.push_str(&format!("{b:02x}"));
            }
        }
    }
    Ok(())
}

/// The text of a string-typed value, decoded as Java's `DerValue.getAsString` decodes each
/// type (an undecodable byte becomes U+FFFD); None for a value of another type. (GeneralString
/// and UniversalString, which Java reads too, are not tags the `der` crate decodes: a
/// certificate with one in its subject cannot be read, and its connection is refused.)
fn string_value(value: &der::Any) -> Option<String> {
    let bytes = value.value();
    let ascii = || {
        bytes
            .iter()
            .map(|&b| if b < 0x80 { b as char } else { '\u{fffd}' })
            .collect()
    };
    match value.tag() {
        Tag::Utf8String => Some(String::from_utf8_lossy(bytes).into_owned()),
        Tag::PrintableString | Tag::Ia5String => Some(ascii()),
        Tag::TeletexString => Some(bytes.iter().map(|&b| b as char).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = bytes
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            Some(String::from_utf16_lossy(&units))
        }
        _ => None,
    }
}

/// Java's escaping of an RFC 2253 string value.
fn escape(text: &str, out: &mut String) {
    const ESCAPED: &str = ",=+<>#;\"\\";
    let mut chars: Vec<char> = Vec::with_capacity(text.len());
    for c in text.chars() {
        if ESCAPED.contains(c) {
            chars.push('\\');
            chars.push(c);
        } else if c == '\0' {
            chars.extend(['\\', '0', '0']);
        } else {
            chars.push(c);
        }
    }
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = chars.iter().take_while(|c| blank(c)).count();
    let trail = chars.len() - chars.iter().rev().take_while(|c| blank(c)).count();
    for (i, c) in chars.iter().enumerate() {
        if i < lead || i >= trail.max(lead) {
            out.push('\\');
        }
        out.push(*c);
    }
}

#[cfg(test)]
pub(crate) mod testcert {
    use der::Encode;

    pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        let len = content.len();
        if len < 0x80 {
            v.push(len as u8);
        } else if len < 0x100 {
            v.extend([0x81, len as u8]);
        } else {
            v.extend([0x82, (len >> 8) as u8, len as u8]);
        }
        v.extend_from_slice(content);
        v
    }

    pub(crate) fn oid(dotted: &str) -> Vec<u8> {
        der::asn1::ObjectIdentifier::new_unwrap(dotted)
            .to_der()
            .expect("encodes")
    }

    /// A minimal certificate (never verified, only parsed) with the subject `rdns`, each RDN a
    /// list of (OID, DER value).
    pub(crate) fn cert(rdns: &[&[(&str, Vec<u8>)]]) -> Vec<u8> {
        cert_with_sans(rdns, &[])
    }

    /// The same with a subjectAltName extension of these names (each a GeneralName's DER, see
    /// [`dns`] and [`ip`]); none: no extension.
    pub(crate) fn cert_with_sans(rdns: &[&[(&str, Vec<u8>)]], sans: &[Vec<u8>]) -> Vec<u8> {
        let name: Vec<u8> = rdns
            .iter()
            .flat_map(|rdn| {
                let atvs: Vec<u8> = rdn
                    .iter()
                    .flat_map(|(o, v)| tlv(0x30, &[oid(o), v.clone()].concat()))
                    .collect();
                tlv(0x31, &atvs)
            })
            .collect();
        let name = tlv(0x30, &name);
        let alg = tlv(
            0x30,
            &[oid("1.2.840.113549.1.1.11"), vec![0x05, 0x00]].concat(),
        );
        let time = tlv(0x17, b"250101000000Z");
        let validity = tlv(0x30, &[time.clone(), time].concat());
        let spki = tlv(
            0x30,
            &[
                tlv(
                    0x30,
                    &[oid("1.2.840.10045.2.1"), oid("1.2.840.10045.3.1.7")].concat(),
                ),
                tlv(0x03, &[0, 4, 1, 2]),
            ]
            .concat(),
        );
        let mut fields = vec![
            tlv(0xa0, &tlv(0x02, &[2])),
            tlv(0x02, &[1]),
            alg.clone(),
            name.clone(),
            validity,
            name,
            spki,
        ];
        if !sans.is_empty() {
            let ext = tlv(
                0x30,
                &[oid("2.5.29.17"), tlv(0x04, &tlv(0x30, &sans.concat()))].concat(),
            );
            fields.push(tlv(0xa3, &tlv(0x30, &ext)));
        }
        let tbs = tlv(0x30, &fields.concat());
        tlv(0x30, &[tbs, alg, tlv(0x03, &[0, 0])].concat())
    }

    /// A dNSName.
    pub(crate) fn dns(name: &str) -> Vec<u8> {
        tlv(0x82, name.as_bytes())
    }

    /// An iPAddress.
    pub(crate) fn ip(octets: &[u8]) -> Vec<u8> {
        tlv(0x87, octets)
    }

    pub(crate) fn utf8(s: &str) -> Vec<u8> {
        tlv(0x0c, s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::testcert::{cert, cert_with_sans, dns, ip, tlv, utf8};
    use super::*;

    fn printable(s: &str) -> Vec<u8> {
        tlv(0x13, s.as_bytes())
    }

    #[test]
    fn rdns_last_first_with_rfc2253_keywords() {
        let c = cert(&[
            &[("2.5.4.6", printable("US"))],
            &[("2.5.4.10", utf8("Acme"))],
            &[("2.5.4.11", utf8("eng"))],
            &[("2.5.4.3", utf8("alice"))],
        ]);
        assert_eq!(subject(&c).as_deref(), Ok("CN=alice,OU=eng,O=Acme,C=US"));
    }

    #[test]
    fn other_attributes_are_oids_with_hex_values() {
        let c = cert(&[
            &[("2.5.4.3", utf8("bob"))],
            &[("1.2.840.113549.1.9.1", tlv(0x16, b"b@x"))],
            &[("2.5.4.5", printable("42"))],
        ]);
        assert_eq!(
            subject(&c).as_deref(),
            Ok("2.5.4.5=#13023432,1.2.840.113549.1.9.1=#1603624078,CN=bob")
        );
    }

    #[test]
    fn multi_valued_rdns_and_escapes() {
        let c = cert(&[
            &[("2.5.4.10", utf8("#1 Acme; \"Q\" <x>"))],
            &[
                ("2.5.4.11", utf8("ops")),
                ("0.9.2342.19200300.100.1.1", utf8("b1")),
            ],
            &[("2.5.4.3", utf8(" bob, jr+a=b\\ "))],
        ]);
        assert_eq!(
            subject(&c).as_deref(),
            Ok(r#"CN=\ bob\, jr\+a\=b\\\ ,OU=ops+UID=b1,O=\#1 Acme\; \"Q\" \<x\>"#)
        );
    }

    #[test]
    fn non_ascii_and_bmp_strings_print_as_text() {
        let bmp: Vec<u8> = "Zoë".encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
        let c = cert(&[
            &[("2.5.4.10", tlv(0x1e, &bmp))],
            &[("2.5.4.3", utf8("José"))],
        ]);
        assert_eq!(subject(&c).as_deref(), Ok("CN=José,O=Zoë"));
    }

    #[test]
    fn subject_alternative_names_and_serial() {
        let c = cert_with_sans(
            &[&[("2.5.4.3", utf8("localhost"))]],
            &[dns("localhost"), ip(&[127, 0, 0, 1])],
        );
        let names: Vec<String> = subject_alt_names(&c)
            .unwrap_or_default()
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(names, ["DNS:localhost", "IP:127.0.0.1"]);
        assert_eq!(serial(&c).as_deref(), Ok("01"));
        let plain = cert(&[&[("2.5.4.3", utf8("localhost"))]]);
        assert_eq!(subject_alt_names(&plain), Ok(Vec::new()));
        assert_eq!(subject_der(&c), subject_der(&plain));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(subject(b"").is_err());
        assert!(subject(&[0x30, 0x03, 0x02, 0x01]).is_err());
    }
}
