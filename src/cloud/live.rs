//! The clouds a live cluster can use, behind one type so the binary's cluster modes stay
//! free of generics: the KWOK-style cloud (`--cloud sim`) or EC2 (`--cloud aws`).

use std::future::Future;
use std::sync::Arc;

use super::aws::AwsCloud;
use super::kwok::KwokCloud;
use super::{
    CloudError, CloudProvider, Instance, Interruption, LaunchError, LaunchRequest, Launched,
};
use crate::api::nodepool::NodePool;
use crate::cluster::NodeClaimObject;
use crate::engine::catalog::InstanceType;

/// One of the live clouds.
pub enum LiveCloud {
    Kwok(KwokCloud),
    Aws(Box<AwsCloud>),
}

impl CloudProvider for LiveCloud {
    fn instance_types(&self, pool: &NodePool) -> Vec<Arc<InstanceType>> {
        match self {
            LiveCloud::Kwok(c) => c.instance_types(pool),
            LiveCloud::Aws(c) => c.instance_types(pool),
        }
    }

    async fn create(&mut self, request: LaunchRequest) -> Result<Launched, LaunchError> {
        match self {
            LiveCloud::Kwok(c) => c.create(request).await,
            LiveCloud::Aws(c) => c.create(request).await,
        }
    }

    async fn create_all(
        &mut self,
        requests: Vec<LaunchRequest>,
    ) -> Vec<Result<Launched, LaunchError>> {
        match self {
            LiveCloud::Kwok(c) => c.create_all(requests).await,
            LiveCloud::Aws(c) => c.create_all(requests).await,
        }
    }

    fn delete(&mut self, provider_id: &str) -> impl Future<Output = Result<(), CloudError>> + Send {
        let id = provider_id.to_string();
        async move {
            match self {
                LiveCloud::Kwok(c) => c.delete(&id).await,
                LiveCloud::Aws(c) => c.delete(&id).await,
            }
        }
    }

    async fn list(&mut self) -> Result<Vec<Instance>, CloudError> {
        match self {
            LiveCloud::Kwok(c) => c.list().await,
            LiveCloud::Aws(c) => c.list().await,
        }
    }

    fn interruptions(&mut self) -> Vec<Interruption> {
        match self {
            LiveCloud::Kwok(c) => c.interruptions(),
            LiveCloud::Aws(c) => c.interruptions(),
        }
    }

    fn prices_note(&self) -> Option<String> {
        match self {
            LiveCloud::Kwok(c) => c.prices_note(),
            LiveCloud::Aws(c) => c.prices_note(),
        }
    }

    fn acknowledge(&mut self, handled: &[Interruption]) {
        match self {
            LiveCloud::Kwok(c) => c.acknowledge(handled),
            LiveCloud::Aws(c) => c.acknowledge(handled),
        }
    }

    fn drifted(&self, claim: &NodeClaimObject, pool: &NodePool) -> Option<String> {
        match self {
            LiveCloud::Kwok(c) => c.drifted(claim, pool),
            LiveCloud::Aws(c) => c.drifted(claim, pool),
        }
    }

    fn generation(&self) -> u64 {
        match self {
            LiveCloud::Kwok(c) => c.generation(),
            LiveCloud::Aws(c) => c.generation(),
        }
    }

    fn unlaunchable(&self, pool: &NodePool) -> Option<String> {
        match self {
            LiveCloud::Kwok(c) => c.unlaunchable(pool),
            LiveCloud::Aws(c) => c.unlaunchable(pool),
        }
    }

    fn offering_scope(&self, pool: &NodePool) -> Option<String> {
        match self {
            LiveCloud::Kwok(c) => c.offering_scope(pool),
            LiveCloud::Aws(c) => c.offering_scope(pool),
        }
    }

    fn expiring(&self) -> Vec<String> {
        match self {
            LiveCloud::Kwok(c) => c.expiring(),
            LiveCloud::Aws(c) => c.expiring(),
        }
    }
}

#[cfg(test)]
mod tests {
    /// The names of the `fn`s declared in `text` between `start` and the next line that
    /// is exactly `}`.
    fn fns_in(text: &str, start: &str) -> Vec<String> {
        let body = &text[text.find(start).expect("block")..];
        let body = &body[..body.find("\n}\n").expect("block end")];
        body.lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let rest = l.strip_prefix("async fn ").or(l.strip_prefix("fn "))?;
                Some(rest.split(['(', '<']).next()?.to_string())
            })
            .collect()
    }

    /// Every method of the provider trait is passed through to the wrapped cloud: a
    /// defaulted method left out answers the default for EC2 too (the capacity-block
    /// drain was lost that way: `expiring` always said nothing from the binary).
    #[test]
    fn every_provider_method_is_delegated() {
        let declared = fns_in(include_str!("mod.rs"), "pub trait CloudProvider");
        let delegated = fns_in(include_str!("live.rs"), "impl CloudProvider for LiveCloud");
        assert!(declared.len() > 10, "{declared:?}");
        let missing: Vec<&String> = declared.iter().filter(|f| !delegated.contains(f)).collect();
        assert!(
            missing.is_empty(),
            "LiveCloud does not delegate {missing:?}"
        );
    }
}
