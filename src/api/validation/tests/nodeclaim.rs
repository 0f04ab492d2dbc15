//! NodeClaim rules: the shared spec checks at `spec.*` paths, and where NodeClaims differ.

use super::{all_bad, all_ok, check};

pub(super) const CLAIM: &str = r#"apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  generateName: default-
spec:
  nodeClassRef:
    group: karpenter.k8s.aws
    kind: EC2NodeClass
    name: default
  requirements:
    - key: karpenter.sh/nodepool
      operator: In
      values: [default]
    - key: node.kubernetes.io/instance-type
      operator: In
      values: [m5.large, m5.xlarge]
      minValues: 2
  resources:
    requests:
      cpu: 1500m
      memory: 2Gi
  taints:
    - key: dedicated
      value: gpu
      effect: NoSchedule
  expireAfter: Never
  terminationGracePeriod: 1h
"#;

#[test]
fn base_fixture_is_valid() {
    // karpenter.sh/nodepool is allowed here: Karpenter writes it on every NodeClaim.
    assert_eq!(check(CLAIM), vec![]);
}

#[test]
fn name_or_generate_name() {
    all_ok(CLAIM, &[("generateName: default-", "name: default-x7k2p")]);
    all_bad(
        CLAIM,
        &[
            (
                "generateName: default-",
                "labels: {a: b}",
                "metadata.name",
                "every NodeClaim needs a name",
            ),
            (
                "generateName: default-",
                "name: Default",
                "metadata.name",
                "DNS subdomain",
            ),
        ],
    );
}

#[test]
fn requirements() {
    let k = "key: karpenter.sh/nodepool";
    all_ok(
        CLAIM,
        &[
            (k, "key: karpenter.sh/capacity-type"),
            (k, "key: topology.kubernetes.io/zone"),
        ],
    );
    all_bad(
        CLAIM,
        &[
            (
                k,
                "key: kubernetes.io/hostname",
                "spec.requirements[0].key",
                "label \"kubernetes.io/hostname\" is restricted",
            ),
            (
                k,
                "key: karpenter.sh/registered",
                "spec.requirements[0].key",
                "label domain \"karpenter.sh\" is restricted",
            ),
            (
                "values: [default]",
                "values: []",
                "spec.requirements[0].values",
                "operator 'In' must have a value",
            ),
            (
                "minValues: 2",
                "minValues: 3",
                "spec.requirements[1].minValues",
                "minValues is 3 but 2 values",
            ),
            (
                "values: [default]",
                "values: [\"not valid\"]",
                "spec.requirements[0].values[0]",
                "invalid label value",
            ),
        ],
    );
}

#[test]
fn resource_requests_are_quantities() {
    all_ok(
        CLAIM,
        &[("cpu: 1500m", "cpu: 2"), ("memory: 2Gi", "pods: 110")],
    );
    all_bad(
        CLAIM,
        &[
            (
                "cpu: 1500m",
                "cpu: 1.5 cores",
                "spec.resources.requests[cpu]",
                "invalid quantity \"1.5 cores\"",
            ),
            (
                "memory: 2Gi",
                "memory: 2GB",
                "spec.resources.requests[memory]",
                "invalid quantity",
            ),
        ],
    );
}

#[test]
fn taints() {
    all_ok(CLAIM, &[("key: dedicated", "key: example.com/dedicated")]);
    all_bad(
        CLAIM,
        &[
            (
                "key: dedicated",
                "key: \"\"",
                "spec.taints[0].key",
                "taint key may not be empty",
            ),
            (
                "key: dedicated",
                "key: a/b/c",
                "spec.taints[0].key",
                "invalid taint key",
            ),
            (
                "value: gpu",
                "value: \"g p u\"",
                "spec.taints[0].value",
                "invalid taint value",
            ),
        ],
    );
}

#[test]
fn node_class_ref_and_durations() {
    all_ok(
        CLAIM,
        &[
            ("expireAfter: Never", "expireAfter: 720h"),
            (
                "terminationGracePeriod: 1h",
                "terminationGracePeriod: 30m15s",
            ),
        ],
    );
    all_bad(
        CLAIM,
        &[
            (
                "    name: default\n",
                "    name: \"\"\n",
                "spec.nodeClassRef.name",
                "name may not be empty",
            ),
            (
                "group: karpenter.k8s.aws",
                "group: \"\"",
                "spec.nodeClassRef.group",
                "group may not be empty",
            ),
            (
                "expireAfter: Never",
                "expireAfter: 2.5h",
                "spec.expireAfter",
                "invalid duration \"2.5h\"",
            ),
            (
                "terminationGracePeriod: 1h",
                "terminationGracePeriod: Never",
                "spec.terminationGracePeriod",
                "\"Never\" is not allowed",
            ),
        ],
    );
}
