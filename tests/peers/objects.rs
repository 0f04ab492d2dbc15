//! Kubernetes objects the live tests create: the `default` NodePool, pending pods, and
//! nodes of the KWOK-style cloud (`--cloud sim` on a live cluster) as `run` would have
//! made them, for tests that start from a cluster that already has nodes.

/// The NodePool `default`: on-demand `instance_types`, expireAfter Never, and
/// `disruption` (the block's lines, indented by four spaces).
#[allow(dead_code)]
pub fn nodepool(instance_types: &str, disruption: &str) -> String {
    named_nodepool("default", instance_types, disruption)
}

/// [`nodepool`] under another name.
#[allow(dead_code)]
pub fn named_nodepool(name: &str, instance_types: &str, disruption: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [{instance_types}]}}
      expireAfter: Never
  disruption:
{disruption}
"#
    )
}

/// A pod the kube-scheduler could not place (what Karpenter provisions for).
#[allow(dead_code)]
pub fn pending_pod(name: &str, cpu: &str, memory: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: web}}}}
spec:
  containers:
  - name: main
    image: nginx
    resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}
status:
  phase: Pending
  conditions:
  - {{type: PodScheduled, status: "False", reason: Unschedulable, message: "0/0 nodes are available"}}
"#
    )
}

/// A launched, registered, empty node of the KWOK-style cloud and its NodeClaim: what
/// `run --cloud sim` would have made.
#[allow(dead_code)]
pub fn empty_node(claim: &str, node: &str) -> String {
    let provider = format!("kwok:///us-east-1a/{node}");
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {claim}
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-east-1a
    karpenter.sh/capacity-type: on-demand
  finalizers: [karpenter.sh/termination]
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements:
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
status:
  providerID: {provider}
  nodeName: {node}
  allocatable: {{cpu: 1930m, memory: 7244Mi, pods: "29"}}
  conditions:
  - {{type: Launched, status: "True", reason: Launched, lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Registered, status: "True", reason: Registered, lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Initialized, status: "True", reason: Initialized, lastTransitionTime: "2026-01-01T00:00:00Z"}}
---
apiVersion: v1
kind: Node
metadata:
  name: {node}
  labels:
    karpenter.sh/nodepool: default
    karpenter.sh/initialized: "true"
    karpenter.sh/registered: "true"
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-east-1a
    karpenter.sh/capacity-type: on-demand
    kubernetes.io/hostname: {node}
    karpenter-tui.dev/kwok: "true"
  annotations:
    karpenter-tui.dev/nodeclaim: {claim}
    karpenter-tui.dev/price: "0.096"
spec:
  providerID: {provider}
status:
  capacity: {{cpu: "2", memory: 7944Mi, pods: "29"}}
  allocatable: {{cpu: 1930m, memory: 7244Mi, pods: "29"}}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, lastTransitionTime: "2026-01-01T00:00:00Z"}}
"#
    )
}
