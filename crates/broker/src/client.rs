//! Who sent a request (`Client`), as the APIs, the authorizer and the quotas see it.

use std::net::IpAddr;
use std::sync::Arc;

use kafka_protocol::messages::RequestHeader;

use crate::refusals::ProduceRefusals;

/// The principal of a connection that did not authenticate: Kafka's `KafkaPrincipal.ANONYMOUS`.
pub(crate) const ANONYMOUS: &str = "User:ANONYMOUS";

/// Who sent a request: its client id, where it connects from, who it authenticated as, and
/// which API it called.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    pub(crate) id: String,
    /// The peer address as Kafka reports it (Java's `InetAddress.toString()`: `/127.0.0.1`).
    pub(crate) host: String,
    /// The listener the request came in on.
    pub(crate) listener: Arc<str>,
    /// The principal (`User:alice`; `User:ANONYMOUS` without authentication).
    pub(crate) principal: Arc<str>,
    /// The peer address as Java's `getHostAddress` prints it (`127.0.0.1`): what ACL hosts
    /// are compared with.
    pub(crate) address: String,
    /// The request's API key.
    pub(crate) api_key: i16,
    /// The connection's refused idempotent batches (Produce).
    pub(crate) produce_refusals: Arc<ProduceRefusals>,
    /// The connection's share sessions (ShareFetch).
    pub(crate) share_sessions: Arc<crate::shares::ConnSessions>,
}

impl Client {
    pub(crate) fn new(header: &RequestHeader, conn: &crate::Connection) -> Client {
        let host = java_host(conn.peer);
        Client {
            id: client_id(header),
            address: host.trim_start_matches('/').to_string(),
            host,
            listener: conn.listener.clone(),
            principal: conn
                .principal
                .clone()
                .unwrap_or_else(|| Arc::from(ANONYMOUS)),
            api_key: header.request_api_key,
            produce_refusals: conn.produce_refusals.clone(),
            share_sessions: conn.share_sessions.clone(),
        }
    }

    /// The API's name as Kafka's `ApiKeys.name` reads (`Produce`), for the authorizer log.
    pub(crate) fn api_name(&self) -> String {
        match kafka_protocol::messages::ApiKey::try_from(self.api_key) {
            Ok(key) => format!("{key:?}"),
            Err(()) => self.api_key.to_string(),
        }
    }
}

/// The request's client id ("" when it has none).
pub(crate) fn client_id(header: &RequestHeader) -> String {
    header
        .client_id
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// `InetAddress.toString()` of an address without a host name: `/` and the address, IPv6 as
/// eight hexadecimal groups without leading zeros and without `::` compression.
fn java_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("/{v4}"),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => format!("/{v4}"),
            None => {
                let groups: Vec<String> = v6.segments().iter().map(|s| format!("{s:x}")).collect();
                format!("/{}", groups.join(":"))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_read_as_java_prints_them() {
        assert_eq!(
            java_host("127.0.0.1".parse().unwrap_or(IpAddr::from([0; 4]))),
            "/127.0.0.1"
        );
        assert_eq!(
            java_host("::1".parse().unwrap_or(IpAddr::from([0; 4]))),
            "/0:0:0:0:0:0:0:1"
        );
        assert_eq!(
            java_host("::ffff:10.0.0.2".parse().unwrap_or(IpAddr::from([0; 4]))),
            "/10.0.0.2"
        );
    }
}
