//! DeleteGroups (v0-v2): empty groups only; their offsets and metadata become tombstones.
//! A share group's state is deleted wherever it is stored (`apis/share.rs`).

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::errors::{coordinator_write_code, group_error_code};
use crate::{Broker, Reply};

pub(crate) fn handle(broker: &Arc<Broker>, req: DeleteGroupsRequest, _version: i16) -> Reply {
    let ok = broker.ensure_offsets_topic();
    let mut written = Vec::new();
    let mut share_groups = Vec::new();
    let results: Vec<DeletableGroupResult> = req
        .groups_names
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let base = DeletableGroupResult::default().with_group_id(id.clone());
            if !ok {
                return base.with_error_code(ResponseError::CoordinatorNotAvailable.code());
            }
            let group = id.0.as_str();
            if !broker.groups.read(|c| c.has_group(group))
                && (broker.shares.groups(|g| g.get(group).is_some())
                    || !broker.shares.stored_starts(group).is_empty())
            {
                share_groups.push((i, group.to_string()));
                return base;
            }
            let (r, logs) = broker.groups.run(|c| match c.delete_group(id.0.as_str()) {
                Ok(eff) => (Ok(()), eff),
                Err(e) => (Err(e), Default::default()),
            });
            written.extend(logs);
            base.with_error_code(r.err().as_ref().map_or(0, group_error_code))
        })
        .collect();
    let flushed = broker.flush_logs(written);
    let broker = broker.clone();
    Box::pin(async move {
        let failed = flushed.await.is_err();
        let mut results = results;
        for (i, group) in share_groups {
            if let Err(code) = crate::apis::share::delete_share_group(&broker, &group).await {
                results[i].error_code = code;
            }
        }
        let results = results
            .into_iter()
            .map(|r| {
                if failed && r.error_code == 0 {
                    r.with_error_code(coordinator_write_code(
                        ResponseError::KafkaStorageError.code(),
                    ))
                } else {
                    r
                }
            })
            .collect();
        Some(ResponseKind::DeleteGroups(
            DeleteGroupsResponse::default().with_results(results),
        ))
    })
}
