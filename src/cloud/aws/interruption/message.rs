//! The EventBridge events an interruption queue carries, read as upstream's parsers read
//! them (`pkg/controllers/interruption/parser.go` and `messages/*/parser.go` in the AWS
//! provider). The envelope's `version`, `source` and `detail-type` choose the parser:
//!
//! | source | detail-type | kind |
//! |---|---|---|
//! | `aws.ec2` | `EC2 Spot Instance Interruption Warning` | spot_interrupted |
//! | `aws.ec2` | `EC2 Instance Rebalance Recommendation` | rebalance_recommendation |
//! | `aws.ec2` | `EC2 Instance State-change Notification` | instance_stopped (stopping, stopped), instance_terminated (shutting-down, terminated) |
//! | `aws.ec2` | `EC2 Capacity Reservation Instance Interruption Warning` | capacity_reservation_interrupted |
//! | `aws.health` | `AWS Health Event` | scheduled_change (service EC2, category scheduledChange) |
//!
//! all at `version` "0". Any other envelope, another state, or another health event is a
//! no-op: nothing to do, and the message is deleted. A body that is not such JSON is an
//! error naming what is wrong; it is deleted too, never retried.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::cloud::InterruptionKind;

/// A parsed message: what it says about which instances.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The event's id (the envelope's `id`).
    pub id: String,
    /// `None`: nothing to act on (upstream's `no_op` kind).
    pub kind: Option<InterruptionKind>,
    /// EC2 instance ids the event names.
    pub instances: Vec<String>,
    /// When the event happened (the envelope's `time`).
    pub time: Option<DateTime<Utc>>,
}

impl Message {
    /// The kind's name for `karpenter_interruption_received_messages_total`.
    pub fn type_label(&self) -> &'static str {
        self.kind.map_or("no_op", InterruptionKind::as_str)
    }
}

/// The EventBridge envelope (upstream `messages.Metadata`). Fields absent are empty, as
/// Go's decoder leaves them; fields of the wrong type are errors.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Envelope {
    version: String,
    source: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    id: String,
    time: Option<DateTime<Utc>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InstanceDetail {
    #[serde(rename = "instance-id")]
    instance_id: String,
    state: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct HealthDetail {
    service: String,
    #[serde(rename = "eventTypeCategory")]
    category: String,
    #[serde(rename = "affectedEntities")]
    affected: Vec<AffectedEntity>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct AffectedEntity {
    #[serde(rename = "entityValue")]
    value: String,
}

#[derive(Deserialize)]
struct WithDetail<D> {
    #[serde(default)]
    detail: Option<D>,
}

fn detail<D: DeserializeOwned + Default>(body: &str, schema: &str) -> Result<D, String> {
    serde_json::from_str::<WithDetail<D>>(body)
        .map(|w| w.detail.unwrap_or_default())
        .map_err(|e| format!("not an {schema} event: {e}"))
}

/// Reads one message body.
pub fn parse(body: &str) -> Result<Message, String> {
    let mut out = Message {
        id: String::new(),
        kind: None,
        instances: Vec::new(),
        time: None,
    };
    // Upstream: an empty body is a no-op, not an error.
    if body.is_empty() {
        return Ok(out);
    }
    let env: Envelope = serde_json::from_str(body).map_err(|e| {
        format!("not an EventBridge event (JSON with version, source, detail-type): {e}")
    })?;
    out.id = env.id;
    out.time = env.time;
    if env.version != "0" {
        return Ok(out);
    }
    let single = |d: InstanceDetail| vec![d.instance_id];
    match (env.source.as_str(), env.detail_type.as_str()) {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => {
            let d: InstanceDetail = detail(body, "EC2SpotInstanceInterruptionWarning")?;
            out.kind = Some(InterruptionKind::SpotInterrupted);
            out.instances = single(d);
        }
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            let d: InstanceDetail = detail(body, "EC2InstanceRebalanceRecommendation")?;
            out.kind = Some(InterruptionKind::RebalanceRecommendation);
            out.instances = single(d);
        }
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            let d: InstanceDetail =
                detail(body, "EC2CapacityReservationInstanceInterruptionWarning")?;
            out.kind = Some(InterruptionKind::CapacityReservationInterrupted);
            out.instances = single(d);
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let d: InstanceDetail = detail(body, "EC2InstanceStateChangeNotification")?;
            // Upstream accepts these states in any case; it then names stopping and
            // stopped (lower case) instance_stopped and every other accepted state
            // instance_terminated. Here the case is ignored for both.
            out.kind = match d.state.to_ascii_lowercase().as_str() {
                "stopping" | "stopped" => Some(InterruptionKind::InstanceStopped),
                "shutting-down" | "terminated" => Some(InterruptionKind::InstanceTerminated),
                _ => None,
            };
            if out.kind.is_some() {
                out.instances = single(d);
            }
        }
        ("aws.health", "AWS Health Event") => {
            let d: HealthDetail = detail(body, "AWSHealthEvent")?;
            if d.service == "EC2" && d.category == "scheduledChange" {
                out.kind = Some(InterruptionKind::ScheduledChange);
                out.instances = d.affected.into_iter().map(|a| a.value).collect();
            }
        }
        _ => {}
    }
    out.instances.retain(|i| !i.is_empty());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(source: &str, detail_type: &str, detail: &str) -> String {
        format!(
            r#"{{"version":"0","id":"7c3c3b1f-0000-4000-8000-000000000001","detail-type":"{detail_type}","source":"{source}","account":"123456789012","time":"2026-12-04T10:00:00Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1a:instance/i-0abc"],"detail":{detail}}}"#
        )
    }

    #[test]
    fn each_event_upstream_reads_becomes_its_kind_with_its_instances() {
        let cases = [
            (
                event(
                    "aws.ec2",
                    "EC2 Spot Instance Interruption Warning",
                    r#"{"instance-id":"i-0abc","instance-action":"terminate"}"#,
                ),
                Some(InterruptionKind::SpotInterrupted),
                vec!["i-0abc"],
            ),
            (
                event(
                    "aws.ec2",
                    "EC2 Instance Rebalance Recommendation",
                    r#"{"instance-id":"i-0abc"}"#,
                ),
                Some(InterruptionKind::RebalanceRecommendation),
                vec!["i-0abc"],
            ),
            (
                event(
                    "aws.ec2",
                    "EC2 Instance State-change Notification",
                    r#"{"instance-id":"i-0abc","state":"stopping"}"#,
                ),
                Some(InterruptionKind::InstanceStopped),
                vec!["i-0abc"],
            ),
            (
                event(
                    "aws.ec2",
                    "EC2 Instance State-change Notification",
                    r#"{"instance-id":"i-0abc","state":"shutting-down"}"#,
                ),
                Some(InterruptionKind::InstanceTerminated),
                vec!["i-0abc"],
            ),
            (
                event(
                    "aws.ec2",
                    "EC2 Instance State-change Notification",
                    r#"{"instance-id":"i-0abc","state":"terminated"}"#,
                ),
                Some(InterruptionKind::InstanceTerminated),
                vec!["i-0abc"],
            ),
            (
                event(
                    "aws.ec2",
                    "EC2 Capacity Reservation Instance Interruption Warning",
                    r#"{"instance-id":"i-0abc","instance-action":"terminate"}"#,
                ),
                Some(InterruptionKind::CapacityReservationInterrupted),
                vec!["i-0abc"],
            ),
            (
                event(
                    "aws.health",
                    "AWS Health Event",
                    r#"{"eventArn":"arn:aws:health:us-east-1::event/EC2/x","eventTypeCode":"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED","service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-0abc"},{"entityValue":"i-0def"}]}"#,
                ),
                Some(InterruptionKind::ScheduledChange),
                vec!["i-0abc", "i-0def"],
            ),
        ];
        for (body, kind, instances) in cases {
            let m = parse(&body).unwrap();
            assert_eq!(m.kind, kind, "{body}");
            assert_eq!(m.instances, instances, "{body}");
            assert_eq!(m.id, "7c3c3b1f-0000-4000-8000-000000000001");
            assert_eq!(
                m.time.map(|t| t.to_rfc3339()),
                Some("2026-12-04T10:00:00+00:00".into())
            );
        }
    }

    #[test]
    fn events_nobody_acts_on_are_no_ops_not_errors() {
        let no_ops = [
            String::new(),
            event(
                "aws.ec2",
                "EC2 Instance State-change Notification",
                r#"{"instance-id":"i-0abc","state":"running"}"#,
            ),
            event(
                "aws.health",
                "AWS Health Event",
                r#"{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"db-1"}]}"#,
            ),
            event(
                "aws.health",
                "AWS Health Event",
                r#"{"service":"EC2","eventTypeCategory":"issue","affectedEntities":[{"entityValue":"i-0abc"}]}"#,
            ),
            event("aws.autoscaling", "EC2 Instance Launch Successful", "{}"),
            r#"{"hello":"world"}"#.to_string(),
            event(
                "aws.ec2",
                "EC2 Spot Instance Interruption Warning",
                r#"{"instance-id":"i-0abc"}"#,
            )
            .replace(r#""version":"0""#, r#""version":"1""#),
        ];
        for body in no_ops {
            let m = parse(&body).unwrap();
            assert_eq!(m.kind, None, "{body}");
            assert_eq!(m.type_label(), "no_op");
        }
    }

    #[test]
    fn malformed_bodies_are_errors_that_say_what_is_wrong() {
        let e = parse("{not json").unwrap_err();
        assert!(e.contains("not an EventBridge event"), "{e}");
        let e = parse(r#"{"version":0}"#).unwrap_err();
        assert!(e.contains("not an EventBridge event"), "{e}");
        let e = parse(&event(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            r#"{"instance-id":17}"#,
        ))
        .unwrap_err();
        assert!(e.contains("EC2SpotInstanceInterruptionWarning"), "{e}");
        let e = parse(r#"{"version":"0","time":"yesterday"}"#).unwrap_err();
        assert!(e.contains("not an EventBridge event"), "{e}");
    }
}
