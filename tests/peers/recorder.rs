//! Records every change the Kubernetes API peer reports for Nodes, NodeClaims and Pods,
//! with when the test saw it, through kube-rs watches of its own: the timeline a test
//! checks invariants over (no node deleted while a pod is on its way to it, no NodeClaim
//! launched twice, no two Nodes for one NodeClaim).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use serde_json::Value;

/// One change: when the recorder saw it, of which kind, whether it was a deletion, and
/// the object as it then was.
#[derive(Clone, Debug)]
pub struct Seen {
    #[allow(dead_code)]
    pub at: Instant,
    pub kind: &'static str,
    pub deleted: bool,
    pub object: Value,
}

impl Seen {
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// The watches and what they saw so far.
pub struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    /// Starts watching the cluster behind `kubeconfig`; returns once every watch has
    /// listed.
    pub fn start(kubeconfig: PathBuf) -> Recorder {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let sink = seen.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let file = Kubeconfig::read_from(&kubeconfig).expect("kubeconfig");
                let config =
                    kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                        .await
                        .expect("config");
                let client = kube::Client::try_from(config).expect("client");
                let kinds: [(&'static str, ApiResource); 3] = [
                    (
                        "Node",
                        ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
                    ),
                    (
                        "Pod",
                        ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
                    ),
                    (
                        "NodeClaim",
                        ApiResource::from_gvk_with_plural(
                            &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
                            "nodeclaims",
                        ),
                    ),
                ];
                let mut tasks = Vec::new();
                let (listed_tx, mut listed_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
                for (kind, resource) in kinds {
                    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                    let sink = sink.clone();
                    let listed = listed_tx.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut stream = watcher(api, watcher::Config::default()).boxed();
                        while let Some(event) = stream.next().await {
                            let (object, deleted) = match event {
                                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                                    (o, false)
                                }
                                Ok(watcher::Event::Delete(o)) => (o, true),
                                Ok(watcher::Event::InitDone) => {
                                    let _ = listed.send(());
                                    continue;
                                }
                                Ok(watcher::Event::Init) | Err(_) => continue,
                            };
                            let object = serde_json::to_value(&object).unwrap_or_default();
                            sink.lock().unwrap().push(Seen {
                                at: Instant::now(),
                                kind,
                                deleted,
                                object,
                            });
                        }
                    }));
                }
                for _ in 0..3 {
                    listed_rx.recv().await;
                }
                let _ = ready_tx.send(());
                let _ = stopped.wait_for(|s| *s).await;
                for t in tasks {
                    t.abort();
                }
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the recorder's watches listed");
        Recorder {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// Everything seen so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
