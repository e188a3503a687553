//! Kafka log format (to be written).
