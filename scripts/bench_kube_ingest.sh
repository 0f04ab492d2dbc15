#!/bin/bash
# Measures the kube backend's initial list at scale: `karpenter-tui run` against a
# read-only stand-in API server (scripts/ingest_apiserver.py) serving N pods in pages of
# 500, as kube-runtime's watcher lists them. Prints how long the list took and the
# process's peak RSS 20 s later. Usage: scripts/bench_kube_ingest.sh [N] (default 50000);
# BIN= picks the binary (default: the release build under $CARGO_TARGET_DIR or target/).
set -u
N=${1:-50000}; BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/karpenter-tui}; D=$(mktemp -d)
python3 "$(dirname "$0")/ingest_apiserver.py" $N > $D/fake.out 2>&1 & FP=$!
for i in $(seq 1 600); do grep -qs listening $D/fake.out && break; sleep 0.5; done
PORT=$(awk '{print $3}' $D/fake.out)
cat > $D/kc <<KC
apiVersion: v1
kind: Config
clusters:
- name: f
  cluster: {server: "http://127.0.0.1:$PORT"}
users:
- name: f
  user: {}
contexts:
- name: f
  context: {cluster: f, user: f}
current-context: f
KC
LOG_LEVEL=info $BIN run --kubeconfig $D/kc --namespace default > /dev/null 2> $D/err & P=$!
for i in $(seq 1 1200); do grep -q "listed the cluster" $D/err && break; sleep 0.25; done
grep -o "listed the cluster in .*" $D/err
sleep 20
grep -E "VmHWM|VmRSS" /proc/$P/status
kill $P $FP; wait 2>/dev/null
