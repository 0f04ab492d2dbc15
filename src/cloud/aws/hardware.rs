//! What EC2 says about each instance type's hardware beyond the catalog's resources: its
//! instance store, network cards, EFA interfaces, hypervisor, processor features and
//! placement strategies. A NodeClass's launch settings (RAID0, a network interface
//! layout, nested virtualization, connection tracking, a placement group) are only
//! possible on some types, and these facts decide which (see [`super::compatibility`]).

use std::collections::HashMap;

use aws_sdk_ec2::types::{
    EnaSupport, InstanceTypeHypervisor, InstanceTypeInfo, SupportedAdditionalProcessorFeature,
};

/// One instance type's hardware facts, from its DescribeInstanceTypes entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hardware {
    /// The instance store's total size in GB (EC2's TotalSizeInGB), if it has one.
    pub instance_store_gb: Option<i64>,
    /// EC2 reported network information at all.
    pub has_network_info: bool,
    /// ENA is `unsupported` on it.
    pub ena_unsupported: bool,
    /// Each network card: its index and how many interfaces it takes.
    pub network_cards: Vec<(i32, i32)>,
    /// IPv4 addresses per interface.
    pub ipv4_per_interface: i32,
    /// The most EFA interfaces it takes; `None` when it has no EFA.
    pub max_efa: Option<i32>,
    /// Runs on the Nitro hypervisor.
    pub nitro: bool,
    /// Supports nested virtualization.
    pub nested_virtualization: bool,
    /// The placement group strategies it can launch into (`cluster`, `partition`, `spread`).
    pub placement_strategies: Vec<String>,
}

impl Hardware {
    /// The facts of one DescribeInstanceTypes entry.
    pub fn from_info(info: &InstanceTypeInfo) -> Hardware {
        let net = info.network_info();
        Hardware {
            instance_store_gb: info
                .instance_storage_info()
                .and_then(|s| s.total_size_in_gb()),
            has_network_info: net.is_some_and(|n| !n.network_cards().is_empty()),
            ena_unsupported: net.and_then(|n| n.ena_support()) == Some(&EnaSupport::Unsupported),
            network_cards: net
                .map(|n| {
                    n.network_cards()
                        .iter()
                        .map(|c| {
                            (
                                c.network_card_index().unwrap_or(0),
                                c.maximum_network_interfaces().unwrap_or(0),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            ipv4_per_interface: net
                .and_then(|n| n.ipv4_addresses_per_interface())
                .unwrap_or(0),
            max_efa: net
                .and_then(|n| n.efa_info())
                .and_then(|e| e.maximum_efa_interfaces()),
            nitro: info.hypervisor() == Some(&InstanceTypeHypervisor::Nitro),
            nested_virtualization: info.processor_info().is_some_and(|p| {
                p.supported_features()
                    .contains(&SupportedAdditionalProcessorFeature::NestedVirtualization)
            }),
            placement_strategies: info
                .placement_group_info()
                .map(|p| {
                    p.supported_strategies()
                        .iter()
                        .map(|s| s.as_str().to_string())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Every described type's facts, by name.
pub fn of_all(infos: &[InstanceTypeInfo]) -> HashMap<String, Hardware> {
    infos
        .iter()
        .filter_map(|i| {
            Some((
                i.instance_type()?.as_str().to_string(),
                Hardware::from_info(i),
            ))
        })
        .collect()
}
