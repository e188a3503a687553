//! The only place internal errors become Kafka error codes.

use kafka_protocol::ResponseError;
use sluice_store::{AppendError, ReadError};

pub(crate) fn append_error_code(e: &AppendError) -> i16 {
    match e {
        AppendError::Corrupt { .. } => ResponseError::CorruptMessage.code(),
        AppendError::Invalid { .. } => ResponseError::InvalidRecord.code(),
        AppendError::TooLarge { .. } => ResponseError::MessageTooLarge.code(),
        AppendError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber.code(),
        AppendError::ProducerFenced { .. } => ResponseError::InvalidProducerEpoch.code(),
        AppendError::InvalidTxnState { .. } => ResponseError::InvalidTxnState.code(),
        AppendError::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced.code(),
        AppendError::Io { .. } => ResponseError::KafkaStorageError.code(),
        // The write gate refused: this broker does not own the partition (now). Nothing was
        // written; the client refreshes its metadata and finds the owner.
        AppendError::Fenced(_) => ResponseError::NotLeaderOrFollower.code(),
    }
}

/// The code a group coordinator answers for a write of its own that failed with `code` (an
/// append or its fsync and confirmation), as Kafka's group coordinator maps them: clients
/// retry NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE after finding the coordinator again,
/// while the Java consumer's commitSync reports KAFKA_STORAGE_ERROR as an unexpected error.
pub(crate) fn coordinator_write_code(code: i16) -> i16 {
    use ResponseError as E;
    match ResponseError::try_from_code(code) {
        Some(E::NotLeaderOrFollower | E::KafkaStorageError) => E::NotCoordinator.code(),
        Some(E::UnknownTopicOrPartition | E::NotEnoughReplicas | E::RequestTimedOut) => {
            E::CoordinatorNotAvailable.code()
        }
        Some(E::MessageTooLarge | E::RecordListTooLarge | E::InvalidFetchSize) => {
            E::UnknownServerError.code()
        }
        _ => code,
    }
}

pub(crate) fn read_error_code(e: &ReadError) -> i16 {
    match e {
        ReadError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        ReadError::Io { .. } => ResponseError::KafkaStorageError.code(),
        // The fetch path reads again on a blocking thread instead; retriable if it ever got here.
        ReadError::WouldBlock { .. } => ResponseError::KafkaStorageError.code(),
        ReadError::Fenced(_) => ResponseError::NotLeaderOrFollower.code(),
    }
}

pub(crate) fn meta_error_code(e: &sluice_meta::MetaError) -> i16 {
    use sluice_meta::MetaError;
    match e {
        MetaError::TopicExists(_) => ResponseError::TopicAlreadyExists.code(),
        MetaError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition.code(),
        MetaError::InvalidPartitions { .. } => ResponseError::InvalidPartitions.code(),
        MetaError::Io { .. } | MetaError::Parse { .. } | MetaError::WrongVolume(_) => {
            ResponseError::KafkaStorageError.code()
        }
        // etcd unreachable, or a record changed under a compare-and-swap: retriable.
        MetaError::Etcd(_) => ResponseError::RequestTimedOut.code(),
        // etcd refuses this broker (certificate, credentials, permissions): the operator
        // must act; clients see the same retriable error as for an unreachable etcd.
        MetaError::EtcdRefused(_) => ResponseError::RequestTimedOut.code(),
    }
}

pub(crate) fn group_error_code(e: &sluice_group::GroupError) -> i16 {
    use sluice_group::GroupError as G;
    match e {
        G::InvalidGroupId => ResponseError::InvalidGroupId.code(),
        G::NotCoordinator => ResponseError::NotCoordinator.code(),
        G::UnknownMemberId => ResponseError::UnknownMemberId.code(),
        G::IllegalGeneration => ResponseError::IllegalGeneration.code(),
        G::RebalanceInProgress => ResponseError::RebalanceInProgress.code(),
        G::MemberIdRequired => ResponseError::MemberIdRequired.code(),
        G::FencedInstanceId => ResponseError::FencedInstanceId.code(),
        G::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol.code(),
        G::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout.code(),
        G::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached.code(),
        G::GroupIdNotFound | G::GroupTypeMismatch(_) => ResponseError::GroupIdNotFound.code(),
        G::NonEmptyGroup => ResponseError::NonEmptyGroup.code(),
        G::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic.code(),
        G::FencedMemberEpoch => ResponseError::FencedMemberEpoch.code(),
        G::StaleMemberEpoch => ResponseError::StaleMemberEpoch.code(),
        G::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId.code(),
        G::UnsupportedAssignor(_) => ResponseError::UnsupportedAssignor.code(),
        G::InvalidRequest(_) => ResponseError::InvalidRequest.code(),
        G::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression.code(),
        G::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge.code(),
        G::Internal(_) => ResponseError::UnknownServerError.code(),
    }
}

/// The code answering a transaction coordinator's refusal. `old_fenced`: the request's
/// version predates PRODUCER_FENCED (InitProducerId < v4, AddPartitionsToTxn, AddOffsetsToTxn,
/// EndTxn and TxnOffsetCommit < v2), so a fenced producer gets INVALID_PRODUCER_EPOCH, as
/// Kafka answers it.
pub(crate) fn txn_error_code(e: &sluice_txn::TxnError, old_fenced: bool) -> i16 {
    use sluice_txn::TxnError as T;
    match e {
        T::InvalidRequest(_) => ResponseError::InvalidRequest.code(),
        T::NotCoordinator => ResponseError::NotCoordinator.code(),
        T::ConcurrentTransactions => ResponseError::ConcurrentTransactions.code(),
        T::ProducerFenced if old_fenced => ResponseError::InvalidProducerEpoch.code(),
        T::ProducerFenced => ResponseError::ProducerFenced.code(),
        T::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping.code(),
        T::InvalidTxnState(_) => ResponseError::InvalidTxnState.code(),
        T::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout.code(),
        T::TransactionAbortable => ResponseError::TransactionAbortable.code(),
        T::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound.code(),
        // Retriable: the client tries again.
        T::ProducerIdAllocation(_) => ResponseError::CoordinatorLoadInProgress.code(),
    }
}
