//! The Kubernetes backend: the [`Cluster`] trait over a real API server through kube-rs.
//!
//! Watches (one task per kind, [`watch`]) turn API objects into [`Change`]s on a queue
//! that [`Cluster::changes`] drains; writes ([`writes`]) are API calls with conflict
//! re-reads and throttling backoff ([`retry`]); notices become `events.k8s.io/v1` Events
//! ([`events`]). Leader election for the in-cluster controller is in [`lease`], and the
//! approval protocol's annotations in [`protocol`].

pub mod convert;
pub mod events;
pub mod lease;
pub mod protocol;
pub mod reach;
pub mod replace;
pub mod retry;
pub mod watch;
pub mod writes;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ApiResource, DynamicObject};
use tokio::sync::{Notify, mpsc};

use crate::api::nodeclaim::NodeClaim;
use crate::api::nodepool::NodePool;
use crate::cloud::prices::PriceBook;
use crate::cluster::{Change, Cluster, ClusterError, Notice, Object, ObjectRef, Write};
use crate::engine::catalog::CapacityType;
use crate::engine::pod::PodKey;
use watch::Feed;
use writes::Writer;

/// The cluster-wide console object: a ConfigMap of this name in the controller's
/// namespace, whose annotations hold the pause of every pool.
pub const SETTINGS: &str = "karpenter-tui";

/// A connection: the client, and who it acts as (for the journal and Events).
pub struct Connection {
    pub client: kube::Client,
    /// The kubeconfig user (or the in-cluster service account).
    pub user: String,
    /// The context's name, or "in-cluster".
    pub context: String,
    /// The context's namespace (or the pod's), where the settings object and the Lease
    /// live.
    pub namespace: String,
    /// The API server's URL, which nodes the AWS provider launches join.
    pub server: String,
    /// The API server's CA as base64 PEM (EKS's certificateAuthority form), if configured.
    pub ca_bundle: Option<String>,
}

/// Connects with a kubeconfig file and context, or, with neither given, the way kubectl
/// does: `$KUBECONFIG` (a list of files, merged) or `~/.kube/config`, else the in-cluster
/// service account. Every kubeconfig problem names the file it is in. Nothing is sent to
/// the API server yet ([`reach`] does that).
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Connection, String> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let (config, user, context_name) = match kubeconfig_file(kubeconfig)? {
        Some((source, file)) => {
            let name = context
                .map(str::to_string)
                .or_else(|| file.current_context.clone().filter(|c| !c.is_empty()))
                .ok_or_else(|| {
                    format!("kubeconfig {source}: no current-context set; pass --context")
                })?;
            let Some(entry) = file.contexts.iter().find(|c| c.name == name) else {
                let known: Vec<&str> = file.contexts.iter().map(|c| c.name.as_str()).collect();
                return Err(format!(
                    "kubeconfig {source}: no context {name:?} (it has: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            };
            let user = entry
                .context
                .as_ref()
                .and_then(|c| c.user.clone())
                .unwrap_or_else(|| "unknown".into());
            let config = kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| format!("kubeconfig {source}, context {name:?}: {e}"))?;
            (config, user, name)
        }
        None => {
            let config = kube::Config::incluster().map_err(|e| {
                format!("no kubeconfig ($KUBECONFIG, ~/.kube/config) and not in a cluster: {e}")
            })?;
            let sa =
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .map(|ns| format!("system:serviceaccount:{}", ns.trim()))
                    .unwrap_or_else(|_| "in-cluster".into());
            (config, sa, "in-cluster".into())
        }
    };
    let mut config = config;
    // Retries are ours (retry.rs): kube's own retry layer would re-send a 429 up to 15
    // times, hiding a PodDisruptionBudget's refusal of an eviction for minutes.
    config.default_retry = false;
    let namespace =
        std::env::var("POD_NAMESPACE").unwrap_or_else(|_| config.default_namespace.clone());
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let ca_bundle = config
        .root_cert
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(ca_bundle);
    let client = kube::Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))?;
    Ok(Connection {
        client,
        user,
        context: context_name,
        namespace,
        server,
        ca_bundle,
    })
}

/// The kubeconfig to use and where it came from (for messages): `--kubeconfig`, else the
/// files `$KUBECONFIG` lists (merged as kubectl merges them, the first file's choices
/// winning), else `~/.kube/config` if it exists; `None` means in-cluster.
fn kubeconfig_file(
    flag: Option<&Path>,
) -> Result<Option<(String, kube::config::Kubeconfig)>, String> {
    use kube::config::Kubeconfig;
    let read = |path: &Path, named_by: &str| -> Result<Kubeconfig, String> {
        if !path.exists() {
            return Err(format!(
                "kubeconfig {}: no such file ({named_by})",
                path.display()
            ));
        }
        Kubeconfig::read_from(path).map_err(|e| format!("kubeconfig {}: {e}", path.display()))
    };
    if let Some(path) = flag {
        return Ok(Some((
            path.display().to_string(),
            read(path, "--kubeconfig")?,
        )));
    }
    if let Some(list) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let paths: Vec<std::path::PathBuf> = std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        let mut merged: Option<Kubeconfig> = None;
        for path in &paths {
            let file = read(path, "named by $KUBECONFIG")?;
            merged = Some(match merged {
                None => file,
                Some(m) => m
                    .merge(file)
                    .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?,
            });
        }
        let source = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        return Ok(merged.map(|m| (source, m)));
    }
    let Some(home) = dirs::home_dir() else {
        return Ok(None);
    };
    let default = home.join(".kube").join("config");
    if !default.exists() {
        return Ok(None);
    }
    Ok(Some((
        default.display().to_string(),
        read(&default, "the default")?,
    )))
}

/// DER certificates as EKS gives a cluster's CA: base64 of the PEM text.
fn ca_bundle(certs: &[Vec<u8>]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut pem = String::new();
    for der in certs {
        let body = b64.encode(der);
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        // Base64 is ASCII, so 64-byte chunks are whole characters.
        for line in body.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    b64.encode(pem)
}

/// A live cluster behind the [`Cluster`] trait.
pub struct KubeCluster {
    rx: mpsc::UnboundedReceiver<Change>,
    feed: Feed,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    kinds: usize,
    writer: Writer,
    notices: mpsc::UnboundedSender<Notice>,
    /// What writes need to know of what the watches saw: the pools (owner and
    /// nodeClassRef of a new NodeClaim) and which Node a NodeClaim launched.
    pools: BTreeMap<String, NodePool>,
    claim_provider: HashMap<String, String>,
    node_of_provider: HashMap<String, String>,
}

impl KubeCluster {
    /// The API client the writes go through (a what-if reads the cluster with it).
    pub fn client(&self) -> kube::Client {
        self.writer.client.clone()
    }

    /// Starts the watches. `identity` names this process in the Events it writes.
    pub fn start(conn: &Connection, prices: PriceBook, identity: &str) -> KubeCluster {
        let (tx, rx) = mpsc::unbounded_channel();
        let feed = Feed {
            tx,
            wake: Arc::new(Notify::new()),
            synced: Arc::new(AtomicUsize::new(0)),
            server: conn.server.as_str().into(),
        };
        let client = conn.client.clone();
        let f = || feed.clone();
        let book = prices.clone();
        let price = move |t: &str, z: &str, c: CapacityType| book(t, z, c);
        let mut tasks = vec![
            watch::spawn_json::<NodePool>(
                client.clone(),
                "NodePool",
                |np| convert::nodepool_value(np).map(|p| Object::NodePool(Box::new(p))),
                |_, name| ObjectRef::NodePool(name),
                f(),
            ),
            watch::spawn_kind::<NodeClaim>(
                client.clone(),
                "NodeClaim",
                move |nc| convert::nodeclaim(&nc, &price).map(|c| Object::NodeClaim(Box::new(c))),
                |_, name| ObjectRef::NodeClaim(name),
                f(),
            ),
            watch::spawn_kind::<Node>(
                client.clone(),
                "Node",
                |n| convert::node(&n).map(|n| Object::Node(Box::new(n))),
                |_, name| ObjectRef::Node(name),
                f(),
            ),
            watch::spawn_kind::<Pod>(
                client.clone(),
                "Pod",
                |p| convert::pod(&p).map(|p| Object::Pod(Box::new(p))),
                |namespace, name| ObjectRef::Pod(PodKey { namespace, name }),
                f(),
            ),
            watch::spawn_kind::<PodDisruptionBudget>(
                client.clone(),
                "PodDisruptionBudget",
                |p| convert::pdb(&p).map(|p| Object::Pdb(Box::new(p))),
                ObjectRef::Pdb,
                f(),
            ),
            watch::spawn_kind::<DaemonSet>(
                client.clone(),
                "DaemonSet",
                |d| convert::daemonset(&d).map(|d| Object::DaemonSet(Box::new(d))),
                ObjectRef::DaemonSet,
                f(),
            ),
        ];
        let settings: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &conn.namespace,
            &ApiResource::erase::<ConfigMap>(&()),
        );
        tasks.push(watch::spawn_with(
            settings,
            kube::runtime::watcher::Config::default().fields(&format!("metadata.name={SETTINGS}")),
            "ConfigMap",
            Box::new(|o| {
                Ok(Object::Settings(
                    o.metadata
                        .annotations
                        .unwrap_or_default()
                        .into_iter()
                        .collect(),
                ))
            }),
            |_, _| ObjectRef::Settings,
            f(),
        ));
        let kinds = tasks.len();
        let (notices, notice_rx) = mpsc::unbounded_channel();
        tasks.push(events::spawn(
            client.clone(),
            identity.to_string(),
            notice_rx,
        ));
        KubeCluster {
            rx,
            feed,
            tasks,
            kinds,
            writer: Writer {
                client,
                namespace: conn.namespace.clone(),
            },
            notices,
            pools: BTreeMap::new(),
            claim_provider: HashMap::new(),
            node_of_provider: HashMap::new(),
        }
    }

    /// True once every watch has listed its kind: the controller may act (`/readyz`).
    pub fn watches_synced(&self) -> bool {
        self.feed.synced.load(Ordering::SeqCst) >= self.kinds
    }

    /// Notified whenever a change arrives: the loop reconciles then, not on a timer.
    pub fn wake(&self) -> Arc<Notify> {
        self.feed.wake.clone()
    }

    /// Watch the pools, claims and nodes go by to answer writes.
    fn observe(&mut self, change: &Change) {
        match change {
            Change::Applied(Object::NodePool(p)) => {
                let name = p.metadata.name.clone().unwrap_or_default();
                self.pools.insert(name, (**p).clone());
            }
            Change::Applied(Object::NodeClaim(c)) => {
                if let Some(l) = &c.launched {
                    self.claim_provider
                        .insert(c.name.clone(), l.provider_id.clone());
                }
            }
            Change::Applied(Object::Node(n)) if !n.provider_id.is_empty() => {
                self.node_of_provider
                    .insert(n.provider_id.clone(), n.name.clone());
            }
            Change::Deleted(ObjectRef::NodePool(name)) => {
                self.pools.remove(name);
            }
            Change::Deleted(ObjectRef::NodeClaim(name)) => {
                self.claim_provider.remove(name);
            }
            Change::Deleted(ObjectRef::Node(name)) => {
                self.node_of_provider.retain(|_, n| n != name);
            }
            _ => {}
        }
    }
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Cluster for KubeCluster {
    fn changes(&mut self) -> Vec<Change> {
        let mut out = Vec::new();
        while let Ok(c) = self.rx.try_recv() {
            self.observe(&c);
            out.push(c);
        }
        out
    }

    fn write(&mut self, write: Write) -> impl Future<Output = Result<(), ClusterError>> + Send {
        let w = self.writer.clone();
        let pool = match &write {
            Write::CreateNodeClaim(c) => self.pools.get(&c.nodepool).cloned(),
            _ => None,
        };
        let node = match &write {
            Write::RemoveFinalizer { nodeclaim } => self
                .claim_provider
                .get(nodeclaim)
                .and_then(|p| self.node_of_provider.get(p))
                .cloned(),
            _ => None,
        };
        async move {
            match write {
                Write::CreateNodeClaim(c) => w.create_nodeclaim(&c, pool.as_ref()).await,
                Write::SetLaunched {
                    nodeclaim,
                    launched,
                } => w.set_launched(&nodeclaim, &launched).await,
                Write::DeleteNodeClaim { nodeclaim } => w.delete_nodeclaim(&nodeclaim).await,
                Write::RemoveFinalizer { nodeclaim } => {
                    w.remove_finalizer(&nodeclaim, node.as_deref()).await
                }
                Write::RegisterNode {
                    node,
                    nodeclaim,
                    sync,
                } => w.register_node(&node, &nodeclaim, &sync).await,
                Write::LabelNode { node, labels } => w.label_node(&node, &labels).await,
                Write::NodeClaimStatus { nodeclaim, status } => {
                    w.nodeclaim_status(&nodeclaim, &status).await
                }
                Write::NodePoolStatus { nodepool, status } => {
                    w.nodepool_status(&nodepool, &status).await
                }
                Write::Taint { node, taint } => w.taint(&node, &taint, true).await,
                Write::Untaint { node, taint } => w.taint(&node, &taint, false).await,
                Write::Evict { pod } => w.evict(&pod).await,
                Write::DeletePod { pod } => w.delete_pod(&pod).await,
                Write::Annotate {
                    target,
                    annotations,
                } => w.annotate(&target, &annotations).await,
                Write::Relabel { target, labels } => w.relabel(&target, &labels).await,
            }
        }
    }

    fn notify(&mut self, notice: Notice) {
        let _ = self.notices.send(notice);
    }

    fn takes_notices(&self) -> bool {
        true
    }

    fn keeps_status(&self) -> bool {
        true
    }

    fn synced(&self) -> bool {
        self.watches_synced()
    }
}
