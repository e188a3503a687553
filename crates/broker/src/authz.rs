//! The broker's authorizer (Kafka's `AuthHelper` over its `StandardAuthorizer`): the ACLs in
//! force, reloaded when the metadata store changes them, and the questions the API handlers
//! ask of them. What each API asks is `apis/access.rs`; the decision itself is sluice-acl's.
//!
//! Without `authorizer.class.name` every question is answered yes at the cost of one branch,
//! and the ACL APIs answer SECURITY_DISABLED, as a Kafka broker without an authorizer does.
//!
//! A denial that a client asked for (not one that only narrows a listing or computes
//! authorized operations) is logged at INFO, as Kafka's authorizer logger does, at most one
//! line a second.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use sluice_acl::{AclFilter, Action, Authorizer, Operation, ResourceType, CLUSTER_NAME};
use sluice_config::AuthorizerSettings;
use sluice_meta::AclSet;

use crate::client::Client;
use crate::log_limit::LogLimiter;

/// Denials logged: one line a second at most.
static DENIAL_LOG: LogLimiter = LogLimiter::new("authorization denial(s)");

/// Whether a denial is worth a log line (Kafka's `logIfDenied`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Audit {
    /// The client asked for this resource: a denial is logged.
    Log,
    /// Filtering a listing or computing authorized operations: not logged.
    Quiet,
}

/// The ACLs in force and the authorizer's settings.
#[derive(Debug)]
pub(crate) struct Authz {
    /// None: no authorizer is configured; everything is allowed.
    settings: Option<AuthorizerSettings>,
    table: RwLock<Arc<Authorizer>>,
    /// The cluster revision at which the ACLs were last read (cluster mode).
    loaded_revision: AtomicI64,
    allowed: AtomicU64,
    denied: AtomicU64,
}

impl Authz {
    pub(crate) fn new(settings: Option<AuthorizerSettings>) -> Authz {
        let table = Arc::new(build(settings.as_ref(), AclSet::new()));
        Authz {
            settings,
            table: RwLock::new(table),
            loaded_revision: AtomicI64::new(-1),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
        }
    }

    /// Whether an authorizer is configured.
    pub(crate) fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    /// The ACLs in force.
    pub(crate) fn current(&self) -> Arc<Authorizer> {
        self.table.read().clone()
    }

    /// Put `acls` in force (after this broker changed them, or read them).
    pub(crate) fn set(&self, acls: AclSet) {
        *self.table.write() = Arc::new(build(self.settings.as_ref(), acls));
    }

    /// Load the ACLs from the store (start-up). Nothing to load without an authorizer.
    pub(crate) fn load(&self, meta: &sluice_meta::Meta) -> Result<(), sluice_meta::MetaError> {
        if !self.enabled() {
            return Ok(());
        }
        let revision = meta.etcd().map_or(0, |s| s.view().revision);
        let acls = meta.acls()?;
        tracing::info!(
            acls = acls.len(),
            super_users = ?self.settings.as_ref().map(|s| &s.super_users),
            "authorizer: loaded the ACLs"
        );
        self.set(acls);
        self.loaded_revision.store(revision, Ordering::Relaxed);
        Ok(())
    }

    /// Cluster mode: read the ACLs again if the cluster's records changed since the last read
    /// (another broker may have changed them). Runs on the cluster thread.
    pub(crate) fn reload_if_changed(&self, store: &sluice_meta::EtcdStore, revision: i64) {
        if !self.enabled() || revision <= self.loaded_revision.load(Ordering::Relaxed) {
            return;
        }
        match store.acls() {
            Ok(acls) => {
                if *self.current().bindings() != acls {
                    tracing::info!(acls = acls.len(), "authorizer: the ACLs changed");
                    self.set(acls);
                }
                self.loaded_revision.store(revision, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!("reading the ACLs failed: {e}"),
        }
    }

    /// May `client` do `operation` on the resource? Always, without an authorizer.
    pub(crate) fn allows(
        &self,
        client: &Client,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
        audit: Audit,
    ) -> bool {
        if !self.enabled() {
            return true;
        }
        let action = Action {
            operation,
            resource_type,
            resource_name: name,
        };
        let decision = self
            .current()
            .authorize(&client.principal, &client.address, action);
        let counter = if decision.allowed {
            &self.allowed
        } else {
            &self.denied
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if !decision.allowed && audit == Audit::Log {
            if let Some(more) = DENIAL_LOG.admit() {
                tracing::info!(
                    "Principal = {} is Denied operation = {} from host = {} on resource = {}:LITERAL:{} for request = {} based on rule {}{more}",
                    client.principal,
                    operation,
                    client.address,
                    resource_type.log_name(),
                    name,
                    client.api_name(),
                    decision.rule
                );
            }
        } else if decision.allowed {
            tracing::trace!(principal = %client.principal, %operation, ?resource_type, name, rule = %decision.rule, "authorized");
        }
        decision.allowed
    }

    /// May `client` do `operation` on the cluster?
    pub(crate) fn allows_cluster(&self, client: &Client, operation: Operation) -> bool {
        self.allows(
            client,
            operation,
            ResourceType::Cluster,
            CLUSTER_NAME,
            Audit::Log,
        )
    }

    /// Kafka's `authorizeByResourceType`: may `client` do `operation` on some resource of the
    /// type?
    pub(crate) fn allows_some(
        &self,
        client: &Client,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        !self.enabled()
            || self.current().authorize_by_resource_type(
                &client.principal,
                &client.address,
                operation,
                resource_type,
            )
    }

    /// The authorized-operations bit field of a resource for `client`: every operation the
    /// type supports without an authorizer (as Kafka answers).
    pub(crate) fn operations(
        &self,
        client: &Client,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        if !self.enabled() {
            return sluice_acl::operations_bits(
                resource_type.supported_operations().iter().copied(),
            );
        }
        self.current().authorized_operations(
            &client.principal,
            &client.address,
            resource_type,
            name,
        )
    }

    /// The ACLs `filter` matches.
    pub(crate) fn matching(&self, filter: &AclFilter) -> Vec<sluice_acl::AclBinding> {
        self.current().matching(filter).cloned().collect()
    }

    /// (allowed, denied) decisions since start-up, and the number of ACLs, for metrics.
    pub(crate) fn counts(&self) -> (u64, u64, usize) {
        (
            self.allowed.load(Ordering::Relaxed),
            self.denied.load(Ordering::Relaxed),
            self.current().bindings().len(),
        )
    }
}

fn build(settings: Option<&AuthorizerSettings>, acls: AclSet) -> Authorizer {
    match settings {
        Some(s) => Authorizer::new(
            s.super_users.iter().cloned(),
            s.allow_everyone_if_no_acl_found,
            acls,
        ),
        None => Authorizer::default(),
    }
}
