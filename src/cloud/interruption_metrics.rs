//! An interruption queue's metrics, under the AWS provider's names
//! (`pkg/controllers/interruption/metrics.go`):
//! `karpenter_interruption_received_messages_total{message_type}`,
//! `karpenter_interruption_deleted_messages_total` and
//! `karpenter_interruption_message_queue_duration_seconds`.
//!
//! The queue is read by a task of the AWS provider, which has no handle on the
//! controller's metrics registry (a higher layer, and the endpoints may start after it).
//! A process reads at most one queue, so these are process-wide, as upstream's registry
//! is, and every `control::metrics::Metrics` registers them.

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upstream's `metrics.DurationBuckets()`: controller-runtime's reconcile buckets and
/// longer ones for work without a timeout.
const DURATION_BUCKETS: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MessageTypeLabels {
    message_type: String,
}

/// The queue's counters and latency.
#[derive(Debug)]
pub struct InterruptionMetrics {
    received: Family<MessageTypeLabels, Counter>,
    deleted: Counter,
    latency: Histogram,
}

/// The process's interruption metrics.
pub static INTERRUPTION: LazyLock<InterruptionMetrics> = LazyLock::new(|| InterruptionMetrics {
    received: Family::default(),
    deleted: Counter::default(),
    latency: Histogram::new(DURATION_BUCKETS),
});

impl InterruptionMetrics {
    /// A message was read and parsed (`message_type`: its kind, `no_op` for one nothing
    /// acts on). A message that does not parse is not counted here, as upstream.
    pub fn received(&self, message_type: &str) {
        self.received
            .get_or_create(&MessageTypeLabels {
                message_type: message_type.to_string(),
            })
            .inc();
    }

    /// A message was deleted from the queue.
    pub fn deleted(&self) {
        self.deleted.inc();
    }

    /// How long a handled message was on its way: from the event's time to its handling.
    pub fn handled_after(&self, seconds: f64) {
        self.latency.observe(seconds.max(0.0));
    }

    /// Adds the three families to a metrics registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "karpenter_interruption_received_messages",
            "Count of messages received from the SQS queue. Broken down by message type and whether the message was actionable.",
            self.received.clone(),
        );
        registry.register(
            "karpenter_interruption_deleted_messages",
            "Count of messages deleted from the SQS queue.",
            self.deleted.clone(),
        );
        registry.register(
            "karpenter_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter.",
            self.latency.clone(),
        );
    }
}
