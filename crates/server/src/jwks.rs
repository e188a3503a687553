//! The HTTP(S) client that fetches OAUTHBEARER key sets (`sasl.oauthbearer.jwks.endpoint.url`
//! with `http://` or `https://`): one blocking `GET` per fetch, on the broker's key-set refresh
//! thread ([`sluice_broker::JwksFetcher`], installed at start by the binary).
//!
//! HTTPS trusts the certificates of the file named by the `SSL_CERT_FILE` environment variable
//! (OpenSSL's convention) or else the system's CA bundle (the first of
//! [`SYSTEM_CA_BUNDLES`] that exists), with rustls and ring as the listeners use them.
//! Limits: [`JWKS_TIMEOUT`] to connect and for each read or write, [`JWKS_MAX_BYTES`] of
//! response; redirects are not followed (the error names the `Location`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::ServerName;

/// How long a connection, and each read or write of a fetch, may take.
pub const JWKS_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest key set response read.
pub const JWKS_MAX_BYTES: usize = 4 << 20;
/// Where the system's CA certificates are looked for (Debian/Ubuntu, RHEL/Fedora, Alpine/BSD).
pub const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The fetcher the broker's key-set refresh threads call.
pub fn jwks_fetcher() -> Arc<sluice_broker::JwksFetcher> {
    Arc::new(|url: &str| get(url))
}

struct Url<'a> {
    tls: bool,
    host: &'a str,
    port: u16,
    path: &'a str,
}

fn parse_url(url: &str) -> Result<Url<'_>, String> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(format!("{url} is not an http:// or https:// URL"));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = if let Some(r) = authority.strip_prefix('[') {
        let (h, after) = r
            .split_once(']')
            .ok_or_else(|| format!("{url}: unclosed ["))?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => {
            if tls {
                443
            } else {
                80
            }
        }
        Some(p) => p.parse().map_err(|_| format!("{url}: bad port {p:?}"))?,
    };
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok(Url {
        tls,
        host,
        port,
        path,
    })
}

fn roots() -> Result<rustls::RootCertStore, String> {
    let path = match std::env::var_os("SSL_CERT_FILE") {
        Some(p) => std::path::PathBuf::from(p),
        None => SYSTEM_CA_BUNDLES
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.is_file())
            .ok_or_else(|| {
                format!(
                    "no CA certificates to check the key set server with: set SSL_CERT_FILE or install one of {}",
                    SYSTEM_CA_BUNDLES.join(", ")
                )
            })?,
    };
    let pem = sluice_config::Pem::File(path);
    sluice_tls::roots(sluice_tls::certificates(&pem)?)
        .map_err(|e| format!("{}: {e}", sluice_tls::describe(&pem)))
}

/// The body of a `GET` of `url` that answered 200.
fn get(url: &str) -> Result<Vec<u8>, String> {
    let u = parse_url(url)?;
    let addr = (u.host, u.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", u.host))?
        .next()
        .ok_or_else(|| format!("{} has no address", u.host))?;
    let tcp = TcpStream::connect_timeout(&addr, JWKS_TIMEOUT)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    tcp.set_read_timeout(Some(JWKS_TIMEOUT))
        .and_then(|()| tcp.set_write_timeout(Some(JWKS_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nUser-Agent: sluice\r\nConnection: close\r\n\r\n",
        u.path, u.host
    );
    let response = if u.tls {
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots()?)
        .with_no_client_auth();
        let name = ServerName::try_from(u.host.to_string())
            .map_err(|e| format!("{}: not a host name: {e}", u.host))?;
        let conn =
            rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
        exchange(rustls::StreamOwned::new(conn, tcp), &request)?
    } else {
        exchange(tcp, &request)?
    };
    body(&response).map_err(|e| format!("GET {url}: {e}"))
}

fn exchange(mut stream: impl Read + Write, request: &str) -> Result<Vec<u8>, String> {
    stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.flush())
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                response.extend_from_slice(&chunk[..n]);
                if response.len() > JWKS_MAX_BYTES {
                    return Err(format!("the response is over {JWKS_MAX_BYTES} bytes"));
                }
            }
            // A server that closes without TLS's close_notify: what came is what there is.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(format!("cannot read the response: {e}")),
        }
    }
    Ok(response)
}

/// The body of an HTTP/1.x response that answered 200 (`Content-Length`, chunked, or to the
/// end).
fn body(response: &[u8]) -> Result<Vec<u8>, String> {
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no complete HTTP response")?;
    let head = String::from_utf8_lossy(&response[..head_end]);
    let rest = &response[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line.split(' ').nth(1).unwrap_or("");
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    if status != "200" {
        let location = header("location")
            .map(|l| format!(" (Location: {l}; redirects are not followed)"))
            .unwrap_or_default();
        return Err(format!("the server answered {status_line:?}{location}"));
    }
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        let mut out = Vec::new();
        let mut rest = rest;
        loop {
            let line_end = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or("a chunk is cut short")?;
            let size_text = String::from_utf8_lossy(&rest[..line_end]);
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| format!("bad chunk size {size_text:?}"))?;
            rest = &rest[line_end + 2..];
            if size == 0 {
                return Ok(out);
            }
            let chunk = rest.get(..size).ok_or("a chunk is cut short")?;
            out.extend_from_slice(chunk);
            rest = rest.get(size + 2..).ok_or("a chunk is cut short")?;
        }
    }
    match header("content-length").map(|l| l.parse::<usize>()) {
        Some(Ok(n)) => rest
            .get(..n)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| "the body is shorter than its Content-Length".to_string()),
        Some(Err(_)) => Err("bad Content-Length".into()),
        None => Ok(rest.to_vec()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_bodies() {
        let u = parse_url("https://idp.example:8443/keys?x=1").unwrap();
        assert_eq!(
            (u.tls, u.host, u.port, u.path),
            (true, "idp.example", 8443, "/keys?x=1")
        );
        let u = parse_url("http://127.0.0.1").unwrap();
        assert_eq!(
            (u.tls, u.host, u.port, u.path),
            (false, "127.0.0.1", 80, "/")
        );
        let u = parse_url("http://[::1]:9000/k").unwrap();
        assert_eq!((u.host, u.port), ("::1", 9000));
        let u = parse_url("https://[::1]/k").unwrap();
        assert_eq!((u.host, u.port), ("::1", 443));
        assert!(parse_url("ftp://x/").is_err());
        assert!(parse_url("http:///k").is_err());

        assert_eq!(
            body(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}garbage").unwrap(),
            b"{}"
        );
        assert_eq!(
            body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n3;x\r\na\":\r\n0\r\n\r\n")
                .unwrap(),
            b"{\"a\":"
        );
        assert_eq!(body(b"HTTP/1.0 200 OK\r\n\r\n{}").unwrap(), b"{}");
        let e = body(b"HTTP/1.1 302 Found\r\nLocation: https://x/\r\n\r\n").unwrap_err();
        assert!(e.contains("Location: https://x/"), "{e}");
        assert!(body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        assert!(body(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(body(b"HTTP/1.1 200").is_err());
    }
}
