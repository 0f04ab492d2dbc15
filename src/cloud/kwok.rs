//! A cloud made of Node objects, as upstream Karpenter's KWOK provider does it: "launching"
//! an instance creates a Ready Node in the cluster (for the built-in catalog's instance
//! type), and "terminating" deletes it. A cluster without a cloud (a kind or kwok cluster,
//! or the test's API emulator) can so be autoscaled end to end, NodeClaims, Nodes and
//! disruption included, without an instance anywhere.
//!
//! The Nodes are the only record: listing instances lists Nodes carrying the provider's
//! label, so a restarted (or newly elected) controller finds the instances its
//! predecessor launched and garbage collection leaves them alone.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::{
    CloudError, CloudProvider, Instance, Interruption, LaunchError, LaunchRequest, Launched,
};
use crate::api::labels;
use crate::api::nodeclaim::NodeClaim;
use crate::engine::catalog::{CapacityType, Catalog, InstanceType};

/// The label on every Node this provider made (its value is always "true").
pub const KWOK_LABEL: &str = "karpenter-tui.dev/kwok";
/// Annotations carrying the instance record on the Node.
const NODECLAIM: &str = "karpenter-tui.dev/nodeclaim";
const PRICE: &str = "karpenter-tui.dev/price";

/// The KWOK-style cloud.
pub struct KwokCloud {
    client: kube::Client,
    types: Vec<Arc<InstanceType>>,
}

impl KwokCloud {
    pub fn new(client: kube::Client, catalog: &Catalog) -> KwokCloud {
        KwokCloud {
            client,
            types: catalog
                .instance_types
                .iter()
                .cloned()
                .map(Arc::new)
                .collect(),
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }
}

/// A node name in the style of EC2's private DNS names, unique enough for a cluster.
fn hostname() -> String {
    format!(
        "ip-10-{}-{}-{}.kwok.internal",
        fastrand::u8(..),
        fastrand::u8(..),
        fastrand::u8(1..255)
    )
}

/// The Node a launch registers: the instance type's labels, the offering's zone and
/// capacity type, the NodeClaim's labels and taints (kubelet's `--node-labels` and
/// `--register-with-taints`), allocatable from the catalog, and Ready.
pub fn node_manifest(
    i: &Instance,
    it: &InstanceType,
    claim: Option<&NodeClaim>,
) -> serde_json::Value {
    let mut node_labels: BTreeMap<String, String> = claim
        .and_then(|c| c.metadata.labels.clone())
        .unwrap_or_default()
        .into_iter()
        .collect();
    node_labels.extend(it.labels.clone());
    let name = i.hostname.as_str();
    node_labels.insert(labels::ZONE.into(), i.zone.clone());
    node_labels.insert(
        labels::CAPACITY_TYPE.into(),
        i.capacity_type.as_str().into(),
    );
    node_labels.insert(labels::NODEPOOL.into(), i.nodepool.clone());
    node_labels.insert(labels::HOSTNAME.into(), name.into());
    node_labels.insert(KWOK_LABEL.into(), "true".into());
    // The kubelet's registerWithTaints: the NodeClaim's taints and the unregistered
    // taint registration removes (as the AWS user data has it). Startup taints are left
    // out: no agent on a KWOK node would ever remove them.
    let mut taints = claim.map(|c| c.spec.taints.clone()).unwrap_or_default();
    taints.push(crate::api::nodeclaim::Taint::unregistered());
    let allocatable = it.allocatable().to_map();
    let capacity = it.capacity.to_map();
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels,
            "annotations": {NODECLAIM: i.nodeclaim, PRICE: i.price.to_string()},
        },
        "spec": {"providerID": i.provider_id, "taints": taints},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kwok node", "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
        },
    })
}

/// Every Node this provider made: the instances.
async fn kwok_nodes(nodes: &Api<Node>) -> Result<Vec<Node>, CloudError> {
    nodes
        .list(&ListParams::default().labels(&format!("{KWOK_LABEL}=true")))
        .await
        .map(|l| l.items)
        .map_err(|e| CloudError(format!("listing Nodes: {e}")))
}

/// The instance a provider-made Node stands for.
fn instance_of(n: &Node) -> Option<Instance> {
    let labels = n.metadata.labels.as_ref()?;
    labels.get(KWOK_LABEL)?;
    let annotations = n.metadata.annotations.clone().unwrap_or_default();
    Some(Instance {
        provider_id: n.spec.as_ref()?.provider_id.clone()?,
        instance_type: labels.get(labels::INSTANCE_TYPE)?.clone(),
        zone: labels.get(labels::ZONE).cloned().unwrap_or_default(),
        capacity_type: labels
            .get(labels::CAPACITY_TYPE)
            .and_then(|c| CapacityType::parse(c))
            .unwrap_or(CapacityType::OnDemand),
        price: annotations
            .get(PRICE)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0.0),
        nodeclaim: annotations.get(NODECLAIM).cloned().unwrap_or_default(),
        nodepool: labels.get(labels::NODEPOOL).cloned().unwrap_or_default(),
        hostname: n.metadata.name.clone()?,
        launched: n
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or_else(Utc::now, crate::api::time::to_chrono),
        image_id: None,
    })
}

impl CloudProvider for KwokCloud {
    fn instance_types(&self, _pool: &crate::api::nodepool::NodePool) -> Vec<Arc<InstanceType>> {
        self.types.clone()
    }

    fn create(
        &mut self,
        request: LaunchRequest,
    ) -> impl Future<Output = Result<Launched, LaunchError>> + Send {
        let client = self.client.clone();
        let nodes = self.nodes();
        let types = self.types.clone();
        async move {
            let Some(o) = request
                .offerings
                .iter()
                .find(|o| types.iter().any(|t| t.name == o.instance_type))
            else {
                return Err(LaunchError::Other {
                    nodeclaim: request.nodeclaim,
                    message: "no offering of a known instance type to launch".into(),
                });
            };
            let it = types
                .iter()
                .find(|t| t.name == o.instance_type)
                .expect("found above");
            // The NodeClaim's labels and taints go on the Node, as the kubelet's flags
            // would put them there.
            let claim = Api::<NodeClaim>::all(client)
                .get(&request.nodeclaim)
                .await
                .ok();
            let name = hostname();
            let instance = Instance {
                provider_id: format!("kwok:///{}/{name}", o.zone),
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
                price: o.price,
                nodeclaim: request.nodeclaim.clone(),
                nodepool: request.nodepool.clone(),
                hostname: name.clone(),
                launched: Utc::now(),
                image_id: None,
            };
            let manifest = node_manifest(&instance, it, claim.as_ref());
            let node: Node = serde_json::from_value(manifest).map_err(|e| LaunchError::Other {
                nodeclaim: request.nodeclaim.clone(),
                message: e.to_string(),
            })?;
            nodes
                .create(&PostParams::default(), &node)
                .await
                .map_err(|e| LaunchError::Other {
                    nodeclaim: request.nodeclaim.clone(),
                    message: format!("creating Node {name}: {e}"),
                })?;
            Ok(Launched {
                instance,
                unavailable: Vec::new(),
                annotations: Default::default(),
                labels: Default::default(),
            })
        }
    }

    fn delete(&mut self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send {
        let nodes = self.nodes();
        let provider_id = provider_id.to_string();
        async move {
            for n in kwok_nodes(&nodes).await? {
                if n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(&provider_id) {
                    let name = n.metadata.name.unwrap_or_default();
                    match nodes.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => return Err(CloudError(format!("deleting Node {name}: {e}"))),
                    }
                }
            }
            Ok(())
        }
    }

    fn list(&mut self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send {
        let nodes = self.nodes();
        async move {
            Ok(kwok_nodes(&nodes)
                .await?
                .iter()
                .filter_map(instance_of)
                .collect())
        }
    }

    fn interruptions(&mut self) -> Vec<Interruption> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launched_node_reads_back_as_its_instance() {
        let catalog = Catalog::builtin();
        let it = catalog.get("m5.large").expect("m5.large in the catalog");
        let instance = Instance {
            provider_id: "kwok:///us-east-1a/ip-10-1-2-3.kwok.internal".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price: 0.04,
            nodeclaim: "default-abcde".into(),
            nodepool: "default".into(),
            hostname: "ip-10-1-2-3.kwok.internal".into(),
            launched: Utc::now(),
            image_id: None,
        };
        let v = node_manifest(&instance, it, None);
        let mut node: Node = serde_json::from_value(v).unwrap();
        node.metadata.creation_timestamp = Some(crate::api::time::from_chrono(Utc::now()));
        let i = instance_of(&node).expect("a kwok node");
        assert_eq!(i.instance_type, "m5.large");
        assert_eq!(i.capacity_type, CapacityType::Spot);
        assert_eq!(i.nodeclaim, "default-abcde");
        assert_eq!(i.price, 0.04);
        let status = node.status.unwrap();
        assert!(status.allocatable.unwrap().contains_key("cpu"));
        let ready = &status.conditions.unwrap()[0];
        assert_eq!(
            (ready.type_.as_str(), ready.status.as_str()),
            ("Ready", "True")
        );
    }
}
