//! Which instance types a NodeClass can launch at all (upstream
//! `pkg/providers/instancetype/compatibility/compatibility.go`): a network interface
//! layout needs the cards, device slots and EFA interfaces it names; AL2023 does not run
//! on a1; nested virtualization needs the processor feature; a placement group needs a
//! type that supports its strategy; connection tracking needs Nitro. A type that fails
//! one check is not offered for the NodeClass, rather than offered and refused by EC2 at
//! launch.

use super::hardware::Hardware;
use crate::api::ec2nodeclass::{AMIFamily, EC2NodeClassSpec};

/// Why `instance_type` cannot launch with `spec`, or `None` when it can. `hardware` is
/// the type's DescribeInstanceTypes facts; a type EC2 did not describe passes every
/// check that needs none, and fails those that do. `placement_strategy` is that of the
/// NodeClass's resolved placement group.
pub fn incompatibility(
    instance_type: &str,
    hardware: Option<&Hardware>,
    spec: &EC2NodeClassSpec,
    placement_strategy: Option<&str>,
) -> Option<&'static str> {
    if spec.effective_ami_family() == Some(AMIFamily::AL2023) && instance_type.starts_with("a1.") {
        return Some("AL2023 does not support a1 instance types");
    }
    let needs_hardware = spec
        .network_interfaces
        .as_ref()
        .is_some_and(|n| !n.is_empty())
        || nested_virtualization(spec)
        || placement_strategy.is_some()
        || spec.connection_tracking.is_some();
    if !needs_hardware {
        return None;
    }
    let Some(hw) = hardware else {
        return Some("EC2 did not describe its hardware");
    };
    if let Some(nics) = spec.network_interfaces.as_ref().filter(|n| !n.is_empty()) {
        if !hw.has_network_info || hw.ena_unsupported {
            return Some("networkInterfaces need ENA network cards");
        }
        for nic in nics {
            let card = hw
                .network_cards
                .iter()
                .find(|(index, _)| *index == nic.network_card_index);
            if (nic.network_card_index as usize) >= hw.network_cards.len()
                || card.is_none_or(|(_, max)| *max <= nic.device_index)
            {
                return Some("networkInterfaces name a card or device index it does not have");
            }
        }
        let efas = nics
            .iter()
            .filter(|n| n.interface_type == "efa-only")
            .count() as i32;
        if efas > 0 && hw.max_efa.is_none_or(|max| efas > max) {
            return Some("networkInterfaces ask for more EFA interfaces than it has");
        }
    }
    if nested_virtualization(spec) && !hw.nested_virtualization {
        return Some("cpuOptions.nestedVirtualization needs a processor that supports it");
    }
    if let Some(strategy) = placement_strategy
        && !hw.placement_strategies.iter().any(|s| s == strategy)
    {
        return Some("it does not support the placement group's strategy");
    }
    if spec.connection_tracking.is_some() && !hw.nitro {
        return Some("connectionTracking needs a Nitro instance type");
    }
    None
}

fn nested_virtualization(spec: &EC2NodeClassSpec) -> bool {
    spec.cpu_options
        .as_ref()
        .and_then(|c| c.nested_virtualization.as_deref())
        == Some("enabled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::instance_options::{ConnectionTracking, CpuOptions, NetworkInterface};

    fn spec(yaml: &str) -> EC2NodeClassSpec {
        serde_norway::from_str(yaml).unwrap()
    }

    fn base() -> EC2NodeClassSpec {
        spec(
            "amiSelectorTerms: [{alias: al2023@latest}]\nrole: r\nsubnetSelectorTerms: [{id: subnet-1}]\nsecurityGroupSelectorTerms: [{id: sg-1}]\n",
        )
    }

    /// p4d.24xlarge as EC2 describes it: four cards of 15 interfaces, four EFAs, Nitro.
    fn p4d() -> Hardware {
        Hardware {
            has_network_info: true,
            network_cards: (0..4).map(|i| (i, 15)).collect(),
            ipv4_per_interface: 50,
            max_efa: Some(4),
            nitro: true,
            placement_strategies: vec!["cluster".into(), "partition".into(), "spread".into()],
            ..Hardware::default()
        }
    }

    /// m5.large: one card of three interfaces, no EFA.
    fn m5() -> Hardware {
        Hardware {
            has_network_info: true,
            network_cards: vec![(0, 3)],
            ipv4_per_interface: 10,
            nitro: true,
            placement_strategies: vec!["cluster".into(), "partition".into(), "spread".into()],
            ..Hardware::default()
        }
    }

    fn nic(card: i32, device: i32, kind: &str) -> NetworkInterface {
        NetworkInterface {
            network_card_index: card,
            device_index: device,
            interface_type: kind.into(),
        }
    }

    #[test]
    fn an_efa_layout_needs_the_cards_and_efa_interfaces_it_names() {
        let mut s = base();
        s.network_interfaces = Some(vec![
            nic(0, 0, "interface"),
            nic(1, 0, "efa-only"),
            nic(2, 0, "efa-only"),
        ]);
        assert_eq!(
            incompatibility("p4d.24xlarge", Some(&p4d()), &s, None),
            None
        );
        assert!(incompatibility("m5.large", Some(&m5()), &s, None).is_some());
        // One card, but an EFA the type does not have.
        s.network_interfaces = Some(vec![nic(0, 0, "interface"), nic(0, 1, "efa-only")]);
        assert!(incompatibility("m5.large", Some(&m5()), &s, None).is_some());
        // Device index past the card's interfaces.
        s.network_interfaces = Some(vec![nic(0, 0, "interface"), nic(0, 3, "interface")]);
        assert!(incompatibility("m5.large", Some(&m5()), &s, None).is_some());
        s.network_interfaces = Some(vec![nic(0, 0, "interface"), nic(0, 2, "interface")]);
        assert_eq!(incompatibility("m5.large", Some(&m5()), &s, None), None);
        // Five EFAs on a four-EFA type.
        s.network_interfaces = Some(
            std::iter::once(nic(0, 0, "interface"))
                .chain((0..4).map(|c| nic(c, 1, "efa-only")))
                .chain([nic(3, 2, "efa-only")])
                .collect(),
        );
        assert!(incompatibility("p4d.24xlarge", Some(&p4d()), &s, None).is_some());
        let mut ena_off = m5();
        ena_off.ena_unsupported = true;
        s.network_interfaces = Some(vec![nic(0, 0, "interface")]);
        assert!(incompatibility("m5.large", Some(&ena_off), &s, None).is_some());
    }

    #[test]
    fn the_other_checks_follow_upstream() {
        let s = base();
        assert!(
            incompatibility("a1.large", None, &s, None).is_some(),
            "AL2023 on a1"
        );
        assert_eq!(
            incompatibility("m5.large", None, &s, None),
            None,
            "nothing asked"
        );
        let mut al2 = s.clone();
        al2.ami_family = Some(AMIFamily::AL2);
        al2.ami_selector_terms = spec("amiSelectorTerms: [{alias: al2@latest}]\nrole: r\nsubnetSelectorTerms: [{id: subnet-1}]\nsecurityGroupSelectorTerms: [{id: sg-1}]\n").ami_selector_terms;
        assert_eq!(incompatibility("a1.large", None, &al2, None), None);

        let mut nested = s.clone();
        nested.cpu_options = Some(CpuOptions {
            nested_virtualization: Some("enabled".into()),
        });
        assert!(incompatibility("m5.large", Some(&m5()), &nested, None).is_some());
        let mut capable = m5();
        capable.nested_virtualization = true;
        assert_eq!(
            incompatibility("m5.large", Some(&capable), &nested, None),
            None
        );
        nested.cpu_options = Some(CpuOptions {
            nested_virtualization: Some("disabled".into()),
        });
        assert_eq!(
            incompatibility("m5.large", Some(&m5()), &nested, None),
            None
        );

        let mut tracked = s.clone();
        tracked.connection_tracking = Some(ConnectionTracking {
            tcp_established_timeout: Some(300),
            ..ConnectionTracking::default()
        });
        let mut xen = m5();
        xen.nitro = false;
        assert!(incompatibility("t2.micro", Some(&xen), &tracked, None).is_some());
        assert_eq!(
            incompatibility("m5.large", Some(&m5()), &tracked, None),
            None
        );
        assert!(
            incompatibility("m5.large", None, &tracked, None).is_some(),
            "undescribed hardware fails a check that needs it"
        );

        let mut t2 = m5();
        t2.placement_strategies = vec!["partition".into(), "spread".into()];
        assert!(incompatibility("t2.micro", Some(&t2), &s, Some("cluster")).is_some());
        assert_eq!(
            incompatibility("t2.micro", Some(&t2), &s, Some("spread")),
            None
        );
    }
}
