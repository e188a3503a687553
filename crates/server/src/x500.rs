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

/// The subject of the certificate `cert` (DER) in Java's RFC 2253 form.
pub(crate) fn subject(cert: &[u8]) -> Result<String, String> {
    let cert = x509_cert::Certificate::from_der(cert)
        .map_err(|e| format!("the client certificate cannot be read: {e}"))?;
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
mod tests {
    use super::*;

    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
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

    fn oid(dotted: &str) -> Vec<u8> {
        der::asn1::ObjectIdentifier::new_unwrap(dotted)
            .to_der()
            .expect("encodes")
    }

    /// A minimal certificate (never verified, only parsed) with the subject `rdns`, each RDN a
    /// list of (OID, DER value).
    fn cert(rdns: &[&[(&str, Vec<u8>)]]) -> Vec<u8> {
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
        let tbs = tlv(
            0x30,
            &[
                tlv(0xa0, &tlv(0x02, &[2])),
                tlv(0x02, &[1]),
                alg.clone(),
                name.clone(),
                validity,
                name,
                spki,
            ]
            .concat(),
        );
        tlv(0x30, &[tbs, alg, tlv(0x03, &[0, 0])].concat())
    }

    fn utf8(s: &str) -> Vec<u8> {
        tlv(0x0c, s.as_bytes())
    }

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
    fn garbage_is_an_error_not_a_panic() {
        assert!(subject(b"").is_err());
        assert!(subject(&[0x30, 0x03, 0x02, 0x01]).is_err());
    }
}
