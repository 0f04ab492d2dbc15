//! On-demand prices of the region in use (upstream `pkg/providers/pricing/pricing.go` and
//! its controller, `pkg/controllers/providers/pricing`): the Pricing API's GetProducts
//! for AmazonEC2 in the region (Linux, no pre-installed software, shared tenancy and,
//! separately, bare metal), read at start and every 12 hours. Until it answers, or when
//! it cannot (no endpoint, no permission, an isolated VPC), the built-in table of AWS's
//! published us-east-1 prices stands in, and says so ([`Source::note`]): prices then are
//! us-east-1's in every region. A failed refresh keeps the prices last read.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_pricing::types::{Filter, FilterType};
use serde::Deserialize;

use super::sdk_error;
use crate::cloud::CloudError;

/// How often prices are read again (upstream's pricing controller requeues every 12 h).
pub const REFRESH: Duration = Duration::from_secs(12 * 3600);

/// Where the on-demand prices in use come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// The Pricing API, for this region.
    PricingApi { region: String },
    /// The built-in us-east-1 table, and why.
    BuiltIn { why: String },
}

impl Source {
    /// What the console and the log say about prices that are not the region's own.
    pub fn note(&self) -> Option<String> {
        match self {
            Source::PricingApi { .. } => None,
            Source::BuiltIn { why } => Some(format!(
                "on-demand prices are the built-in us-east-1 table (fallback): {why}"
            )),
        }
    }
}

/// The on-demand price of each instance type, and where they come from.
#[derive(Clone, Debug, PartialEq)]
pub struct OnDemand {
    pub prices: BTreeMap<String, f64>,
    pub source: Source,
}

impl Default for OnDemand {
    /// The built-in table, until the Pricing API answers.
    fn default() -> Self {
        OnDemand {
            prices: super::instance_types::builtin_on_demand(),
            source: Source::BuiltIn {
                why: "the Pricing API has not answered yet".into(),
            },
        }
    }
}

/// The Pricing API's own region for a region (it answers in a few regions only).
pub fn api_region(region: &str) -> &'static str {
    if region.starts_with("ap-") {
        "ap-south-1"
    } else if region.starts_with("cn-") {
        "cn-northwest-1"
    } else {
        "us-east-1"
    }
}

fn term(field: &str, value: &str) -> Filter {
    Filter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .expect("field, type and value are set")
}

/// Reads the region's prices: shared-tenancy instances and bare metal, every page.
pub async fn fetch(
    client: &aws_sdk_pricing::Client,
    region: &str,
) -> Result<BTreeMap<String, f64>, CloudError> {
    let mut prices = BTreeMap::new();
    for (tenancy, family) in [
        ("Shared", "Compute Instance"),
        ("Dedicated", "Compute Instance (bare metal)"),
    ] {
        let mut token: Option<String> = None;
        loop {
            let out = client
                .get_products()
                .service_code("AmazonEC2")
                .filters(term("regionCode", region))
                .filters(term("serviceCode", "AmazonEC2"))
                .filters(term("preInstalledSw", "NA"))
                .filters(term("operatingSystem", "Linux"))
                .filters(term("capacitystatus", "Used"))
                .filters(term("marketoption", "OnDemand"))
                .filters(term("tenancy", tenancy))
                .filters(term("productFamily", family))
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| sdk_error("GetProducts", e))?;
            prices.extend(parse_price_list(out.price_list(), currency(region)));
            match out.next_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
    }
    if prices.is_empty() {
        return Err(CloudError(format!(
            "GetProducts: no on-demand prices for region {region}"
        )));
    }
    Ok(prices)
}

fn currency(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "CNY"
    } else {
        "USD"
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Item {
    product: Product,
    terms: Terms,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Product {
    attributes: Attributes,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Attributes {
    #[serde(rename = "instanceType")]
    instance_type: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Terms {
    #[serde(rename = "OnDemand")]
    on_demand: BTreeMap<String, Term>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Term {
    #[serde(rename = "priceDimensions")]
    dimensions: BTreeMap<String, Dimension>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Dimension {
    #[serde(rename = "pricePerUnit")]
    per_unit: BTreeMap<String, String>,
}

/// One page's price-list items (each a JSON document): the hourly price per instance
/// type. Items without an instance type or a positive price are skipped, as upstream
/// skips them; an item that is not JSON is logged and skipped.
pub fn parse_price_list(items: &[String], currency: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for raw in items {
        let item: Item = match serde_json::from_str(raw) {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!("Pricing API: a price-list item is not JSON ({e}); skipped");
                continue;
            }
        };
        let name = item.product.attributes.instance_type;
        if name.is_empty() {
            continue;
        }
        for d in item
            .terms
            .on_demand
            .values()
            .flat_map(|t| t.dimensions.values())
        {
            if let Some(p) = d.per_unit.get(currency).and_then(|v| v.parse::<f64>().ok())
                && p > 0.0
            {
                out.insert(name.clone(), p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, usd: &str) -> String {
        format!(
            r#"{{"product":{{"productFamily":"Compute Instance","attributes":{{"instanceType":"{name}","regionCode":"eu-west-1"}}}},"terms":{{"OnDemand":{{"X.JRTCKXETXF":{{"priceDimensions":{{"X.JRTCKXETXF.6YS6EN2CT7":{{"unit":"Hrs","pricePerUnit":{{"USD":"{usd}"}}}}}}}}}}}}}}"#
        )
    }

    #[test]
    fn a_price_list_page_gives_each_types_hourly_price() {
        let page = vec![
            item("m5.large", "0.1070000000"),
            item("c5.large", "0.0000000000"),
            item("", "0.5"),
            "{not json".to_string(),
            item("r5.large", "0.1410000000"),
        ];
        let prices = parse_price_list(&page, "USD");
        assert_eq!(
            prices,
            BTreeMap::from([("m5.large".into(), 0.107), ("r5.large".into(), 0.141)])
        );
        assert!(parse_price_list(&page, "CNY").is_empty());
    }

    #[test]
    fn the_pricing_api_is_asked_in_its_own_regions_and_the_fallback_says_so() {
        assert_eq!(api_region("eu-west-1"), "us-east-1");
        assert_eq!(api_region("ap-southeast-2"), "ap-south-1");
        assert_eq!(api_region("cn-north-1"), "cn-northwest-1");
        assert_eq!(
            Source::PricingApi {
                region: "eu-west-1".into()
            }
            .note(),
            None
        );
        let note = Source::BuiltIn {
            why: "GetProducts: access denied".into(),
        }
        .note()
        .unwrap();
        assert!(
            note.contains("us-east-1") && note.contains("access denied"),
            "{note}"
        );
    }
}
