//! The instance-level options of an EC2NodeClass: the CRD rules on
//! `placementGroupSelector`, `networkInterfaces`, `ipPrefixCount`, `connectionTracking`
//! and `cpuOptions` (upstream `pkg/apis/v1/ec2nodeclass.go` markers, v1.14.1).

use super::super::{Violations, check_max};
use crate::api::ec2nodeclass::EC2NodeClassSpec;

/// CRD `maxItems` of `networkInterfaces`.
const MAX_INTERFACES: usize = 150;

pub(super) fn check(out: &mut Violations, spec: &EC2NodeClassSpec) {
    if let Some(pg) = &spec.placement_group_selector {
        let path = "spec.placementGroupSelector";
        match (&pg.name, &pg.id) {
            (None, None) => out.push(path, "expected at least one, got none, ['name', 'id']"),
            (Some(_), Some(_)) => out.push(path, "'name' and 'id' are mutually exclusive"),
            _ => {}
        }
        if pg.name.as_deref() == Some("") {
            out.push(&format!("{path}.name"), "must not be empty");
        }
        if let Some(id) = &pg.id
            && !is_placement_group_id(id)
        {
            out.push(
                &format!("{path}.id"),
                format!(
                    "invalid id {id:?}: expected pg- followed by lower-case letters and digits"
                ),
            );
        }
    }
    if let Some(nics) = &spec.network_interfaces {
        check_interfaces(out, nics);
    }
    if let Some(n) = spec.ip_prefix_count
        && n < 0
    {
        out.push(
            "spec.ipPrefixCount",
            format!("must be at least 0, found {n}"),
        );
    }
    if let Some(c) = &spec.connection_tracking {
        let path = "spec.connectionTracking";
        if c.tcp_established_timeout.is_none()
            && c.udp_stream_timeout.is_none()
            && c.udp_timeout.is_none()
        {
            out.push(
                path,
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
            );
        }
        for (field, value, low, high) in [
            (
                "tcpEstablishedTimeout",
                c.tcp_established_timeout,
                60,
                432_000,
            ),
            ("udpStreamTimeout", c.udp_stream_timeout, 60, 180),
            ("udpTimeout", c.udp_timeout, 30, 60),
        ] {
            if let Some(v) = value
                && !(low..=high).contains(&v)
            {
                out.push(
                    &format!("{path}.{field}"),
                    format!("must be between {low} and {high} seconds, found {v}"),
                );
            }
        }
    }
    if let Some(v) = spec
        .cpu_options
        .as_ref()
        .and_then(|c| c.nested_virtualization.as_deref())
        && !["enabled", "disabled"].contains(&v)
    {
        out.push(
            "spec.cpuOptions.nestedVirtualization",
            format!("unsupported value {v:?}: expected enabled or disabled"),
        );
    }
}

/// `^pg-[0-9a-z]+$`.
fn is_placement_group_id(id: &str) -> bool {
    id.strip_prefix("pg-").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    })
}

/// The list's CEL rules: a primary interface (card 0, device 0, `interface`); no two
/// interfaces on one card and device index; at most one EFA-only interface per card.
fn check_interfaces(out: &mut Violations, nics: &[crate::api::instance_options::NetworkInterface]) {
    let path = "spec.networkInterfaces";
    check_max(out, path, "network interfaces", nics.len(), MAX_INTERFACES);
    if !nics.is_empty()
        && !nics.iter().any(|n| {
            n.network_card_index == 0 && n.device_index == 0 && n.interface_type == "interface"
        })
    {
        out.push(
            path,
            "networkInterfaces must include a primary interface with interfaceType='interface'",
        );
    }
    for (i, n) in nics.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if n.network_card_index < 0 {
            out.push(&format!("{at}.networkCardIndex"), "must be at least 0");
        }
        if n.device_index < 0 {
            out.push(&format!("{at}.deviceIndex"), "must be at least 0");
        }
        if !["interface", "efa-only"].contains(&n.interface_type.as_str()) {
            out.push(
                &format!("{at}.interfaceType"),
                format!(
                    "unsupported value {:?}: expected interface or efa-only",
                    n.interface_type
                ),
            );
        }
        let same_slot = nics[..i].iter().any(|m| {
            m.network_card_index == n.network_card_index && m.device_index == n.device_index
        });
        let second_efa = n.interface_type == "efa-only"
            && nics[..i].iter().any(|m| {
                m.network_card_index == n.network_card_index && m.interface_type == "efa-only"
            });
        if same_slot || second_efa {
            out.push(
                &at,
                format!(
                    "networkInterfaces must not have duplicate networkCardIndex and deviceIndex \
                     pairs, and can have at most one efa device per network card (card {}, \
                     device {})",
                    n.network_card_index, n.device_index
                ),
            );
        }
    }
}
