//! The price book: what an offering costs, looked up by instance type, zone and capacity
//! type. Prices are the cloud's knowledge (its catalog or the provider's price list); a
//! NodeClaim read back from the API server carries none, so the kube backend asks here
//! for the price of each one it converts.

use std::sync::Arc;

use crate::engine::catalog::{CapacityType, Catalog};

/// Looks up an offering's price (instance type, zone, capacity type); None when the
/// cloud does not offer it.
pub type PriceBook = Arc<dyn Fn(&str, &str, CapacityType) -> Option<f64> + Send + Sync>;

/// Prices of a catalog (the built-in one for the simulated and kwok clouds): the offering
/// in the zone, else the same capacity type in any zone, so a node in a zone the catalog
/// does not list still has a cost.
pub fn of_catalog(catalog: Arc<Catalog>) -> PriceBook {
    Arc::new(move |instance_type: &str, zone: &str, ct: CapacityType| {
        let it = catalog.get(instance_type)?;
        it.offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == ct)
            .or_else(|| it.offerings.iter().find(|o| o.capacity_type == ct))
            .map(|o| o.price)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_prices_its_offerings_and_falls_back_across_zones() {
        let catalog = Catalog::builtin_shared();
        let it = catalog
            .get("m5.large")
            .expect("the built-in catalog has m5.large");
        let offering = it.offerings.first().expect("m5.large has offerings");
        let book = of_catalog(Arc::clone(&catalog));
        assert_eq!(
            book("m5.large", &offering.zone, offering.capacity_type),
            Some(offering.price)
        );
        assert!(book("m5.large", "mars-1a", offering.capacity_type).is_some());
        assert_eq!(
            book("no.such-type", &offering.zone, offering.capacity_type),
            None
        );
    }
}
