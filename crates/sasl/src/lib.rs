//! SASL mechanisms as Apache Kafka speaks them, without I/O.
//!
//! Layout:
//! - `plain.rs`: RFC 4616 messages (`[authzid] NUL authcid NUL passwd`) and the
//!   constant-time password check.
//! - `scram.rs`: RFC 5802 / RFC 7677 SCRAM-SHA-256 and SCRAM-SHA-512 with Kafka's message
//!   grammar (its extensions, `tokenauth`, its iteration limits 4096..=16384): credentials
//!   (salt, stored key, server key, iterations: never the password), the server's two steps,
//!   and the client the broker logs in to its peers with.
//! - `oauthbearer.rs`: RFC 7628 OAUTHBEARER as Kafka's broker speaks it: the client's first
//!   message, the error challenge, and token validation as Kafka's unsecured validator (JWS
//!   with `alg: none`) and its broker JWT validator (signatures checked against a JSON Web Key
//!   Set, audience, issuer, clock skew) do it.
//!
//! Owns: the bytes of each mechanism's messages and the cryptography. Does not own: which
//! listener enables what, where credentials are stored, Kafka error codes (the broker), or
//! sockets (the server).
//!
//! Every parser here takes untrusted bytes from an unauthenticated client; they never panic
//! and return an error naming what is wrong (callers decide how much of it a client sees).

pub mod oauthbearer;
pub mod plain;
pub mod scram;

pub use scram::{ScramClient, ScramCredential, ScramFailure, ScramMechanism, ScramServer};
