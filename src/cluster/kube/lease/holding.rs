//! Who holds a controller's Lease, read once, from outside the election: whether upstream
//! Karpenter is running in the cluster (so that `run` and `controller` do not act beside
//! it on the same NodeClaims) and whether our own controller is (so that `attach` talks
//! the approval protocol to it).
//!
//! Upstream Karpenter elects its leader on a Lease named by `--leader-election-name`
//! (default `karpenter-leader-election`) in `--leader-election-namespace`, which defaults
//! to the namespace it runs in (kubernetes-sigs/karpenter v1.14.1,
//! pkg/operator/options/options.go and pkg/operator/operator.go; the AWS provider's chart,
//! charts/karpenter/templates/role.yaml, grants exactly that name in the release's
//! namespace). That namespace is the operator's choice (kube-system in the getting-started
//! guide, often `karpenter`), so the Lease is looked up by name in every namespace.
//!
//! Unlike the election itself ([`super::verdict`]), which never compares `renewTime` with
//! the local clock, this one-off check has no earlier sighting to count from: a record
//! whose `renewTime` is older than its `leaseDurationSeconds` is taken as stale, the
//! controller that wrote it gone. Clock skew can only make a live lease look stale by the
//! skew, which the operator sees in the message when it blocks.

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, ListParams};

/// Upstream Karpenter's default leader election Lease name.
pub const UPSTREAM_LEASE: &str = "karpenter-leader-election";

/// The namespaces upstream Karpenter is usually installed in, read one by one when the
/// cluster-wide lookup is forbidden.
const USUAL_NAMESPACES: [&str; 2] = ["kube-system", "karpenter"];

/// A Lease somebody holds, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    pub namespace: String,
    pub name: String,
    pub holder: String,
    pub renew_time: Option<DateTime<Utc>>,
    pub lease_duration_seconds: Option<i32>,
}

impl Holding {
    /// The holder of `lease`, if it names one (an empty holder is a released lease).
    pub fn of(lease: &Lease) -> Option<Holding> {
        let spec = lease.spec.as_ref()?;
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
        Some(Holding {
            namespace: lease.metadata.namespace.clone().unwrap_or_default(),
            name: lease.metadata.name.clone().unwrap_or_default(),
            holder: holder.to_string(),
            renew_time: renew_time(spec),
            lease_duration_seconds: spec.lease_duration_seconds,
        })
    }

    /// Whether the holder renewed within its lease duration before `now`: a record not
    /// renewed for that long belongs to a controller that stopped without releasing it.
    pub fn fresh(&self, now: DateTime<Utc>) -> bool {
        match (self.renew_time, self.lease_duration_seconds) {
            (Some(renewed), Some(seconds)) if seconds > 0 => {
                renewed + chrono::Duration::seconds(i64::from(seconds)) > now
            }
            _ => false,
        }
    }

    /// "kube-system/karpenter-leader-election, held by X, renewed T (15 s lease)".
    pub fn describe(&self) -> String {
        let renewed = self
            .renew_time
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_else(|| "never".into());
        let duration = self
            .lease_duration_seconds
            .map(|s| format!(" ({s} s lease)"))
            .unwrap_or_default();
        format!(
            "{}/{}, held by {}, renewed {renewed}{duration}",
            self.namespace, self.name, self.holder
        )
    }
}

fn renew_time(spec: &LeaseSpec) -> Option<DateTime<Utc>> {
    let micros = spec.renew_time.as_ref()?.0.as_microsecond();
    DateTime::from_timestamp_micros(micros)
}

/// The leases named `name` that somebody holds, in any namespace: one list with a name
/// field selector (which RBAC can grant for that one name); where that is forbidden, a
/// get in `own_namespace` and the usual namespaces.
pub async fn held(
    client: &kube::Client,
    name: &str,
    own_namespace: &str,
) -> Result<Vec<Holding>, kube::Error> {
    let all: Api<Lease> = Api::all(client.clone());
    let selector = ListParams::default().fields(&format!("metadata.name={name}"));
    let leases = match all.list(&selector).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 403 => {
            let mut found = Vec::new();
            let mut namespaces = vec![own_namespace];
            namespaces.extend(USUAL_NAMESPACES.iter().filter(|n| **n != own_namespace));
            for ns in namespaces {
                let api: Api<Lease> = Api::namespaced(client.clone(), ns);
                match api.get_opt(name).await {
                    Ok(Some(lease)) => found.push(lease),
                    Ok(None) => {}
                    Err(kube::Error::Api(s)) if s.code == 403 => {}
                    Err(e) => return Err(e),
                }
            }
            found
        }
        Err(e) => return Err(e),
    };
    Ok(leases
        .iter()
        .filter(|l| l.metadata.name.as_deref() == Some(name))
        .filter_map(Holding::of)
        .collect())
}

/// Why `run` or `controller` must not start: upstream Karpenter holds its Lease, renewed
/// within its duration. `None` when every upstream Lease found is released or stale.
pub fn upstream_refusal(found: &[Holding], now: DateTime<Utc>) -> Option<String> {
    let live: Vec<String> = found
        .iter()
        .filter(|h| h.fresh(now))
        .map(Holding::describe)
        .collect();
    if live.is_empty() {
        return None;
    }
    Some(format!(
        "upstream Karpenter is running here: its Lease {} (now {}). Two controllers \
         would act on the same NodeClaims; stop it first (scale its Deployment to 0), or \
         pass --force to start anyway",
        live.join("; "),
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    fn lease(holder: &str, renewed: i64, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(UPSTREAM_LEASE.into()),
                namespace: Some("kube-system".into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(seconds),
                renew_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap(),
                )),
                ..LeaseSpec::default()
            }),
        }
    }

    fn at(second: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(second, 0).unwrap()
    }

    #[test]
    fn a_lease_renewed_within_its_duration_blocks_and_is_named() {
        let h = Holding::of(&lease("karpenter-5f7c_a1b2", 1000, 15)).unwrap();
        assert!(h.fresh(at(1014)));
        let why = upstream_refusal(&[h], at(1014)).expect("blocks");
        assert!(
            why.contains("kube-system/karpenter-leader-election")
                && why.contains("held by karpenter-5f7c_a1b2")
                && why.contains("renewed 1970-01-01T00:16:40Z")
                && why.contains("--force"),
            "{why}"
        );
    }

    #[test]
    fn a_stale_or_released_lease_does_not_block() {
        let stale = Holding::of(&lease("karpenter-5f7c_a1b2", 1000, 15)).unwrap();
        assert!(!stale.fresh(at(1015)));
        assert_eq!(upstream_refusal(&[stale], at(2000)), None);
        assert_eq!(Holding::of(&lease("", 1000, 15)), None);
        let mut no_renewal = lease("x", 1000, 15);
        no_renewal.spec.as_mut().unwrap().renew_time = None;
        assert!(!Holding::of(&no_renewal).unwrap().fresh(at(1000)));
    }
}
