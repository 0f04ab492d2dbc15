//! Upstream Karpenter's `FEATURE_GATES` and `MIN_VALUES_POLICY` settings, read the same
//! way from the command line, the environment and a scenario file (upstream
//! `pkg/operator/options/options.go`). They switch engine behaviour (spot-to-spot
//! consolidation, the minValues policy), so the flags and scenario files both read them
//! here.

use crate::engine::scheduling::MinValuesPolicy;

/// The behaviour the settings switch on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Features {
    /// `SpotToSpotConsolidation`: a spot node may be replaced by a cheaper spot node.
    pub spot_to_spot: bool,
    /// `NodeRepair`: nodes unhealthy past their toleration are repaired (`engine::repair`).
    pub node_repair: bool,
    /// Split consolidation (ours, not an upstream setting): the least share of a node's
    /// price, in percent, a replacement by several cheaper nodes must save; `None` is
    /// off.
    pub split_percent: Option<f64>,
    pub min_values_policy: MinValuesPolicy,
}

/// Upstream's gates that are accepted but change nothing here, so upstream's settings
/// carry over unchanged.
const INERT_GATES: [&str; 3] = ["ReservedCapacity", "NodeOverlay", "StaticCapacity"];

impl Features {
    /// Reads `gates` (`Name=true,Other=false`; a bare name is true) and the minValues
    /// policy (`Strict` or `BestEffort`). The error names the part that is wrong, for the
    /// caller to prefix with where it came from.
    pub fn parse(gates: &str, min_values_policy: &str) -> Result<Features, (Setting, String)> {
        let mut f = Features::default();
        for gate in gates.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            let (name, value) = gate.split_once('=').unwrap_or((gate, "true"));
            let (name, value) = (name.trim(), value.trim());
            let on = match value {
                "true" => true,
                "false" => false,
                v => {
                    return Err((
                        Setting::FeatureGates,
                        format!("{name}={v}: expected true or false"),
                    ));
                }
            };
            match name {
                "SpotToSpotConsolidation" => f.spot_to_spot = on,
                "NodeRepair" => f.node_repair = on,
                n if INERT_GATES.contains(&n) => {}
                other => {
                    return Err((
                        Setting::FeatureGates,
                        format!(
                            "unknown gate {other:?} (known: SpotToSpotConsolidation, NodeRepair, {})",
                            INERT_GATES.join(", ")
                        ),
                    ));
                }
            }
        }
        f.min_values_policy = match min_values_policy {
            "Strict" => MinValuesPolicy::Strict,
            "BestEffort" => MinValuesPolicy::BestEffort,
            other => {
                return Err((
                    Setting::MinValuesPolicy,
                    format!("{other:?}: expected Strict or BestEffort"),
                ));
            }
        };
        Ok(f)
    }
}

/// Checks a split consolidation share: a percentage above 0, at most 100.
pub fn split_percent(percent: f64) -> Result<f64, String> {
    if percent.is_finite() && percent > 0.0 && percent <= 100.0 {
        Ok(percent)
    } else {
        Err(format!(
            "{percent}: expected the share of a node's price a split must save, in percent (above 0, at most 100; e.g. 20)"
        ))
    }
}

/// Which setting a [`Features::parse`] error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    FeatureGates,
    MinValuesPolicy,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_and_policy_read_as_upstream_writes_them() {
        let f = Features::parse(
            "SpotToSpotConsolidation=true, NodeRepair=false",
            "BestEffort",
        )
        .unwrap();
        assert!(f.spot_to_spot);
        assert_eq!(f.min_values_policy, MinValuesPolicy::BestEffort);
        assert!(
            Features::parse("SpotToSpotConsolidation", "Strict")
                .unwrap()
                .spot_to_spot
        );
        assert_eq!(Features::parse("", "Strict").unwrap(), Features::default());
        let (which, why) = Features::parse("Spot=yes", "Strict").unwrap_err();
        assert_eq!(which, Setting::FeatureGates);
        assert!(why.contains("Spot=yes: expected true or false"), "{why}");
        let (_, why) = Features::parse("Bogus", "Strict").unwrap_err();
        assert!(why.contains("unknown gate \"Bogus\""), "{why}");
        let (which, _) = Features::parse("", "Loose").unwrap_err();
        assert_eq!(which, Setting::MinValuesPolicy);
    }
}
