//! The AWS provider's Kubernetes side (upstream's EC2NodeClass status controller): watches
//! EC2NodeClasses into the provider and writes their resolved status back, only while
//! this replica leads (a standby resolves too, so it takes over warm, but never writes).

use std::sync::Arc;

use futures_util::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{Notify, mpsc, watch};

use super::AwsHandle;
use crate::api::ec2nodeclass::EC2NodeClass;

/// Starts the watch, the refreshers and the status writer. `leading` is the leader
/// election's state (`None`: always lead, as `run` does).
pub fn spawn(
    handle: AwsHandle,
    client: kube::Client,
    leading: Option<watch::Receiver<bool>>,
    wake: Arc<Notify>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let changed = Arc::new(Notify::new());
    handle.spawn_refreshers(tx, wake.clone(), changed.clone());

    let api: Api<EC2NodeClass> = Api::all(client.clone());
    let h = handle.clone();
    tokio::spawn(async move {
        let mut stream =
            std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
        let mut listed: Vec<String> = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Apply(nc) | Event::InitApply(nc)) => {
                    if let Some(name) = nc.metadata.name.clone() {
                        listed.push(name);
                    }
                    if h.set_nodeclass(&nc) {
                        changed.notify_one();
                    }
                }
                Ok(Event::Delete(nc)) => {
                    h.remove_nodeclass(nc.metadata.name.as_deref().unwrap_or_default());
                    wake.notify_one();
                }
                Ok(Event::Init) => listed.clear(),
                Ok(Event::InitDone) => {
                    // NodeClasses deleted while the watch was down.
                    for name in h.nodeclass_names() {
                        if !listed.contains(&name) {
                            h.remove_nodeclass(&name);
                        }
                    }
                    h.mark_listed();
                    wake.notify_one();
                }
                // A malformed EC2NodeClass is named in the log and skipped; the others
                // keep arriving (kube-runtime's watcher continues after the error).
                Err(e) => tracing::warn!("watching EC2NodeClasses: {e}"),
            }
        }
    });

    let api: Api<EC2NodeClass> = Api::all(client);
    tokio::spawn(async move {
        while let Some((name, status)) = rx.recv().await {
            if leading.as_ref().is_some_and(|l| !*l.borrow()) {
                continue;
            }
            let patch = serde_json::json!({ "status": status });
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::warn!("writing the status of EC2NodeClass {name}: {e}");
            }
        }
    });
}
