//! One watch per kind, feeding [`Change`]s to the controller's queue.
//!
//! kube-runtime's watcher does the protocol work: the initial list, resuming a dropped
//! watch from the last resourceVersion, relisting after 410 Gone, and backing off while
//! the API server is unreachable. What this adds:
//!
//! - objects arrive as untyped JSON and are converted one by one, so one malformed object
//!   is reported as a [`Change::Problem`] naming it, never a watch that fails for every
//!   object of its kind (and the last good version stays in the controller's state);
//! - after a relist, objects that were known but are no longer listed are reported
//!   deleted (they went away while the watch was down: nothing is lost), and objects
//!   listed again replace their old version (nothing is duplicated);
//! - nothing but the converted slice is kept: the controller's `ClusterState` is the one
//!   store, so 50,000 pods cost what the engine needs of them, not their full manifests.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::{Notify, mpsc};

use crate::cluster::{Change, Object, ObjectRef};

/// Converts one object of a kind; the error names the object and the field.
pub type Convert = Box<dyn Fn(DynamicObject) -> Result<Object, String> + Send + Sync>;
/// The reference a deletion of this object names.
pub type Reference = fn(&DynamicObject) -> ObjectRef;

/// Where the watches deliver, and how the loop learns that something arrived.
#[derive(Clone)]
pub struct Feed {
    pub tx: mpsc::UnboundedSender<Change>,
    pub wake: Arc<Notify>,
    /// Kinds whose initial list is complete.
    pub synced: Arc<AtomicUsize>,
}

impl Feed {
    fn send(&self, change: Change) {
        // The receiver goes away only when the cluster is dropped: the task ends then.
        let _ = self.tx.send(change);
        self.wake.notify_one();
    }
}

/// Spawns the watch of one kind. `kind` names it in problem reports.
pub fn spawn(
    api: Api<DynamicObject>,
    kind: &'static str,
    convert: Convert,
    reference: Reference,
    feed: Feed,
) -> tokio::task::JoinHandle<()> {
    spawn_with(
        api,
        watcher::Config::default(),
        kind,
        convert,
        reference,
        feed,
    )
}

/// [`spawn`] with a selector.
pub fn spawn_with(
    api: Api<DynamicObject>,
    config: watcher::Config,
    kind: &'static str,
    convert: Convert,
    reference: Reference,
    feed: Feed,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher::watcher(api, config).default_backoff());
        let mut known: HashSet<ObjectRef> = HashSet::new();
        let mut relisting: Option<HashSet<ObjectRef>> = None;
        let mut first_sync = true;
        let mut last_error: Option<String> = None;
        while let Some(event) = stream.next().await {
            if feed.tx.is_closed() {
                return;
            }
            let event = match event {
                Ok(e) => {
                    last_error = None;
                    e
                }
                Err(e) => {
                    // The watcher retries with backoff; report each new failure once.
                    let msg = format!("watch of {kind}: {e}");
                    if last_error.as_deref() != Some(&msg) {
                        tracing::warn!("{msg}");
                        feed.send(Change::Problem(msg.clone()));
                        last_error = Some(msg);
                    }
                    continue;
                }
            };
            match event {
                Event::Init => relisting = Some(HashSet::new()),
                Event::InitApply(o) | Event::Apply(o) => {
                    let r = reference(&o);
                    if let Some(seen) = relisting.as_mut() {
                        seen.insert(r.clone());
                    }
                    known.insert(r);
                    match convert(o) {
                        Ok(object) => feed.send(Change::Applied(object)),
                        Err(msg) => {
                            tracing::warn!("{msg}");
                            feed.send(Change::Problem(msg));
                        }
                    }
                }
                Event::Delete(o) => {
                    let r = reference(&o);
                    known.remove(&r);
                    feed.send(Change::Deleted(r));
                }
                Event::InitDone => {
                    if let Some(seen) = relisting.take() {
                        for gone in known.difference(&seen) {
                            feed.send(Change::Deleted(gone.clone()));
                        }
                        known = seen;
                    }
                    if first_sync {
                        first_sync = false;
                        feed.synced.fetch_add(1, Ordering::SeqCst);
                        feed.wake.notify_one();
                    }
                }
            }
        }
    })
}

/// The untyped API of a typed kind, cluster-wide (every namespace for namespaced kinds).
pub fn api_of<K>(client: kube::Client) -> Api<DynamicObject>
where
    K: kube::Resource<DynamicType = ()>,
{
    Api::all_with(client, &ApiResource::erase::<K>(&()))
}

/// Reads an untyped object as its typed kind, naming the field that did not fit.
pub fn typed<K>(kind: &str, o: DynamicObject) -> Result<K, String>
where
    K: serde::de::DeserializeOwned,
{
    let name = describe(&o);
    let value = serde_json::to_value(o).map_err(|e| format!("{kind} {name}: {e}"))?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            format!("{kind} {name}: {}", e.inner())
        } else {
            format!("{kind} {name}: {path}: {}", e.inner())
        }
    })
}

/// `namespace/name` or `name`.
pub fn describe(o: &DynamicObject) -> String {
    let name = o
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| "(unnamed)".into());
    match &o.metadata.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    }
}
