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
//! - while the API server does not answer, each kind retries with [`Backoff`] (2 s
//!   doubling to 30 s; kube-runtime's own backoff restarts before every failing list) and
//!   reports a failure once, naming the server, until the watch works again;
//! - nothing but the converted slice is kept: the controller's `ClusterState` is the one
//!   store, so 50,000 pods cost what the engine needs of them, not their full manifests.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use tokio::sync::{Notify, mpsc};

use super::convert::{self, Malformed};
use super::reach::{Backoff, causes};
use crate::cluster::{Change, Object, ObjectRef};

/// Converts one object of a kind; the error names the object and the field.
pub type Convert = Box<dyn Fn(DynamicObject) -> Result<Object, String> + Send + Sync>;
/// The reference a deletion of an object names, from its namespace and name.
pub type Reference = fn(String, String) -> ObjectRef;

/// Where the watches deliver, and how the loop learns that something arrived.
#[derive(Clone)]
pub struct Feed {
    pub tx: mpsc::UnboundedSender<Change>,
    pub wake: Arc<Notify>,
    /// Kinds whose initial list is complete.
    pub synced: Arc<AtomicUsize>,
    /// The API server's URL, for the failure reports.
    pub server: Arc<str>,
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
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        let mut backoff = Backoff::default();
        let mut known: HashSet<ObjectRef> = HashSet::new();
        let mut relisting: Option<HashSet<ObjectRef>> = None;
        let mut first_sync = true;
        let mut last_error: Option<String> = None;
        while let Some(event) = stream.next().await {
            if feed.tx.is_closed() {
                return;
            }
            let event = match event {
                // `Init` comes before every attempt to list, failing or not: no progress.
                Ok(Event::Init) => Event::Init,
                Ok(e) => {
                    if last_error.take().is_some() {
                        tracing::info!("watch of {kind}: working again");
                    }
                    backoff.reset();
                    e
                }
                Err(e) => {
                    // Report each new failure once, then retry after a growing pause.
                    let msg = format!("watch of {kind} at {}: {}", feed.server, causes(&e));
                    if last_error.as_deref() != Some(&msg) {
                        tracing::warn!("{msg}");
                        feed.send(Change::Problem(msg.clone()));
                        last_error = Some(msg);
                    }
                    tokio::time::sleep(backoff.pause()).await;
                    continue;
                }
            };
            match event {
                Event::Init => relisting = Some(HashSet::new()),
                Event::InitApply(o) | Event::Apply(o) => {
                    let r = reference_of(reference, &o);
                    if let Some(seen) = relisting.as_mut() {
                        seen.insert(r.clone());
                    }
                    known.insert(r);
                    match convert(o) {
                        Ok(object) => {
                            // A pool kept despite its problems is still reported.
                            if let Object::NodePool(p) = &object
                                && let Some(why) = p.validation_failure()
                            {
                                let name = p.metadata.name.as_deref().unwrap_or_default();
                                let msg = format!("NodePool {name}: {why}");
                                tracing::warn!("{msg}");
                                feed.send(Change::Problem(msg));
                            }
                            feed.send(Change::Applied(object))
                        }
                        Err(msg) => {
                            tracing::warn!("{msg}");
                            feed.send(Change::Problem(msg));
                        }
                    }
                }
                Event::Delete(o) => {
                    let r = reference_of(reference, &o);
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

fn reference_of(reference: Reference, o: &DynamicObject) -> ObjectRef {
    reference(
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// Watches every object of kind `K`, cluster-wide (every namespace for namespaced kinds):
/// each object is decoded as `K` on its own ([`convert::decode`] names the field that
/// does not fit) and handed to `to_object`.
pub fn spawn_kind<K>(
    client: kube::Client,
    kind: &'static str,
    to_object: impl Fn(K) -> Result<Object, Malformed> + Send + Sync + 'static,
    reference: Reference,
    feed: Feed,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned,
{
    let api = Api::all_with(client, &ApiResource::erase::<K>(&()));
    let convert: Convert = Box::new(move |o| {
        let value = serde_json::to_value(o).map_err(|e| format!("{kind}: {e}"))?;
        let object: K = convert::decode(kind, value).map_err(|e| e.to_string())?;
        to_object(object).map_err(|e| e.to_string())
    });
    spawn(api, kind, convert, reference, feed)
}

/// [`spawn_kind`] for kinds that decode themselves from JSON (a NodePool sets aside what
/// it cannot read instead of failing as a whole).
pub fn spawn_json<K>(
    client: kube::Client,
    kind: &'static str,
    to_object: impl Fn(serde_json::Value) -> Result<Object, Malformed> + Send + Sync + 'static,
    reference: Reference,
    feed: Feed,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>,
{
    let api = Api::all_with(client, &ApiResource::erase::<K>(&()));
    let convert: Convert = Box::new(move |o| {
        let value = serde_json::to_value(o).map_err(|e| format!("{kind}: {e}"))?;
        to_object(value).map_err(|e| e.to_string())
    });
    spawn(api, kind, convert, reference, feed)
}
