//! Leader election on a `coordination.k8s.io/v1` Lease, speaking the protocol of client-go's
//! `leaderelection` package (which upstream Karpenter uses through controller-runtime), so
//! that two replicas of the headless controller never act at once and any client-go
//! candidate on the same Lease agrees with ours on who leads.
//!
//! The protocol, and why each rule is there:
//!
//! - The Lease's spec is the election record: `holderIdentity`, `leaseDurationSeconds`,
//!   `acquireTime`, `renewTime` (MicroTime) and `leaseTransitions`, written as client-go
//!   writes them.
//! - A candidate takes the lease when it does not exist, names nobody (it was released), or
//!   has not changed for `leaseDurationSeconds` *on the candidate's own clock, counted from
//!   when it first saw that version of the record*. `renewTime` is written for people and
//!   tools but never compared with the local clock, so clock skew between nodes cannot make a
//!   live leader look expired.
//! - Every write is a replace carrying the resourceVersion that was read: of two candidates
//!   racing for an expired lease, the API server lets one through and answers 409 Conflict
//!   to the other, which then reads the winner's record and waits.
//! - The leader renews every `retry_period`. It stops leading as soon as it has gone
//!   `renew_deadline` without a successful renewal (counted from when the last successful
//!   write of the record was answered, as client-go counts: a slow acquire under load does
//!   not eat into its first term), or as soon as it reads another holder in the record.
//!   Others count `lease_duration` from when they first read that record, which is never
//!   before it was written; because `renew_deadline < lease_duration`, the leader has
//!   stopped before any other candidate can consider the lease expired.
//! - On graceful shutdown the holder releases the lease (client-go's `ReleaseOnCancel`):
//!   holder cleared, `leaseDurationSeconds: 1`, so a standby takes over at its next retry
//!   instead of waiting out the lease.
//!
//! [`verdict`] is the decision "given this record and when I first saw it, may I take it?",
//! free of I/O; [`LeaderElector`] runs the protocol against the API server.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// The Lease the headless controller elects its leader on, in its own namespace.
pub const DEFAULT_LEASE_NAME: &str = crate::api::protocol::LEASE;

/// client-go's `JitterFactor`: a candidate waits `retry_period` plus up to this much more
/// of it between attempts, so candidates that started together do not keep colliding.
const JITTER: f64 = 1.2;

/// The election's timing. The defaults are client-go's (and so upstream Karpenter's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a record that stopped changing keeps other candidates away. Whole seconds:
    /// the Lease stores `leaseDurationSeconds`.
    pub lease_duration: Duration,
    /// How long the leader keeps acting without a successful renewal.
    pub renew_deadline: Duration,
    /// How often the leader renews and candidates retry.
    pub retry_period: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseConfig {
    /// The rules client-go enforces, for the same reasons: a leader must stop acting before
    /// others may take over, and must have room for at least one retry before it stops.
    pub fn validate(&self) -> Result<(), LeaseError> {
        let bad = |why: String| Err(LeaseError::Config(why));
        if self.lease_duration.is_zero() || self.lease_duration.subsec_nanos() != 0 {
            return bad(format!(
                "the lease duration must be a whole number of seconds (the Lease stores \
                 seconds), not {:?}",
                self.lease_duration
            ));
        }
        if self.retry_period.is_zero() {
            return bad("the retry period must be longer than zero".into());
        }
        if self.renew_deadline >= self.lease_duration {
            return bad(format!(
                "the renew deadline ({:?}) must be shorter than the lease duration ({:?}), or \
                 a leader could still act after the others took over",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER * self.retry_period.as_secs_f64() {
            return bad(format!(
                "the renew deadline ({:?}) must exceed {JITTER} x the retry period ({:?}), \
                 leaving room for a retry",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }
}

/// Why an election cannot start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error("leader election: {0}")]
    Config(String),
}

/// What a candidate may do with the lease as it last read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The record names this candidate: renew it (acquireTime and transitions kept). This
    /// holds even if the record looks expired: nobody else wrote it since, or its
    /// resourceVersion would have changed the holder.
    Renew,
    /// Nobody holds it (absent, released) or the holder's record has not changed for its
    /// lease duration: take it (transitions + 1).
    Acquire,
    /// Someone else holds it, for at least `expires_in` more unless it renews.
    HeldBy {
        holder: String,
        expires_in: Duration,
    },
}

/// Decides what `identity` may do with a lease whose record (`spec`) it first saw, in this
/// form, at `observed_at`, at `now` on the same local clock. An absent spec is a lease
/// nobody holds.
pub fn verdict(
    spec: Option<&LeaseSpec>,
    identity: &str,
    observed_at: Instant,
    now: Instant,
) -> Verdict {
    let holder = spec
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or("");
    if holder.is_empty() {
        return Verdict::Acquire;
    }
    if holder == identity {
        return Verdict::Renew;
    }
    let seconds = spec.and_then(|s| s.lease_duration_seconds).unwrap_or(0);
    let expires = observed_at + Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    if expires > now {
        Verdict::HeldBy {
            holder: holder.to_string(),
            expires_in: expires - now,
        }
    } else {
        Verdict::Acquire
    }
}

/// The record a holder writes when it creates the lease (`old` is `None`), renews it
/// (`Verdict::Renew`) or takes it over (`Verdict::Acquire`). As client-go counts, a new
/// lease starts at zero transitions and every takeover adds one. Fields client-go does not
/// manage (strategy, preferredHolder) are kept as they were.
pub fn claimed(
    old: Option<&LeaseSpec>,
    renewing: bool,
    identity: &str,
    config: &LeaseConfig,
    now: MicroTime,
) -> LeaseSpec {
    let (old, existed) = (old.cloned().unwrap_or_default(), old.is_some());
    let transitions = old.lease_transitions.unwrap_or(0);
    let (acquire_time, lease_transitions) = if renewing {
        (old.acquire_time.clone().or(Some(now.clone())), transitions)
    } else if existed {
        (Some(now.clone()), transitions.saturating_add(1))
    } else {
        (Some(now.clone()), 0)
    };
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(
            i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX),
        ),
        acquire_time,
        renew_time: Some(now),
        lease_transitions: Some(lease_transitions),
        ..old
    }
}

/// The record a holder writes when it lets go (client-go's `release`): no holder, a
/// one-second duration, so any candidate takes the lease at once.
pub fn released(old: Option<&LeaseSpec>, now: MicroTime) -> LeaseSpec {
    let old = old.cloned().unwrap_or_default();
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        lease_transitions: Some(old.lease_transitions.unwrap_or(0)),
        ..old
    }
}

/// A unique candidate name: the pod's name (`POD_NAME` from the downward API, else
/// `HOSTNAME`, which is the pod name in a pod) and a random suffix, so a restarted container
/// in the same pod is a new candidate and never mistakes its predecessor's record for its
/// own.
pub fn default_identity() -> String {
    let host = ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|h| !h.is_empty())
        .unwrap_or_else(|| "karpenter-tui".to_string());
    format!("{host}_{:016x}", fastrand::u64(..))
}

fn micro_now() -> MicroTime {
    let micros = chrono::Utc::now().timestamp_micros();
    MicroTime(k8s_openapi::jiff::Timestamp::from_microsecond(micros).unwrap_or_default())
}

fn holder_of(lease: &Lease) -> &str {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or("")
}

/// What one attempt found.
enum Attempt {
    /// We hold the lease, freshly written.
    Held,
    /// Someone else holds it and it has not expired.
    HeldBy(String),
}

/// One candidate in the election. Build it with [`LeaderElector::new`], take a receiver
/// with [`LeaderElector::subscribe`], then drive it with [`LeaderElector::run`].
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    namespace: String,
    identity: String,
    config: LeaseConfig,
    leader: watch::Sender<bool>,
    /// The holder named by the record as last read or written ("" when released).
    holder: watch::Sender<String>,
    /// The lease as last read or written: its resourceVersion makes the next write
    /// conditional.
    lease: Option<Lease>,
    /// When `lease`'s record was first seen in its current form (local clock).
    observed_at: Instant,
    /// The last error logged at warn level, so a lasting outage logs once, not every retry.
    last_error: Option<String>,
}

impl LeaderElector {
    /// A candidate for the Lease `namespace/name`. Fails if `config` breaks client-go's
    /// timing rules or `identity` is empty (an empty holder means "released").
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: impl Into<String>,
        config: LeaseConfig,
    ) -> Result<LeaderElector, LeaseError> {
        config.validate()?;
        let identity = identity.into();
        if identity.is_empty() {
            return Err(LeaseError::Config(
                "the candidate identity must not be empty".into(),
            ));
        }
        let (leader, _) = watch::channel(false);
        let (holder, _) = watch::channel(String::new());
        Ok(LeaderElector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            namespace: namespace.to_string(),
            identity,
            config,
            leader,
            holder,
            lease: None,
            observed_at: Instant::now(),
            last_error: None,
        })
    }

    /// The name this candidate writes into `holderIdentity`.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// "Am I the leader now?": true from the moment the lease is ours, false as soon as the
    /// elector can no longer vouch for it. The controller acts only while it reads true.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leader.subscribe()
    }

    /// Who holds the lease as this candidate last read it: what a standby tells its
    /// operator it is waiting for.
    pub fn holder(&self) -> watch::Receiver<String> {
        self.holder.subscribe()
    }

    /// The Lease's `namespace/name`.
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Runs the election until `shutdown` completes: acquire, renew, step down when renewal
    /// fails, and compete again. After a step-down it keeps competing, so a caller that
    /// rebuilds its state on every `true` can keep running; one that prefers
    /// controller-runtime's behaviour exits on the first `false` after a `true`.
    ///
    /// On shutdown it publishes `false` and then releases the lease if the record names it.
    /// Complete `shutdown` only once the work the lease guards has stopped: from the release
    /// on, another replica may start at once.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        tracing::info!(
            lease = %self.name, namespace = %self.namespace, identity = %self.identity,
            "leader election: competing for the lease"
        );
        loop {
            // Candidate: try at once, then every retry period (jittered).
            let mut since = loop {
                let attempt = tokio::select! {
                    _ = &mut shutdown => None,
                    a = tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()) => Some(a),
                };
                match attempt {
                    None => return self.release().await,
                    Some(Ok(Ok(Attempt::Held))) => break Instant::now(),
                    Some(Ok(Ok(Attempt::HeldBy(_)))) => {}
                    Some(Ok(Err(e))) => self.log_error(&e),
                    Some(Err(_)) => self.log_timeout(),
                }
                let pause = self
                    .config
                    .retry_period
                    .mul_f64(1.0 + JITTER * fastrand::f64());
                tokio::select! {
                    _ = &mut shutdown => return self.release().await,
                    _ = tokio::time::sleep(pause) => {}
                }
            };
            self.leader.send_replace(true);
            tracing::info!(
                lease = %self.name, identity = %self.identity,
                "leader election: acquired the lease, leading"
            );

            // Leader: renew every retry period; `since` is when the last successful write
            // was answered, and the renew deadline counts from there.
            let lost = loop {
                tokio::select! {
                    _ = &mut shutdown => {
                        self.leader.send_replace(false);
                        return self.release().await;
                    }
                    _ = tokio::time::sleep(self.config.retry_period) => {}
                }
                let deadline = since + self.config.renew_deadline;
                if Instant::now() >= deadline {
                    break "no successful renewal within the renew deadline".to_string();
                }
                let attempt = tokio::select! {
                    _ = &mut shutdown => None,
                    a = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => Some(a),
                };
                match attempt {
                    None => {
                        self.leader.send_replace(false);
                        return self.release().await;
                    }
                    Some(Ok(Ok(Attempt::Held))) => {
                        since = Instant::now();
                        self.last_error = None;
                    }
                    Some(Ok(Ok(Attempt::HeldBy(holder)))) => {
                        break format!("the lease is held by {holder} now");
                    }
                    Some(Ok(Err(e))) => self.log_error(&e),
                    Some(Err(_)) => {
                        break "no successful renewal within the renew deadline".to_string();
                    }
                }
            };
            self.leader.send_replace(false);
            tracing::warn!(
                lease = %self.name, identity = %self.identity, reason = %lost,
                "leader election: lost the lease, stopped leading"
            );
        }
    }

    /// client-go's `tryAcquireOrRenew`: renew optimistically with the version we last
    /// wrote; otherwise read the lease and create, renew or take it as [`verdict`] allows.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let pp = PostParams::default();
        if let Some(lease) = &self.lease
            && holder_of(lease) == self.identity
            && Instant::now() < self.observed_at + self.config.lease_duration
        {
            let spec = claimed(
                lease.spec.as_ref(),
                true,
                &self.identity,
                &self.config,
                micro_now(),
            );
            let next = Lease {
                metadata: lease.metadata.clone(),
                spec: Some(spec),
            };
            match self.api.replace(&self.name, &pp, &next).await {
                Ok(written) => {
                    self.observe(written);
                    return Ok(Attempt::Held);
                }
                Err(e) => tracing::debug!(
                    lease = %self.name, error = %e,
                    "leader election: optimistic renewal failed, reading the lease"
                ),
            }
        }

        let Some(current) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(claimed(
                    None,
                    false,
                    &self.identity,
                    &self.config,
                    micro_now(),
                )),
            };
            let created = self.api.create(&pp, &lease).await?;
            self.observe(created);
            return Ok(Attempt::Held);
        };
        self.observe(current.clone());
        let renewing = match verdict(
            current.spec.as_ref(),
            &self.identity,
            self.observed_at,
            Instant::now(),
        ) {
            Verdict::HeldBy { holder, expires_in } => {
                tracing::debug!(
                    lease = %self.name, %holder, ?expires_in,
                    "leader election: held by another candidate"
                );
                return Ok(Attempt::HeldBy(holder));
            }
            Verdict::Renew => true,
            Verdict::Acquire => false,
        };
        let next = Lease {
            metadata: current.metadata.clone(),
            spec: Some(claimed(
                current.spec.as_ref(),
                renewing,
                &self.identity,
                &self.config,
                micro_now(),
            )),
        };
        let written = self.api.replace(&self.name, &pp, &next).await?;
        self.observe(written);
        Ok(Attempt::Held)
    }

    /// Remembers the lease; restarts the expiry clock only when its record changed (a label
    /// edit bumps the resourceVersion but is no renewal).
    fn observe(&mut self, lease: Lease) {
        let before = self.lease.as_ref().map(|l| l.spec.clone());
        if before.as_ref() != Some(&lease.spec) {
            self.observed_at = Instant::now();
            let was = self.lease.as_ref().map(holder_of).unwrap_or("");
            let now = holder_of(&lease);
            if was != now && now != self.identity {
                tracing::info!(
                    lease = %self.name, holder = %now,
                    "leader election: the lease changed hands"
                );
            }
        }
        let holder = holder_of(&lease).to_string();
        self.holder.send_if_modified(|h| {
            let changed = *h != holder;
            *h = holder;
            changed
        });
        self.lease = Some(lease);
    }

    /// Lets go of the lease if the record names us, conditionally on the version just read
    /// so a new leader's record is never overwritten. Bounded by the renew deadline: a
    /// shutdown does not hang on an unreachable API server.
    async fn release(&mut self) {
        let attempt = async {
            let Some(current) = self.api.get_opt(&self.name).await? else {
                return Ok(false);
            };
            if holder_of(&current) != self.identity {
                return Ok(false);
            }
            let next = Lease {
                metadata: current.metadata.clone(),
                spec: Some(released(current.spec.as_ref(), micro_now())),
            };
            self.api
                .replace(&self.name, &PostParams::default(), &next)
                .await
                .map(|_| true)
        };
        match tokio::time::timeout(self.config.renew_deadline, attempt).await {
            Ok(Ok(true)) => tracing::info!(
                lease = %self.name, identity = %self.identity,
                "leader election: released the lease"
            ),
            Ok(Ok(false)) => tracing::debug!(
                lease = %self.name, "leader election: not holding the lease, nothing to release"
            ),
            Ok(Err(e)) => tracing::warn!(
                lease = %self.name, error = %e,
                "leader election: could not release the lease; it expires on its own"
            ),
            Err(_) => tracing::warn!(
                lease = %self.name,
                "leader election: releasing the lease timed out; it expires on its own"
            ),
        }
    }

    fn log_error(&mut self, e: &kube::Error) {
        let text = super::reach::causes(e);
        if self.last_error.as_deref() == Some(text.as_str()) {
            tracing::debug!(lease = %self.name, error = %text, "leader election: attempt failed");
        } else {
            tracing::warn!(lease = %self.name, error = %text, "leader election: attempt failed");
            self.last_error = Some(text);
        }
    }

    fn log_timeout(&mut self) {
        let text = "the API server did not answer within the renew deadline";
        if self.last_error.as_deref() != Some(text) {
            tracing::warn!(lease = %self.name, "leader election: {text}");
            self.last_error = Some(text.to_string());
        }
    }
}

pub mod holding;

#[cfg(test)]
mod tests;
