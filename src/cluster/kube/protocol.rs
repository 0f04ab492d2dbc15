//! The approval protocol, the attaching console's side: operator actions become API
//! writes, so the API server stays the one source of truth and any number of consoles
//! can attach (docs/attach.md).
//!
//! - With our controller in the cluster, a console writes requests (annotations) that the
//!   controller validates and acts on; pauses are annotations on NodePools (or on the
//!   settings ConfigMap for every pool).
//! - With upstream Karpenter, there is no approval gate to talk to. Approving a delete
//!   deletes the candidate NodeClaims, Karpenter's documented manual path (its
//!   termination controller taints, drains with PDBs respected and terminates); approving
//!   a replace is make-before-break ([`super::replace`]). Pausing sets the NodePool's
//!   budgets to `nodes: "0"` after saving the originals, byte for byte, in an annotation;
//!   resuming puts those exact bytes back.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::api::nodeclaim::NodeClaim;
use crate::api::nodepool::NodePool;
use crate::api::protocol as keys;
use crate::cluster::kube::lease::holding::{self, Holding};

/// Which controller the console attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// karpenter-tui's own controller (its Lease exists): decisions, approvals and pauses
    /// through the protocol.
    Ours,
    /// Upstream Karpenter: its objects, with our engine explaining them.
    Upstream,
}

impl Flavour {
    pub fn label(self) -> &'static str {
        match self {
            Flavour::Ours => "karpenter-tui controller",
            Flavour::Upstream => "upstream Karpenter",
        }
    }
}

/// Finds out what runs the cluster. Our controller (`run` or `controller`) holds its Lease
/// in `namespace`; upstream Karpenter holds its own (lease/holding.rs). A Lease renewed
/// within its duration wins, ours first; a stale one of ours still means our controller
/// (restarting); with neither, the Karpenter CRDs must be served (upstream Karpenter
/// installs them).
pub async fn detect(client: &kube::Client, namespace: &str) -> Result<Flavour, String> {
    let now = chrono::Utc::now();
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let ours = match leases.get_opt(keys::LEASE).await {
        Ok(lease) => lease.as_ref().and_then(Holding::of),
        Err(e) => {
            tracing::debug!("reading Lease {namespace}/{}: {e}", keys::LEASE);
            None
        }
    };
    if ours.as_ref().is_some_and(|h| h.fresh(now)) {
        return Ok(Flavour::Ours);
    }
    match holding::held(client, holding::UPSTREAM_LEASE, namespace).await {
        Ok(upstream) if upstream.iter().any(|h| h.fresh(now)) => return Ok(Flavour::Upstream),
        Ok(_) => {}
        Err(e) => tracing::debug!("looking for upstream Karpenter's Lease: {e}"),
    }
    if ours.is_some() {
        return Ok(Flavour::Ours);
    }
    let pools: Api<NodePool> = Api::all(client.clone());
    match pools.list(&kube::api::ListParams::default().limit(1)).await {
        Ok(_) => Ok(Flavour::Upstream),
        Err(e) => Err(format!(
            "no karpenter-tui controller (Lease {namespace}/{}) and the Karpenter API \
             (nodepools.karpenter.sh/v1) is not served: {e}",
            keys::LEASE
        )),
    }
}

/// The console's writes in attach mode.
#[derive(Clone)]
pub struct Remote {
    pub client: kube::Client,
    /// Where the settings ConfigMap lives.
    pub namespace: String,
    /// Who the console acts as (the kubeconfig user).
    pub actor: String,
    pub flavour: Flavour,
    /// Attached with `--write`: this console may act (it carries on replaces recorded
    /// in the cluster, see [`super::replace`]).
    pub write: bool,
}

fn api_err(what: &str, e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => format!("{what}: forbidden by RBAC: {}", s.message),
        kube::Error::Api(s) => format!("{what}: {} ({})", s.message, s.reason),
        e => format!("{what}: {e}"),
    }
}

/// The pieces of a NodePool's JSON that a budget pause reads, with the budgets kept as
/// the exact text the API server sent.
#[derive(Deserialize)]
struct RawPool<'a> {
    metadata: RawMeta,
    #[serde(borrow, default)]
    spec: Option<RawSpec<'a>>,
}

#[derive(Deserialize)]
struct RawMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct RawSpec<'a> {
    #[serde(borrow, default)]
    disruption: Option<RawDisruption<'a>>,
}

#[derive(Deserialize)]
struct RawDisruption<'a> {
    #[serde(borrow, default)]
    budgets: Option<&'a RawValue>,
}

/// The merge patch that pauses an upstream pool: budgets to zero, originals saved.
/// `raw` is the NodePool's JSON as read.
pub fn budget_pause_patch(raw: &str, actor: &str) -> Result<String, String> {
    let pool: RawPool = serde_json::from_str(raw).map_err(|e| format!("NodePool JSON: {e}"))?;
    if pool
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::SAVED_BUDGETS))
    {
        return Err("already paused (its budgets are saved in an annotation)".into());
    }
    // No budgets field at all is saved as `null`: resuming removes the field again, and
    // Karpenter's default (10%) applies as before.
    let saved = pool
        .spec
        .and_then(|s| s.disruption)
        .and_then(|d| d.budgets)
        .map_or("null".to_string(), |b| b.get().to_string());
    let body = serde_json::json!({
        "metadata": {
            "resourceVersion": pool.metadata.resource_version,
            "annotations": {keys::SAVED_BUDGETS: saved, keys::PAUSED_BY: actor},
        },
        "spec": {"disruption": {"budgets": [{"nodes": "0"}]}},
    });
    Ok(body.to_string())
}

/// The merge patch that resumes an upstream pool: the saved budgets, exactly as saved.
/// Refused when someone changed the budgets during the pause (they are no longer the
/// pause's `nodes: "0"`): putting the saved ones back would silently undo that edit, so
/// the answer shows both and how to keep either.
pub fn budget_resume_patch(raw: &str) -> Result<String, String> {
    let pool: RawPool = serde_json::from_str(raw).map_err(|e| format!("NodePool JSON: {e}"))?;
    let saved = pool
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::SAVED_BUDGETS))
        .ok_or("not paused by a console (no saved budgets)")?;
    let current = pool
        .spec
        .as_ref()
        .and_then(|s| s.disruption.as_ref())
        .and_then(|d| d.budgets)
        .map_or("null", |b| b.get());
    let paused: serde_json::Value = serde_json::json!([{"nodes": "0"}]);
    if serde_json::from_str::<serde_json::Value>(current)
        .ok()
        .as_ref()
        != Some(&paused)
    {
        return Err(format!(
            "its budgets were edited during the pause: now {current}, saved before the              pause {saved}; not overwritten. To keep the edited budgets: kubectl annotate              nodepool NAME {key}- {by}-; to restore the saved ones: put them back with              kubectl edit, then remove the same annotations",
            key = keys::SAVED_BUDGETS,
            by = keys::PAUSED_BY,
        ));
    }
    // The saved text must be JSON; it is spliced in verbatim to keep its bytes.
    let saved = RawValue::from_string(saved.clone())
        .map_err(|e| format!("annotation {}: not JSON: {e}", keys::SAVED_BUDGETS))?;
    let rv = serde_json::to_string(&pool.metadata.resource_version).unwrap_or("null".into());
    Ok(format!(
        r#"{{"metadata":{{"resourceVersion":{rv},"annotations":{{"{}":null,"{}":null}}}},"spec":{{"disruption":{{"budgets":{}}}}}}}"#,
        keys::SAVED_BUDGETS,
        keys::PAUSED_BY,
        saved.get()
    ))
}

impl Remote {
    fn nodeclaims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    /// Approves decision `id` (its command as the console's engine proposed it; the
    /// pools it may create replacements in).
    pub async fn approve(
        &self,
        id: u64,
        command: &crate::engine::disruption::Command,
        pools: &std::collections::BTreeMap<String, NodePool>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<String, String> {
        match self.flavour {
            Flavour::Ours => {
                let claims: Vec<String> = command.nodeclaims().map(str::to_string).collect();
                let claim = self.recorded_claim(id, &claims).await?;
                self.request(&claim, keys::APPROVE, id, None).await?;
                Ok(format!("approval of #{id} sent (on {claim})"))
            }
            Flavour::Upstream => self.replace_upstream(id, command, pools, now).await,
        }
    }

    pub async fn reject(&self, id: u64, claims: &[String], reason: &str) -> Result<String, String> {
        match self.flavour {
            Flavour::Ours => {
                let claim = self.recorded_claim(id, claims).await?;
                self.request(&claim, keys::REJECT, id, Some(reason)).await?;
                Ok(format!("rejection of #{id} sent (on {claim})"))
            }
            Flavour::Upstream => Err(
                "upstream Karpenter has no approval gate to reject in: pause the pool, or \
                 annotate the node karpenter.sh/do-not-disrupt=true"
                    .into(),
            ),
        }
    }

    /// The candidate carrying the controller's record of decision `id`: a request on it
    /// is one the controller will recognise.
    async fn recorded_claim(&self, id: u64, claims: &[String]) -> Result<String, String> {
        let api = self.nodeclaims();
        for c in claims {
            let nc = api
                .get(c)
                .await
                .map_err(|e| api_err(&format!("NodeClaim {c}"), e))?;
            let recorded = nc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::DECISION));
            if recorded.is_some_and(|v| v == &id.to_string()) {
                return Ok(c.clone());
            }
        }
        Err(format!(
            "the controller has not recorded #{id} on {} (it may have been withdrawn or \
             not proposed yet)",
            claims.join(", ")
        ))
    }

    async fn request(
        &self,
        claim: &str,
        key: &str,
        id: u64,
        reason: Option<&str>,
    ) -> Result<(), String> {
        let mut annotations = serde_json::Map::new();
        annotations.insert(key.into(), id.to_string().into());
        annotations.insert(keys::ACTOR.into(), self.actor.clone().into());
        if let Some(r) = reason {
            annotations.insert(keys::REJECT_REASON.into(), r.into());
        }
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        self.nodeclaims()
            .patch(claim, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|e| api_err(&format!("NodeClaim {claim}"), e))
    }

    /// Pauses disruption of one pool, or of all (`pool` None).
    pub async fn pause(&self, pools: &[String], all: bool) -> Result<String, String> {
        match self.flavour {
            Flavour::Ours => {
                if all {
                    self.settings(Some(&self.actor)).await?;
                    return Ok("paused disruption: all".into());
                }
                for p in pools {
                    self.pool_annotation(p, Some(&self.actor)).await?;
                }
                Ok(format!(
                    "paused disruption: nodepool/{}",
                    pools.join(", nodepool/")
                ))
            }
            Flavour::Upstream => {
                let mut done = Vec::new();
                for p in pools {
                    let raw = self.raw_pool(p).await?;
                    let patch = budget_pause_patch(&raw, &self.actor)
                        .map_err(|e| format!("NodePool {p}: {e}"))?;
                    self.patch_raw(p, patch).await?;
                    done.push(p.clone());
                }
                Ok(format!(
                    "budgets of {} set to nodes: \"0\" (originals saved)",
                    done.join(", ")
                ))
            }
        }
    }

    pub async fn resume(&self, pools: &[String], all: bool) -> Result<String, String> {
        match self.flavour {
            Flavour::Ours => {
                if all {
                    self.settings(None).await?;
                    return Ok("resumed disruption: all".into());
                }
                for p in pools {
                    self.pool_annotation(p, None).await?;
                }
                Ok(format!(
                    "resumed disruption: nodepool/{}",
                    pools.join(", nodepool/")
                ))
            }
            Flavour::Upstream => {
                let mut done = Vec::new();
                let mut refused = Vec::new();
                for p in pools {
                    let raw = self.raw_pool(p).await?;
                    let patch = match budget_resume_patch(&raw) {
                        Ok(patch) => patch,
                        Err(e) if e.starts_with("its budgets were edited") => {
                            refused.push(format!("NodePool {p}: {}", e.replace("NAME", p)));
                            continue;
                        }
                        Err(_) if all => continue,
                        Err(_) => return Err(format!("NodePool {p} was not paused by a console")),
                    };
                    self.patch_raw(p, patch).await?;
                    done.push(p.clone());
                }
                if !refused.is_empty() {
                    let restored = if done.is_empty() {
                        String::new()
                    } else {
                        format!("budgets of {} restored; ", done.join(", "))
                    };
                    return Err(format!("{restored}{}", refused.join("; ")));
                }
                Ok(format!("budgets of {} restored", done.join(", ")))
            }
        }
    }

    /// Sets or lifts a pool's pause; either way an earlier pause's note (the circuit
    /// breaker's evidence) goes with the pause it explained.
    async fn pool_annotation(&self, pool: &str, actor: Option<&str>) -> Result<(), String> {
        let patch = serde_json::json!({"metadata": {"annotations": {
            keys::PAUSED: actor,
            keys::PAUSED_NOTE: null,
        }}});
        let api: Api<NodePool> = Api::all(self.client.clone());
        api.patch(pool, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(|e| api_err(&format!("NodePool {pool}"), e))
    }

    async fn settings(&self, actor: Option<&str>) -> Result<(), String> {
        let target = crate::cluster::ObjectRef::Settings;
        let mut annotations = std::collections::BTreeMap::new();
        annotations.insert(keys::PAUSED.to_string(), actor.map(str::to_string));
        super::writes::Writer {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
        }
        .annotate(&target, &annotations)
        .await
        .map_err(|e| e.to_string())
    }

    /// A NodePool's JSON exactly as the API server sends it.
    async fn raw_pool(&self, name: &str) -> Result<String, String> {
        let url = format!("/apis/karpenter.sh/v1/nodepools/{name}");
        let req = http::Request::get(url)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        self.client
            .request_text(req)
            .await
            .map_err(|e| api_err(&format!("NodePool {name}"), e))
    }

    async fn patch_raw(&self, name: &str, body: String) -> Result<(), String> {
        let raw = RawValue::from_string(body).map_err(|e| e.to_string())?;
        let api: Api<NodePool> = Api::all(self.client.clone());
        api.patch(name, &PatchParams::default(), &Patch::Merge(&*raw))
            .await
            .map(drop)
            .map_err(|e| api_err(&format!("NodePool {name}"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = r#"{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"default","resourceVersion":"42"},"spec":{"disruption":{"consolidationPolicy":"WhenEmptyOrUnderutilized","budgets":[{"schedule":"0 9 * * mon-fri","nodes":"20%",  "duration":"8h"},{"nodes":"5","reasons":["Drifted","Empty"]}]}}}"#;

    #[test]
    fn pause_saves_the_exact_budget_text_and_resume_puts_it_back() {
        let pause = budget_pause_patch(POOL, "alice").unwrap();
        let v: serde_json::Value = serde_json::from_str(&pause).unwrap();
        assert_eq!(
            v["spec"]["disruption"]["budgets"],
            serde_json::json!([{"nodes": "0"}])
        );
        let saved = v["metadata"]["annotations"][keys::SAVED_BUDGETS]
            .as_str()
            .unwrap();
        assert_eq!(
            saved,
            r#"[{"schedule":"0 9 * * mon-fri","nodes":"20%",  "duration":"8h"},{"nodes":"5","reasons":["Drifted","Empty"]}]"#,
            "the original text, key order and spacing included"
        );
        assert_eq!(v["metadata"]["resourceVersion"], "42");

        // What the API server holds after the pause.
        let paused = format!(
            r#"{{"metadata":{{"name":"default","resourceVersion":"43","annotations":{{"{}":{},"{}":"alice"}}}},"spec":{{"disruption":{{"budgets":[{{"nodes":"0"}}]}}}}}}"#,
            keys::SAVED_BUDGETS,
            serde_json::to_string(saved).unwrap(),
            keys::PAUSED_BY
        );
        assert!(
            budget_pause_patch(&paused, "bob").is_err(),
            "no double pause"
        );
        let resume = budget_resume_patch(&paused).unwrap();
        assert!(
            resume.contains(&format!(r#""budgets":{saved}"#)),
            "{resume}"
        );
        let v: serde_json::Value = serde_json::from_str(&resume).unwrap();
        assert_eq!(
            v["metadata"]["annotations"][keys::SAVED_BUDGETS],
            serde_json::Value::Null
        );
        assert_eq!(v["metadata"]["resourceVersion"], "43");
        assert!(
            budget_resume_patch(POOL).is_err(),
            "nothing saved, nothing to resume"
        );
    }

    /// Seen: resuming put the saved budgets back over an edit made during the pause.
    /// Now the resume refuses and shows both.
    #[test]
    fn resume_refuses_to_overwrite_budgets_edited_during_the_pause() {
        let pause = budget_pause_patch(POOL, "alice").unwrap();
        let v: serde_json::Value = serde_json::from_str(&pause).unwrap();
        let saved = v["metadata"]["annotations"][keys::SAVED_BUDGETS]
            .as_str()
            .unwrap();
        let edited = format!(
            r#"{{"metadata":{{"name":"default","resourceVersion":"44","annotations":{{"{}":{},"{}":"alice"}}}},"spec":{{"disruption":{{"budgets":[{{"nodes":"3"}}]}}}}}}"#,
            keys::SAVED_BUDGETS,
            serde_json::to_string(saved).unwrap(),
            keys::PAUSED_BY
        );
        let e = budget_resume_patch(&edited).unwrap_err();
        assert!(e.contains(r#"now [{"nodes":"3"}]"#), "{e}");
        assert!(e.contains("mon-fri"), "the saved budgets are shown: {e}");
        assert!(e.contains("not overwritten"), "{e}");
    }

    #[test]
    fn a_pool_without_budgets_gets_them_removed_again_on_resume() {
        let pool = r#"{"metadata":{"name":"p","resourceVersion":"1"},"spec":{"disruption":{}}}"#;
        let pause = budget_pause_patch(pool, "alice").unwrap();
        let v: serde_json::Value = serde_json::from_str(&pause).unwrap();
        assert_eq!(v["metadata"]["annotations"][keys::SAVED_BUDGETS], "null");
    }
}
