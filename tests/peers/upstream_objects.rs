//! A small cluster as upstream Karpenter v1.14.1 (with the AWS provider) leaves it: an
//! EC2NodeClass, the NodePool `default`, and NodeClaims with their Nodes and a pod each,
//! every field where upstream's controllers put it (hash annotations and their versions,
//! finalizers, owner references, conditions, capacity). Upstream's hashes are its own
//! (hashstructure) values: only their shape, a decimal u64, matters here.

use serde_json::{Value, json};

/// The NodePool's `karpenter.sh/nodepool-hash` as upstream stamped it on the pool and on
/// every NodeClaim launched from it.
pub const NODEPOOL_HASH: &str = "6821555240594823858";
/// The EC2NodeClass's `karpenter.k8s.aws/ec2nodeclass-hash`.
pub const NODECLASS_HASH: &str = "15535182697325354914";

/// The EC2NodeClass `default`, resolved and Ready.
#[allow(dead_code)]
pub fn ec2nodeclass() -> String {
    format!(
        r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
  annotations:
    karpenter.k8s.aws/ec2nodeclass-hash: "{NODECLASS_HASH}"
    karpenter.k8s.aws/ec2nodeclass-hash-version: v5
  finalizers: [karpenter.k8s.aws/termination]
spec:
  amiFamily: AL2023
  amiSelectorTerms: [{{alias: al2023@latest}}]
  role: KarpenterNodeRole-demo
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  metadataOptions: {{httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 1, httpTokens: required}}
  blockDeviceMappings:
  - deviceName: /dev/xvda
    ebs: {{volumeSize: 20Gi, volumeType: gp3, encrypted: true}}
status:
  amis:
  - id: ami-0c1d2e3f4a5b6c7d8
    name: amazon-eks-node-al2023-x86_64-standard-1.33-v20261110
    requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]
  subnets:
  - {{id: subnet-0a1b2c3d4e5f60001, zone: us-east-1a, zoneID: use1-az1}}
  securityGroups:
  - {{id: sg-0a1b2c3d4e5f60001, name: eks-cluster-sg-demo}}
  instanceProfile: demo_1234567890123456789
  conditions:
  - {{type: AMIsReady, status: "True", reason: AMIsReady, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: InstanceProfileReady, status: "True", reason: InstanceProfileReady, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: SecurityGroupsReady, status: "True", reason: SecurityGroupsReady, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: SubnetsReady, status: "True", reason: SubnetsReady, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: ValidationSucceeded, status: "True", reason: ValidationSucceeded, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
"#
    )
}

/// The NodePool `default` (m5.large on-demand, consolidation only of empty nodes, the
/// default budget), hashed and Ready.
#[allow(dead_code)]
pub fn nodepool() -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
  annotations:
    karpenter.sh/nodepool-hash: "{NODEPOOL_HASH}"
    karpenter.sh/nodepool-hash-version: v3
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
      - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets:
    - nodes: 10%
status:
  nodes: 3
  resources: {{cpu: "6", memory: 23730Mi, pods: "87", ephemeral-storage: 61847Mi}}
  conditions:
  - {{type: NodeClassReady, status: "True", reason: NodeClassReady, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: NodeRegistrationHealthy, status: "True", reason: NodeRegistrationHealthy, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
  - {{type: ValidationSucceeded, status: "True", reason: ValidationSucceeded, message: "", lastTransitionTime: "2026-11-01T00:00:00Z", observedGeneration: 1}}
"#
    )
}

/// The conditions upstream keeps on a NodeClaim that launched, registered, initialized
/// and whose `consolidateAfter` has passed (no Drifted condition: upstream removes it
/// while the NodeClaim is not drifted).
#[allow(dead_code)]
pub fn nodeclaim_conditions() -> Vec<Value> {
    [
        "Consolidatable",
        "Initialized",
        "Launched",
        "Ready",
        "Registered",
    ]
    .iter()
    .map(|t| {
        json!({"type": t, "status": "True", "reason": t, "message": "",
                   "lastTransitionTime": "2026-11-30T09:00:00Z", "observedGeneration": 1})
    })
    .collect()
}

/// One m5.large node of the pool: its NodeClaim, its Node and a pod of a Deployment on it.
pub struct UpstreamNode {
    pub claim: &'static str,
    pub node: &'static str,
    pub instance: &'static str,
}

impl UpstreamNode {
    /// The NodeClaim, the Node and the pod, as multi-document YAML for `kubectl create`.
    #[allow(dead_code)]
    pub fn objects(&self) -> String {
        let UpstreamNode {
            claim,
            node,
            instance,
        } = self;
        let provider = format!("aws:///us-east-1a/{instance}");
        let conditions = serde_json::to_string(&nodeclaim_conditions()).unwrap();
        // The labels upstream puts on the NodeClaim at launch and syncs onto the Node.
        let labels = r#"    karpenter.sh/nodepool: default
    karpenter.k8s.aws/ec2nodeclass: default
    karpenter.sh/capacity-type: on-demand
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-east-1a
    topology.kubernetes.io/region: us-east-1
    topology.k8s.aws/zone-id: use1-az1
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    karpenter.k8s.aws/instance-category: m
    karpenter.k8s.aws/instance-family: m5
    karpenter.k8s.aws/instance-generation: "5"
    karpenter.k8s.aws/instance-size: large
    karpenter.k8s.aws/instance-cpu: "2"
    karpenter.k8s.aws/instance-memory: "8192"
    karpenter.k8s.aws/instance-hypervisor: nitro"#;
        format!(
            r#"apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {claim}
  generateName: default-
  labels:
{labels}
  annotations:
    karpenter.sh/nodepool-hash: "{NODEPOOL_HASH}"
    karpenter.sh/nodepool-hash-version: v3
    karpenter.k8s.aws/ec2nodeclass-hash: "{NODECLASS_HASH}"
    karpenter.k8s.aws/ec2nodeclass-hash-version: v5
    karpenter.k8s.aws/tagged: "true"
  finalizers: [karpenter.sh/termination]
  ownerReferences:
  - {{apiVersion: karpenter.sh/v1, kind: NodePool, name: default, uid: 5b8e9c3a-0000-4000-8000-000000000001, blockOwnerDeletion: true}}
spec:
  expireAfter: 720h
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements:
  - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
  - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
  - {{key: karpenter.sh/nodepool, operator: In, values: [default]}}
  - {{key: karpenter.k8s.aws/ec2nodeclass, operator: In, values: [default]}}
  resources:
    requests: {{cpu: 650m, memory: 612Mi, pods: "4"}}
status:
  providerID: {provider}
  nodeName: {node}
  imageID: ami-0c1d2e3f4a5b6c7d8
  lastPodEventTime: "2026-11-30T09:00:00Z"
  capacity: {{cpu: "2", ephemeral-storage: 20Gi, memory: 7910Mi, pods: "29"}}
  allocatable: {{cpu: 1930m, ephemeral-storage: 17Gi, memory: 7220Mi, pods: "29"}}
  conditions: {conditions}
---
apiVersion: v1
kind: Node
metadata:
  name: {node}
  labels:
{labels}
    karpenter.sh/registered: "true"
    karpenter.sh/initialized: "true"
    kubernetes.io/hostname: {node}
    beta.kubernetes.io/arch: amd64
    beta.kubernetes.io/os: linux
    beta.kubernetes.io/instance-type: m5.large
    failure-domain.beta.kubernetes.io/zone: us-east-1a
    failure-domain.beta.kubernetes.io/region: us-east-1
  finalizers: [karpenter.sh/termination]
  ownerReferences:
  - {{apiVersion: karpenter.sh/v1, kind: NodeClaim, name: {claim}, uid: 5b8e9c3a-0000-4000-8000-{instance_tail}, blockOwnerDeletion: true}}
spec:
  providerID: {provider}
status:
  capacity: {{cpu: "2", ephemeral-storage: 20Gi, memory: 7910Mi, pods: "29"}}
  allocatable: {{cpu: 1930m, ephemeral-storage: 17Gi, memory: 7220Mi, pods: "29"}}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status, lastTransitionTime: "2026-11-30T09:00:00Z"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-{claim}
  namespace: default
  labels: {{app: web}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f9c, uid: 0f0e0d0c-0000-4000-8000-00000000000a, controller: true}}
spec:
  nodeName: {node}
  containers:
  - name: main
    image: nginx
    resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}
status:
  phase: Running
  startTime: "2026-11-30T09:00:00Z"
  conditions:
  - {{type: Ready, status: "True", lastTransitionTime: "2026-11-30T09:00:00Z"}}
"#,
            instance_tail = &instance[instance.len() - 12..],
        )
    }
}
