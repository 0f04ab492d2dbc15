//! EC2NodeClass rules: selector terms, IAM, tags, IMDS, kubelet and block devices.

use super::{all_bad, all_ok, assert_bad, check};

pub(super) const CLASS: &str = r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-my-cluster
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
    - id: subnet-0123456789abcdef0
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
    - id: sg-0123456789abcdef0
    - name: my-security-group
  tags:
    team: web
  metadataOptions:
    httpEndpoint: enabled
    httpProtocolIPv6: disabled
    httpPutResponseHopLimit: 2
    httpTokens: required
  kubelet:
    maxPods: 110
    systemReserved:
      cpu: 100m
      memory: 100Mi
    kubeReserved:
      cpu: 200m
    evictionHard:
      memory.available: 5%
    evictionSoft:
      memory.available: 500Mi
    evictionSoftGracePeriod:
      memory.available: 1m
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        volumeSize: 20Gi
        volumeType: gp3
"#;

const ALIAS: &str = "  amiSelectorTerms:\n    - alias: al2023@latest\n";

fn ami_terms(terms: &str) -> String {
    format!("  amiFamily: AL2023\n  amiSelectorTerms:\n{terms}")
}

#[test]
fn base_fixture_is_valid() {
    assert_eq!(check(CLASS), vec![]);
}

#[test]
fn ami_selector_terms_are_required() {
    all_ok(
        CLASS,
        &[
            (ALIAS, &ami_terms("    - id: ami-0123456789abcdef0\n")),
            (
                ALIAS,
                &ami_terms("    - name: my-ami-*\n      owner: self\n    - tags: {team: web}\n"),
            ),
            (
                ALIAS,
                &ami_terms(
                    "    - ssmParameter: /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id\n",
                ),
            ),
            (
                ALIAS,
                &ami_terms("    - id: ami-0123456789abcdef0\n      ssmParameter: /x\n"),
            ),
        ],
    );
    let many = "    - name: my-ami\n".repeat(31);
    all_bad(
        CLASS,
        &[
            (
                ALIAS,
                "  amiSelectorTerms: []\n",
                "spec.amiSelectorTerms",
                "expected at least one, got none",
            ),
            (
                ALIAS,
                &ami_terms(&many),
                "spec.amiSelectorTerms",
                "at most 30 amiSelectorTerms are allowed, found 31",
            ),
            (
                ALIAS,
                &ami_terms("    - owner: self\n"),
                "spec.amiSelectorTerms[0]",
                "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
            ),
            (
                ALIAS,
                &ami_terms("    - id: ami-0123456789abcdef0\n      name: my-ami\n"),
                "spec.amiSelectorTerms[0].id",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (also set: name)",
            ),
            (
                ALIAS,
                &ami_terms("    - id: image-123\n"),
                "spec.amiSelectorTerms[0].id",
                "invalid id \"image-123\"",
            ),
            (
                ALIAS,
                &ami_terms("    - tags: {team: \"\"}\n"),
                "spec.amiSelectorTerms[0].tags[team]",
                "empty tag keys or values",
            ),
        ],
    );
}

#[test]
fn alias_rules() {
    let alias = "alias: al2023@latest";
    all_ok(
        CLASS,
        &[
            (alias, "alias: al2023@v20240807"),
            (alias, "alias: bottlerocket@1.20.0"),
            (alias, "alias: windows2022@latest"),
            (alias, "alias: windows2025@latest"),
            (alias, "alias: al2@latest"),
        ],
    );
    let at = "spec.amiSelectorTerms[0].alias";
    all_bad(
        CLASS,
        &[
            (
                alias,
                "alias: al2023",
                at,
                "'alias' is improperly formatted, must match the format 'family@version'",
            ),
            (alias, "alias: al2023@", at, "improperly formatted"),
            (
                alias,
                "alias: ubuntu@latest",
                at,
                "family \"ubuntu\" is not supported, must be one of the following: 'al2', 'al2023'",
            ),
            (
                alias,
                "alias: AL2023@latest",
                at,
                "family \"AL2023\" is not supported",
            ),
            (
                alias,
                "alias: windows2019@v20240807",
                at,
                "windows families may only specify version 'latest'",
            ),
            (
                alias,
                "alias: windows2025@v20240807",
                at,
                "windows families may only specify version 'latest'",
            ),
            (
                alias,
                "alias: al2023@v2024080700000000000000000",
                at,
                "alias must be at most 30 characters",
            ),
            (
                alias,
                "alias: al2023@latest\n      owner: amazon",
                at,
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms (also set: owner)",
            ),
            (
                alias,
                "alias: al2023@latest\n    - name: my-ami",
                at,
                "cannot be set with a combination of other amiSelectorTerms (found 2 terms)",
            ),
        ],
    );
}

#[test]
fn ami_family_is_required_without_an_alias() {
    let terms = "  amiSelectorTerms:\n    - name: my-ami\n";
    all_ok(
        CLASS,
        &[
            (ALIAS, &format!("  amiFamily: Custom\n{terms}")),
            (ALIAS, &format!("  amiFamily: AL2023\n{ALIAS}")),
        ],
    );
    assert_bad(
        CLASS,
        ALIAS,
        terms,
        "spec.amiFamily",
        "amiFamily must be set if amiSelectorTerms does not contain an alias",
    );
}

#[test]
fn role_or_instance_profile() {
    let role = "  role: KarpenterNodeRole-my-cluster\n";
    all_ok(
        CLASS,
        &[(role, "  instanceProfile: KarpenterNodeInstanceProfile\n")],
    );
    all_bad(
        CLASS,
        &[
            (
                role,
                "",
                "spec",
                "must specify exactly one of ['role', 'instanceProfile']: neither is set",
            ),
            (
                role,
                "  role: r\n  instanceProfile: p\n",
                "spec",
                "both are set",
            ),
            (role, "  role: \"\"\n", "spec.role", "role cannot be empty"),
            (
                role,
                "  instanceProfile: \"\"\n",
                "spec.instanceProfile",
                "instanceProfile cannot be empty",
            ),
        ],
    );
}

#[test]
fn subnet_selector_terms() {
    let id = "    - id: subnet-0123456789abcdef0\n";
    all_ok(CLASS, &[(id, "    - tags: {Name: \"*\"}\n")]);
    let tags21 = (0..21)
        .map(|i| format!("k{i}: v"))
        .collect::<Vec<_>>()
        .join(", ");
    all_bad(
        CLASS,
        &[
            (
                "  subnetSelectorTerms:\n    - tags:\n        karpenter.sh/discovery: my-cluster\n    - id: subnet-0123456789abcdef0\n",
                "  subnetSelectorTerms: []\n",
                "spec.subnetSelectorTerms",
                "subnetSelectorTerms cannot be empty",
            ),
            (
                id,
                "    - {}\n",
                "spec.subnetSelectorTerms[1]",
                "expected at least one, got none, ['tags', 'id']",
            ),
            (
                id,
                "    - id: subnet-0123456789abcdef0\n      tags: {a: b}\n",
                "spec.subnetSelectorTerms[1].id",
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
            ),
            (
                id,
                "    - id: subnet-ABC\n",
                "spec.subnetSelectorTerms[1].id",
                "invalid id \"subnet-ABC\": expected subnet- followed by",
            ),
            (
                id,
                "    - tags: {\"\": x}\n",
                "spec.subnetSelectorTerms[1].tags[]",
                "empty tag keys or values aren't supported",
            ),
            (
                id,
                &format!("    - tags: {{{tags21}}}\n"),
                "spec.subnetSelectorTerms[1].tags",
                "at most 20 tags are allowed, found 21",
            ),
        ],
    );
}

#[test]
fn security_group_selector_terms() {
    let name = "    - name: my-security-group\n";
    all_ok(CLASS, &[(name, "    - id: sg-0fedcba\n")]);
    let at = "spec.securityGroupSelectorTerms[2]";
    all_bad(
        CLASS,
        &[
            (
                "  securityGroupSelectorTerms:\n    - tags:\n        karpenter.sh/discovery: my-cluster\n    - id: sg-0123456789abcdef0\n    - name: my-security-group\n",
                "  securityGroupSelectorTerms: []\n",
                "spec.securityGroupSelectorTerms",
                "securityGroupSelectorTerms cannot be empty",
            ),
            (
                name,
                "    - {}\n",
                at,
                "expected at least one, got none, ['tags', 'id', 'name']",
            ),
            (
                name,
                "    - name: my-sg\n      id: sg-123\n",
                &format!("{at}.id"),
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term (also set: name)",
            ),
            (
                name,
                "    - name: my-sg\n      id: sg-123\n",
                &format!("{at}.name"),
                "'name' is mutually exclusive",
            ),
            (
                name,
                "    - name: my-sg\n      tags: {a: b}\n",
                &format!("{at}.name"),
                "(also set: tags)",
            ),
            (
                name,
                "    - id: sg_123\n",
                &format!("{at}.id"),
                "invalid id \"sg_123\"",
            ),
            (
                name,
                "    - tags: {a: \"\"}\n",
                &format!("{at}.tags[a]"),
                "empty tag keys or values",
            ),
        ],
    );
}

#[test]
fn restricted_tags() {
    let t = "team: web";
    all_ok(
        CLASS,
        &[
            (t, "karpenter.sh/discovery: my-cluster"),
            (t, "Name: my-node"),
        ],
    );
    let at = |k: &str| format!("spec.tags[{k}]");
    all_bad(
        CLASS,
        &[
            (t, "\"\": x", &at(""), "empty tag keys aren't supported"),
            (
                t,
                "eks:eks-cluster-name: x",
                &at("eks:eks-cluster-name"),
                "restricted tag matching eks:eks-cluster-name",
            ),
            (
                t,
                "kubernetes.io/cluster/my-cluster: owned",
                &at("kubernetes.io/cluster/my-cluster"),
                "restricted tag matching kubernetes.io/cluster/",
            ),
            (
                t,
                "karpenter.sh/nodepool: x",
                &at("karpenter.sh/nodepool"),
                "restricted tag matching karpenter.sh/nodepool",
            ),
            (
                t,
                "karpenter.sh/nodeclaim: x",
                &at("karpenter.sh/nodeclaim"),
                "restricted tag matching karpenter.sh/nodeclaim",
            ),
            (
                t,
                "karpenter.k8s.aws/ec2nodeclass: x",
                &at("karpenter.k8s.aws/ec2nodeclass"),
                "restricted tag matching karpenter.k8s.aws/ec2nodeclass",
            ),
        ],
    );
}

#[test]
fn instance_options_follow_the_crd_rules() {
    let t = "  tags:\n    team: web\n";
    let with = |extra: &str| format!("{t}{extra}");
    let primary = "  networkInterfaces:\n    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}\n";
    all_ok(
        CLASS,
        &[
            (t, &with("  placementGroupSelector: {name: my-group}\n")),
            (t, &with("  placementGroupSelector: {id: pg-0123abc}\n")),
            (t, &with(primary)),
            (
                t,
                &with(&format!(
                    "{primary}    - {{networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}}\n    - {{networkCardIndex: 1, deviceIndex: 1, interfaceType: interface}}\n"
                )),
            ),
            (t, &with("  ipPrefixCount: 2\n")),
            (
                t,
                &with("  connectionTracking: {tcpEstablishedTimeout: 300}\n"),
            ),
            (t, &with("  cpuOptions: {nestedVirtualization: enabled}\n")),
        ],
    );
    let pg = "spec.placementGroupSelector";
    let nics = "spec.networkInterfaces";
    all_bad(
        CLASS,
        &[
            (
                t,
                &with("  placementGroupSelector: {}\n"),
                pg,
                "expected at least one",
            ),
            (
                t,
                &with("  placementGroupSelector: {name: a, id: pg-1}\n"),
                pg,
                "mutually exclusive",
            ),
            (
                t,
                &with("  placementGroupSelector: {id: pg-ABC}\n"),
                "spec.placementGroupSelector.id",
                "expected pg-",
            ),
            (
                t,
                &with(
                    "  networkInterfaces:\n    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}\n",
                ),
                nics,
                "must include a primary interface",
            ),
            (
                t,
                &with(&format!(
                    "{primary}    - {{networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}}\n"
                )),
                "spec.networkInterfaces[1]",
                "duplicate networkCardIndex and deviceIndex",
            ),
            (
                t,
                &with(&format!(
                    "{primary}    - {{networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}}\n    - {{networkCardIndex: 1, deviceIndex: 1, interfaceType: efa-only}}\n"
                )),
                "spec.networkInterfaces[2]",
                "at most one efa device per network card",
            ),
            (
                t,
                &with(&format!(
                    "{primary}    - {{networkCardIndex: 1, deviceIndex: 0, interfaceType: efa}}\n"
                )),
                "spec.networkInterfaces[1].interfaceType",
                "expected interface or efa-only",
            ),
            (
                t,
                &with("  ipPrefixCount: -1\n"),
                "spec.ipPrefixCount",
                "at least 0",
            ),
            (
                t,
                &with("  connectionTracking: {}\n"),
                "spec.connectionTracking",
                "at least one of tcpEstablishedTimeout",
            ),
            (
                t,
                &with("  connectionTracking: {udpTimeout: 90}\n"),
                "spec.connectionTracking.udpTimeout",
                "between 30 and 60",
            ),
            (
                t,
                &with("  cpuOptions: {nestedVirtualization: sometimes}\n"),
                "spec.cpuOptions.nestedVirtualization",
                "expected enabled or disabled",
            ),
        ],
    );
}
