//! The interruption queue (upstream's interruption controller,
//! `pkg/controllers/interruption/controller.go`, and its SQS provider,
//! `pkg/providers/sqs/sqs.go`): EventBridge rules send EC2's spot interruption warnings,
//! rebalance recommendations, instance state changes, capacity-reservation interruptions
//! and AWS Health scheduled changes to an SQS queue, which this task long-polls while the
//! process leads.
//!
//! A message is read ([`message::parse`]) and its notices wait in the provider's inbox
//! until the controller takes them ([`super::AwsCloud`]'s `interruptions`). It is deleted
//! from the queue only once the controller has acted on them (`acknowledge`), as
//! upstream deletes a message after handling it: a crash in between leaves it on the
//! queue, visible again after the visibility timeout. A message that does not parse, or
//! that nothing acts on, is logged with its id and deleted; no message stops the loop. A
//! queue that cannot be read is retried with backoff (the SDK has already retried
//! throttling and 5xx answers).

pub mod message;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use chrono::{DateTime, Utc};
use tokio::sync::{Notify, watch};

use super::AwsHandle;
use crate::cloud::Interruption;
use crate::cloud::interruption_metrics::INTERRUPTION;

/// Upstream's receive: at most 10 messages, a 20 s long poll, hidden from other readers
/// for 20 s.
const MAX_MESSAGES: i32 = 10;
const WAIT_SECONDS: i32 = 20;
const VISIBILITY_SECONDS: i32 = 20;
/// Backoff after a failed receive (or queue lookup), doubling to the cap.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// Notices between the queue task and the controller.
#[derive(Default)]
pub(crate) struct Inbox {
    /// Read from the queue, not yet taken by the controller.
    waiting: Vec<Interruption>,
    /// Messages taken or waiting, not yet deleted, by SQS message id: the latest receipt
    /// handle (SQS deletes by the handle of the latest receive) and the event's time.
    in_flight: HashMap<String, Pending>,
    /// Handled: to delete.
    done: Vec<Pending>,
}

#[derive(Clone, Debug)]
struct Pending {
    receipt: String,
    /// The event's time, for `karpenter_interruption_message_queue_duration_seconds`
    /// (`None`: a message that did not parse, which upstream does not time).
    time: Option<DateTime<Utc>>,
}

impl Inbox {
    /// The notices waiting, handed to the controller.
    pub(crate) fn take(&mut self) -> Vec<Interruption> {
        std::mem::take(&mut self.waiting)
    }

    /// The controller has acted on these: their messages are deleted. True when there is
    /// anything to delete.
    pub(crate) fn handled(&mut self, notices: &[Interruption]) -> bool {
        for n in notices {
            if let Some(p) = n.receipt.as_ref().and_then(|id| self.in_flight.remove(id)) {
                self.done.push(p);
            }
        }
        !self.done.is_empty()
    }

    /// One message read from the queue. True when it brought notices for the controller.
    fn read(&mut self, queue: &str, m: &aws_sdk_sqs::types::Message) -> bool {
        let id = m.message_id().unwrap_or("(no message id)").to_string();
        let Some(receipt) = m.receipt_handle().map(str::to_string) else {
            tracing::warn!(
                "interruption queue {queue}: message {id} has no receipt handle; it cannot be deleted"
            );
            return false;
        };
        if let Some(p) = self.in_flight.get_mut(&id) {
            // Seen again before it was deleted (its visibility timed out): only the
            // newest receipt deletes it.
            p.receipt = receipt;
            return false;
        }
        let parsed = match message::parse(m.body().unwrap_or_default()) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("interruption queue {queue}: message {id}: {e}; deleting it");
                self.done.push(Pending {
                    receipt,
                    time: None,
                });
                return false;
            }
        };
        INTERRUPTION.received(parsed.type_label());
        let time = parsed.time.or_else(|| sent_at(m));
        let pending = Pending { receipt, time };
        let Some(kind) = parsed.kind.filter(|_| !parsed.instances.is_empty()) else {
            tracing::debug!(
                "interruption queue {queue}: message {id} ({}) asks nothing; deleting it",
                parsed.type_label()
            );
            self.done.push(pending);
            return false;
        };
        tracing::info!(
            "interruption queue {queue}: message {id}: {kind} for {}",
            parsed.instances.join(", ")
        );
        let at = time.unwrap_or_else(Utc::now);
        for instance in parsed.instances {
            self.waiting.push(Interruption {
                instance,
                kind,
                at,
                receipt: Some(id.clone()),
            });
        }
        self.in_flight.insert(id, pending);
        true
    }
}

/// SQS's SentTimestamp attribute (milliseconds since the epoch).
fn sent_at(m: &aws_sdk_sqs::types::Message) -> Option<DateTime<Utc>> {
    let ms = m
        .attributes()?
        .get(&MessageSystemAttributeName::SentTimestamp)?
        .parse::<i64>()
        .ok()?;
    DateTime::from_timestamp_millis(ms)
}

/// Starts reading the queue `name` (upstream's `--interruption-queue`): the receive loop
/// and the deleter. `leading`: read only while this process leads (`None`: always), so a
/// standby does not hide messages from the leader. `wake` wakes the controller's loop
/// when notices arrive.
pub fn spawn(
    handle: AwsHandle,
    name: String,
    leading: Option<watch::Receiver<bool>>,
    wake: Arc<Notify>,
) {
    let (url_tx, url_rx) = watch::channel(None::<String>);
    tokio::spawn(receive_loop(
        handle.clone(),
        name.clone(),
        leading,
        wake,
        url_tx,
    ));
    tokio::spawn(delete_loop(handle, name, url_rx));
}

async fn wait_leading(leading: &mut Option<watch::Receiver<bool>>) -> bool {
    match leading {
        None => true,
        Some(l) => l.wait_for(|v| *v).await.is_ok(),
    }
}

async fn receive_loop(
    handle: AwsHandle,
    name: String,
    mut leading: Option<watch::Receiver<bool>>,
    wake: Arc<Notify>,
    url_tx: watch::Sender<Option<String>>,
) {
    let sqs = handle.clients.sqs.clone();
    let mut backoff = BACKOFF_FIRST;
    let url = loop {
        if !wait_leading(&mut leading).await {
            return;
        }
        match sqs.get_queue_url().queue_name(&name).send().await {
            Ok(out) => match out.queue_url {
                Some(url) => break url,
                None => tracing::warn!("interruption queue {name}: GetQueueUrl answered no URL"),
            },
            Err(e) => tracing::warn!(
                "interruption queue {name}: {}; retrying in {} s",
                super::sdk_error("GetQueueUrl", e).0,
                backoff.as_secs()
            ),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_CAP);
    };
    tracing::info!("watching interruption queue {name} ({url})");
    let _ = url_tx.send(Some(url.clone()));
    backoff = BACKOFF_FIRST;
    loop {
        if !wait_leading(&mut leading).await {
            return;
        }
        let received = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(MAX_MESSAGES)
            .wait_time_seconds(WAIT_SECONDS)
            .visibility_timeout(VISIBILITY_SECONDS)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await;
        let messages = match received {
            Ok(out) => out.messages.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(
                    "interruption queue {name}: {}; retrying in {} s",
                    super::sdk_error("ReceiveMessage", e).0,
                    backoff.as_secs()
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_CAP);
                continue;
            }
        };
        backoff = BACKOFF_FIRST;
        let (notices, to_delete) = {
            let mut inbox = handle.inbox();
            let notices = messages
                .iter()
                .fold(false, |any, m| inbox.read(&name, m) | any);
            (notices, !inbox.done.is_empty())
        };
        if notices {
            wake.notify_one();
        }
        if to_delete {
            handle.shared.acked.notify_one();
        }
    }
}

/// Deletes handled messages as soon as they are handled.
async fn delete_loop(handle: AwsHandle, name: String, mut url: watch::Receiver<Option<String>>) {
    let Ok(url) = url.wait_for(Option::is_some).await.map(|u| u.clone()) else {
        return;
    };
    let Some(url) = url else { return };
    let sqs = handle.clients.sqs.clone();
    loop {
        handle.shared.acked.notified().await;
        let done = std::mem::take(&mut handle.inbox().done);
        for p in done {
            match sqs
                .delete_message()
                .queue_url(&url)
                .receipt_handle(&p.receipt)
                .send()
                .await
            {
                Ok(_) => {
                    INTERRUPTION.deleted();
                    if let Some(t) = p.time {
                        let secs = (Utc::now() - t).num_milliseconds() as f64 / 1000.0;
                        INTERRUPTION.handled_after(secs);
                    }
                }
                // It comes back after its visibility timeout and is handled again,
                // which changes nothing for a NodeClaim already deleting.
                Err(e) => tracing::warn!(
                    "interruption queue {name}: {}",
                    super::sdk_error("DeleteMessage", e).0
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::InterruptionKind;

    fn sqs_message(id: &str, receipt: &str, body: &str) -> aws_sdk_sqs::types::Message {
        aws_sdk_sqs::types::Message::builder()
            .message_id(id)
            .receipt_handle(receipt)
            .body(body)
            .build()
    }

    fn spot(instance: &str) -> String {
        format!(
            r#"{{"version":"0","id":"e1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-12-04T10:00:00Z","detail":{{"instance-id":"{instance}","instance-action":"terminate"}}}}"#
        )
    }

    fn receipts(done: &[Pending]) -> Vec<&str> {
        done.iter().map(|p| p.receipt.as_str()).collect()
    }

    #[test]
    fn a_message_is_deleted_only_after_the_controller_handled_its_notices() {
        let mut inbox = Inbox::default();
        assert!(inbox.read("q", &sqs_message("m1", "r1", &spot("i-0abc"))));
        assert!(inbox.done.is_empty(), "not before it is handled");
        let notices = inbox.take();
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].instance, "i-0abc");
        assert_eq!(notices[0].kind, InterruptionKind::SpotInterrupted);
        assert!(inbox.take().is_empty(), "handed out once");
        assert!(inbox.done.is_empty());
        assert!(inbox.handled(&notices));
        assert_eq!(receipts(&inbox.done), ["r1"]);
        assert!(inbox.in_flight.is_empty());
    }

    #[test]
    fn a_message_seen_again_before_its_deletion_is_not_handed_out_twice_and_deleted_by_its_newest_receipt()
     {
        let mut inbox = Inbox::default();
        assert!(inbox.read("q", &sqs_message("m1", "r1", &spot("i-0abc"))));
        let notices = inbox.take();
        // Its visibility timed out and it was received again.
        assert!(!inbox.read("q", &sqs_message("m1", "r2", &spot("i-0abc"))));
        assert!(inbox.take().is_empty());
        inbox.handled(&notices);
        assert_eq!(receipts(&inbox.done), ["r2"]);
    }

    #[test]
    fn messages_nothing_acts_on_and_malformed_ones_are_deleted_at_once() {
        let mut inbox = Inbox::default();
        let unknown = r#"{"version":"0","id":"e2","detail-type":"EC2 Instance Launch Successful","source":"aws.autoscaling","detail":{}}"#;
        assert!(!inbox.read("q", &sqs_message("m1", "r1", "{broken")));
        assert!(!inbox.read("q", &sqs_message("m2", "r2", unknown)));
        assert!(!inbox.read("q", &sqs_message("m3", "r3", "")));
        assert!(inbox.take().is_empty());
        assert_eq!(receipts(&inbox.done), ["r1", "r2", "r3"]);
        assert!(
            inbox.done[0].time.is_none(),
            "a malformed message is not timed"
        );
        assert!(inbox.in_flight.is_empty());
    }

    #[test]
    fn a_health_event_for_several_instances_is_one_message_to_delete() {
        let mut inbox = Inbox::default();
        let body = r#"{"version":"0","id":"e3","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"i-2"}]}}"#;
        assert!(inbox.read("q", &sqs_message("m1", "r1", body)));
        let notices = inbox.take();
        assert_eq!(notices.len(), 2);
        assert!(
            notices
                .iter()
                .all(|n| n.kind == InterruptionKind::ScheduledChange)
        );
        inbox.handled(&notices);
        assert_eq!(receipts(&inbox.done), ["r1"]);
    }
}
