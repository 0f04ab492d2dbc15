//! Approving a replace against upstream Karpenter, make-before-break, from outside its
//! orchestration (upstream `disruption/orchestration/queue.go` is the model): the
//! replacement NodeClaims are created first, as upstream's provisioner would create them
//! from the pool's template (with the hash annotations upstream stamped on the NodePool,
//! so upstream does not see them drifted), the candidates are annotated with what
//! replaces them, and only once every replacement is Initialized are the candidates
//! deleted, which hands them to upstream's termination (taint, drain with PDBs,
//! terminate). A replacement that goes away, or does not initialize within the
//! orchestration's 10 minutes, ends the replace with the candidates kept.
//!
//! The record lives on the candidates in the API server, so a console that restarts
//! (any console attached with `--write`) carries the replace on.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};

use super::convert;
use super::protocol::Remote;
use crate::api::labels;
use crate::api::nodeclaim::{NodeClaim, conditions};
use crate::api::nodepool::NodePool;
use crate::api::protocol as keys;
use crate::cluster::template::nodeclaim_for;
use crate::engine::disruption::Command;

/// Upstream's orchestration queue gives replacements this long to initialize.
pub const REPLACEMENT_TIMEOUT: TimeDelta = TimeDelta::minutes(10);

/// What [`keys::REPLACED_BY`] holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replacing {
    pub decision: u64,
    pub actor: String,
    pub since: DateTime<Utc>,
    pub candidates: Vec<String>,
    pub replacements: Vec<String>,
}

/// The NodeClaim to create for one replacement: the pool's template, the replacement's
/// requirements and requests, narrowed to its instance types; the nodepool hash is the
/// one upstream stamped on the NodePool (none when it has not), never ours.
pub fn replacement_manifest(
    pool: &NodePool,
    r: &crate::engine::disruption::Replacement,
    candidates: &[String],
    now: DateTime<Utc>,
) -> NodeClaim {
    let mut types: Vec<String> = Vec::new();
    for o in &r.options {
        if !types.contains(&o.instance_type) {
            types.push(o.instance_type.clone());
        }
    }
    let mut claim = nodeclaim_for("", pool, &r.requirements, &types, r.requests.clone(), now);
    claim.annotations.remove(labels::NODEPOOL_HASH);
    claim.annotations.remove(labels::NODEPOOL_HASH_VERSION);
    let pool_annotations = pool.metadata.annotations.clone().unwrap_or_default();
    for key in [labels::NODEPOOL_HASH, labels::NODEPOOL_HASH_VERSION] {
        if let Some(v) = pool_annotations.get(key) {
            claim.annotations.insert(key.into(), v.clone());
        }
    }
    claim
        .annotations
        .insert(keys::REPLACES.into(), candidates.join(","));
    convert::nodeclaim_manifest(&claim, pool)
}

fn api_err(what: &str, e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => format!("{what}: forbidden by RBAC: {}", s.message),
        kube::Error::Api(s) => format!("{what}: {} ({})", s.message, s.reason),
        e => format!("{what}: {e}"),
    }
}

fn initialized(nc: &NodeClaim) -> bool {
    nc.status
        .as_ref()
        .is_some_and(|s| s.is_true(conditions::INITIALIZED))
}

impl Remote {
    /// Starts decision `id` against upstream Karpenter: a command without replacements
    /// deletes its candidates (Karpenter drains and terminates them, as for any deleted
    /// NodeClaim); one with replacements creates them and waits (see the module doc).
    pub async fn replace_upstream(
        &self,
        id: u64,
        command: &Command,
        pools: &BTreeMap<String, NodePool>,
        now: DateTime<Utc>,
    ) -> Result<String, String> {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let candidates: Vec<String> = command.nodeclaims().map(str::to_string).collect();
        if command.replacements.is_empty() {
            for c in &candidates {
                api.delete(c, &DeleteParams::default())
                    .await
                    .map_err(|e| api_err(&format!("deleting NodeClaim {c}"), e))?;
            }
            return Ok(format!(
                "#{id}: deleted NodeClaim {} (Karpenter drains and terminates)",
                candidates.join(", ")
            ));
        }
        let mut created = Vec::new();
        for r in &command.replacements {
            let pool = pools
                .get(&r.nodepool)
                .ok_or_else(|| format!("#{id}: NodePool {} is gone", r.nodepool))?;
            let manifest = replacement_manifest(pool, r, &candidates, now);
            let made = api
                .create(&PostParams::default(), &manifest)
                .await
                .map_err(|e| {
                    api_err(
                        &format!("creating a replacement in NodePool {}", r.nodepool),
                        e,
                    )
                })?;
            created.push(made.metadata.name.unwrap_or_default());
        }
        let record = Replacing {
            decision: id,
            actor: self.actor.clone(),
            since: now,
            candidates: candidates.clone(),
            replacements: created.clone(),
        };
        let text = serde_json::to_string(&record).map_err(|e| e.to_string())?;
        let patch = serde_json::json!({"metadata": {"annotations": {keys::REPLACED_BY: text}}});
        for c in &candidates {
            api.patch(c, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| api_err(&format!("NodeClaim {c}"), e))?;
        }
        Ok(format!(
            "#{id}: created replacement NodeClaim {}; {} deleted once it is initialized",
            created.join(", "),
            candidates.join(", ")
        ))
    }

    /// Carries every recorded replace on (see the module doc); returns what finished:
    /// `Ok` when the candidates were deleted, `Err` when the replace ended without.
    pub async fn advance_replacements(&self, now: DateTime<Utc>) -> Vec<Result<String, String>> {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let all = match api.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => return vec![Err(api_err("listing NodeClaims", e))],
        };
        let by_name: BTreeMap<&str, &NodeClaim> = all
            .iter()
            .filter_map(|nc| Some((nc.metadata.name.as_deref()?, nc)))
            .collect();
        let mut records: BTreeMap<u64, Replacing> = BTreeMap::new();
        for nc in &all {
            if nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(text) = nc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::REPLACED_BY))
            else {
                continue;
            };
            match serde_json::from_str::<Replacing>(text) {
                Ok(r) => {
                    records.entry(r.decision).or_insert(r);
                }
                Err(e) => tracing::warn!(
                    "NodeClaim {}: annotation {}: {e}",
                    nc.metadata.name.as_deref().unwrap_or(""),
                    keys::REPLACED_BY
                ),
            }
        }
        let mut out = Vec::new();
        for (id, r) in records {
            let gone: Vec<&String> = r
                .replacements
                .iter()
                .filter(|n| {
                    by_name
                        .get(n.as_str())
                        .is_none_or(|nc| nc.metadata.deletion_timestamp.is_some())
                })
                .collect();
            let ready = r
                .replacements
                .iter()
                .all(|n| by_name.get(n.as_str()).is_some_and(|nc| initialized(nc)));
            let live: Vec<&String> = r
                .candidates
                .iter()
                .filter(|c| by_name.contains_key(c.as_str()))
                .collect();
            if ready {
                let mut failed = None;
                for c in &live {
                    if let Err(e) = api.delete(c, &DeleteParams::default()).await {
                        failed = Some(api_err(&format!("deleting NodeClaim {c}"), e));
                    }
                }
                out.push(match failed {
                    None => Ok(format!(
                        "#{id}: replacement {} initialized; deleted NodeClaim {} (Karpenter \
                         drains and terminates)",
                        r.replacements.join(", "),
                        r.candidates.join(", ")
                    )),
                    Some(e) => Err(format!("#{id}: {e}")),
                });
                continue;
            }
            let why = if !gone.is_empty() {
                format!(
                    "replacement {} is gone",
                    gone.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else if now - r.since >= REPLACEMENT_TIMEOUT {
                format!(
                    "replacement {} did not initialize within {} minutes",
                    r.replacements.join(", "),
                    REPLACEMENT_TIMEOUT.num_minutes()
                )
            } else {
                continue;
            };
            let patch = serde_json::json!({"metadata": {"annotations": {keys::REPLACED_BY: null}}});
            for c in &live {
                if let Err(e) = api
                    .patch(c, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::warn!("{}", api_err(&format!("NodeClaim {c}"), e));
                }
            }
            out.push(Err(format!(
                "#{id}: {why}; kept NodeClaim {}",
                r.candidates.join(", ")
            )));
        }
        out
    }
}
