"""A Kubernetes API peer for the kube-rs backend tests: kmock 0.8 plus a small adapter.

Usage: python kmock_server.py PORT   (0 = any free port; prints "listening on PORT")

kmock's KubernetesEmulator (https://pypi.org/project/kmock/) stores objects, merges
patches, soft-deletes with finalizers and fans events out to watchers. This adapter
fills the gaps that stop kube-rs (kube-runtime's watcher) and kubectl from using it
(1-14), and adds what the controller backend's tests need (15-22): evictions, 410 Gone,
injected faults, lost watches, a request log, and kube-scheduler and kubelet stand-ins,
the test controls under /_peer/;
and CustomResourceDefinitions with structural pruning and the scale subresource (23-24).

Gaps named in the plan, and how each is filled:
 1. No resourceVersion/uid. kmock pushes every ADDED/MODIFIED/DELETED event through
    `self._buses[resource].put(event)` while holding its lock; `_buses` is replaced by
    a Journal that stamps one cluster-wide counter as resourceVersion (uid and
    creationTimestamp on ADDED) into the stored object and the event, and appends the
    event to a log. Without it kube-runtime's watcher fails with NoResourceVersion.
 2. Lists have no kind/apiVersion and `metadata.resourceVersion: "..."`.
    _serve_list adds `<Kind>List`, the group/version and the journal's counter.
 3. No label selectors (nor field selectors): `labelSelector` (=, ==, !=, in, notin,
    exists, !exists) and `fieldSelector` (=, ==, != on any dotted path, e.g.
    metadata.name, spec.nodeName) filter lists and watches.
 4. No watch resume: kmock ignores `?resourceVersion=` and replays every object as
    ADDED. _serve_watch replays the journal after that version, or (no version / "0")
    a snapshot as ADDED; then follows the journal live. Honours timeoutSeconds.
 5. No namespace creation: kmock parses /api/v1/namespaces[/NAME] as a namespace
    prefix (POST /api/v1/namespaces raises ValueError: not enough values to unpack;
    GET /api/v1/namespaces/NAME is read as resource "v1/None"). parse_path is wrapped.
 6. Discovery: /api/v1 reports `groupVersion: "/v1"`; fixed to "v1". Subresources
    (pods/status) repeat their parent's short names, so kubectl warns that "ns" is
    ambiguous; they get none, and get/patch/update as verbs.
 7. Resources: kmock serves only what is declared. The bundled K3s catalogue is loaded
    (pods, nodes, namespaces, daemonsets, poddisruptionbudgets, leases, ...) and the
    Karpenter kinds are declared: karpenter.sh/v1 NodePool, NodeClaim and
    karpenter.k8s.aws/v1 EC2NodeClass, cluster-scoped, with a status subresource.

Found beyond those (kmock 0.8), and how each is handled:
 8. PUT (replace, replace_status) is not an action at all: 404 "Endpoint Not Found".
    A PUT becomes a merge patch from the stored object to the body (uid and
    creationTimestamp kept), so kmock stores it and emits MODIFIED.
 9. PATCH .../status merges the whole body, spec included; here only `status` is kept.
10. No optimistic concurrency: a PUT/PATCH carrying a stale metadata.resourceVersion
    now fails with 409 Conflict.
11. Error reasons are not Kubernetes' ("Object Not Found", "Object Already Exists",
    with a Python traceback in `details`); reasons are mapped to NotFound and
    AlreadyExists (the traceback stays).
12. Creation ignores metadata.generateName (the object is stored under name None);
    a name is generated. The namespace in the URL is written into namespaced objects
    and dropped from cluster-scoped ones (kmock keys the object by the URL namespace
    but leaves the body as sent).
13. kubectl downloads /openapi/v2 for client-side validation; kmock answers 404 and
    `kubectl apply` fails. An empty (valid, empty protobuf) document is served, so
    kubectl skips validation as it does for unknown kinds.
14. PUT takes the object's name and namespace from the URL (a body without
    metadata.namespace removed the stored namespace, and the journal then failed with
    KeyError), and a PUT of an object that does not exist is 404 NotFound, not kmock's
    "Endpoint Not Found". POST and PUT store apiVersion and kind as the URL gives them
    (a body without them was stored and served without them).

Added for the kube-rs controller backend and its tests:
15. Eviction: POST /api/v1/namespaces/NS/pods/NAME/eviction (a policy/v1 Eviction; kube-rs
    `Api::<Pod>::evict`) as the API server's eviction REST handler does it, under the
    emulator's lock: 404 NotFound without the pod; 400 BadRequest if the body names
    another pod. Pods in phase Pending, Succeeded or Failed, and pods already being
    deleted, are deleted without a budget check. Otherwise the namespace's
    PodDisruptionBudgets whose spec.selector (matchLabels and matchExpressions: In,
    NotIn, Exists, DoesNotExist; `{}` selects every pod, no selector none) matches the
    pod's labels decide: more than one is 500 ("This pod has more than one
    PodDisruptionBudget, which the eviction subresource does not support."). A pod that
    is not Ready (no Ready condition True) is evicted without using the one budget if
    the budget's spec.unhealthyPodEvictionPolicy is AlwaysAllow, or if its
    status.currentHealthy >= status.desiredHealthy > 0 (IfHealthyBudget, the default).
    Otherwise a budget with status.disruptionsAllowed 0 (or no status) refuses: 429
    TooManyRequests, message "Cannot
    evict pod as it would violate the pod's disruption budget.", details.causes[0] =
    {"reason": "DisruptionBudget", "message": "The disruption budget NAME needs D
    healthy pods and has C currently"}; a negative one is 403 Forbidden ("pdb
    disruptions allowed is negative"), as upstream. Else the budget's
    status.disruptionsAllowed is decremented and status.disruptedPods[NAME] stamped
    (MODIFIED), and the pod is deleted as a DELETE would (a pod with finalizers gets a
    deletionTimestamp and MODIFIED; otherwise DELETED). The answer is 201 with
    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
    "code": 201}. `?dryRun=All` checks without changing anything. Discovery lists
    pods/eviction as kind Eviction of policy/v1 with the verb create, which is what
    `kubectl drain` looks for.
16. Leases (coordination.k8s.io/v1), Events (events.k8s.io/v1 and core v1) and
    ConfigMaps are in the K3s catalogue (7) and work like any other kind: create with
    generateName, get, list, watch, merge patch, and PUT (8) with a stale
    metadata.resourceVersion answered 409 Conflict (10).
17. 410 Gone. `POST /_peer/compact` forgets the journal up to the current version and
    answers {"compacted": RV}. A watch from an older resourceVersion (or one that fell
    behind the compaction) then gets, as from the real API server, HTTP 200 and one
    event {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
    "metadata": {}, "status": "Failure", "reason": "Expired", "code": 410,
    "message": "too old resource version: ASKED (RV)"}} and the stream ends;
    kube-runtime's watcher relists. Lists ignore resourceVersion as before.
18. Fault injection. `POST /_peer/faults` with {"method": "PATCH" (or POST, PUT, DELETE,
    GET, "*" = any; default "*"), "path_contains": "/pods/web-1" (a substring of the
    path, or of "PATH?QUERY" when there is a query, e.g. "watch=true"; default ""),
    "status": 429 (400, 403, 404, 409, 410, 422, 429, 500, 503 or 504), "count": N
    (default 1), "retry_after": S (default 1)} queues a fault and answers it with its
    "id". The next N matching requests to the API (not to /_peer/) are answered with
    that status and a Kubernetes Status body (reason TooManyRequests, InternalError,
    Conflict, ServiceUnavailable, ... and "injected fault" in the message) without
    reaching the emulator; 429 and 503 carry a `Retry-After: S` header and
    details.retryAfterSeconds. Faults are tried in the order queued. `GET /_peer/faults`
    answers {"remaining": R, "served": S, "faults": [{"id", "method", "path_contains",
    "status", "count", "retry_after", "remaining", "served"}, ...]}: R left of the
    queued faults, S served since the start; `DELETE /_peer/faults` forgets the queued
    ones (and answers the same summary). With "delay": S (seconds, default 0) a fault
    holds each matching request S seconds first; a fault with a delay and no "status"
    then lets the request through to the emulator, which answers it late (a slow or
    loaded API server).
19. Lost watches. `POST /_peer/drop-watches` aborts the connection of every open watch
    (no final chunk: the client sees the stream break, as when a load balancer or the
    network drops it) and answers {"dropped": N}.
20. Request log. Every request to the API (not to /_peer/) is recorded as
    {"method": "GET", "path": "/api/v1/pods", "query": {"watch": "true", ...},
    "status": 200, "injected": false}, the last 5000 kept; a watch's status is set when
    its headers are sent. `GET /_peer/requests` answers the list, oldest first;
    `DELETE /_peer/requests` empties it and answers {"cleared": N}. Control requests
    are not API requests: they are neither logged nor faulted, and their errors are
    {"error": "..."} with status 400 or 404.
21. A kube-scheduler stand-in, off by default. `POST /_peer/scheduler` with {"min_delay":
    2.0, "max_delay": 4.0, "interval": 0.2} (seconds, non-negative, min_delay <= max_delay,
    interval > 0; a field left out, or an empty body, takes that default, not the previous
    value) turns it on or changes its settings; `DELETE /_peer/scheduler` turns it off and
    forgets what it remembered of pods; `GET /_peer/scheduler` reads the settings. All
    three answer {"enabled": true|false, "min_delay": 2.0, "max_delay": 4.0,
    "interval": 0.2, "bound": N, "unschedulable_marked": M}: N pods bound and M marked
    Unschedulable since the peer started. While on, every `interval` a pass under the
    emulator's lock looks at the pods without spec.nodeName or metadata.deletionTimestamp
    whose status.phase is Pending or absent, in creation order. A node takes a pod when
    (the first failure is the node's reason, in the real scheduler's filter order): it is
    not being deleted ("node(s) were being deleted") and has condition Ready=True
    ("node(s) were not ready"); spec.unschedulable is not true, unless the pod tolerates
    node.kubernetes.io/unschedulable:NoSchedule ("node(s) were unschedulable"); the pod
    tolerates every NoSchedule and NoExecute taint (Kubernetes' ToleratesTaint: an empty
    effect matches every effect, an empty key every key, operator Exists or Equal, the
    default, comparing values; "node(s) had untolerated taint {KEY: VALUE}"); every
    spec.nodeSelector label matches and spec.affinity.nodeAffinity.requiredDuringScheduling-
    IgnoredDuringExecution.nodeSelectorTerms matches (terms ORed, a term's matchExpressions
    and matchFields ANDed, an empty term matching nothing; In, NotIn, Exists, DoesNotExist,
    Gt, Lt; "node(s) didn't match Pod's node affinity/selector"); and the pod fits
    status.allocatable less what the node's pods not in phase Succeeded or Failed request:
    one more pod within `pods` ("Too many pods"), the sum of the containers'
    resources.requests cpu and memory ("Insufficient cpu", "Insufficient memory"; a
    resource the pod does not request is not checked; quantities as Kubernetes writes
    them: 100m, 0.5, 2, 1e3, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei; a missing
    allocatable, or one that does not parse, is 0). The first pass that finds a pod
    bindable stamps it and draws its delay uniformly from [min_delay, max_delay] (kept if
    a POST changes the settings; DELETE forgets it); the first pass after that delay that still finds it bindable binds it to the fitting node
    with the lowest requested cpu fraction once the pod is on it, ties by name: one write
    setting spec.nodeName, status.phase Running, status.startTime (what the kubelet sets
    when it accepts the pod; kept if already there) and the conditions PodScheduled and Ready
    "True" (others kept), stored and journalled as a PATCH would be (MODIFIED, a new
    resourceVersion). A pod that no node takes is given, once and only if it does not
    carry it already, the condition PodScheduled "False", reason "Unschedulable", message
    "0/N nodes are available: C1 REASON1, C2 REASON2." (counts of the nodes' reasons,
    sorted as the real scheduler sorts them) or, with no nodes at all, "no nodes available
    to schedule pods" (MODIFIED); such a pod is still bound when a node for it appears.
    Not done: spec.schedulerName, init containers and overhead, preferred affinity, pod
    (anti-)affinity, topology spread, ports, volumes, preemption, FailedScheduling Events.
22. A kubelet stand-in for late registration, off by default. `POST /_peer/kubelet` with
    {"ready_after": 3.0} (seconds, non-negative; default 3) turns it on or changes it,
    `DELETE /_peer/kubelet` turns it off, `GET /_peer/kubelet` reads it; all three answer
    {"enabled": true|false, "ready_after": 3.0, "waiting": W, "made_ready": R}: W nodes
    still to be made Ready, R made Ready since the peer started. While on, a Node created
    (POST) with the label karpenter-tui.dev/kwok=true is stored NotReady: its Ready
    condition (added, or replacing the one sent) has status "False", reason
    "KubeletNotReady", and the taint {"key": "node.kubernetes.io/not-ready", "effect":
    "NoSchedule"} is added to spec.taints. `ready_after` seconds (as set when it was
    created) after its creation a background task, looking every 0.05 s, sets Ready "True"
    (reason "KubeletReady") and removes the node.kubernetes.io/not-ready taints, as one
    write (MODIFIED); not if the node has been deleted (or recreated) meanwhile. Nodes
    created while off are untouched; nodes still waiting when it is turned off stay
    NotReady until it is turned on again.

Added for the CRD and static NodePool tests:
23. CustomResourceDefinitions (apiextensions.k8s.io/v1, from the K3s catalogue, 7) are
    created, applied and replaced with kubectl like any object. Once one is stored, its
    group, kind and plural are served as it declares them (names, short names,
    categories, scope, the status and scale subresources of each served version; the
    declarations of 7 stand until then), and its objects are pruned as the API server's
    structural pruning does (apiextensions-apiserver pkg/apiserver/schema/pruning), by
    the schema of the version in the URL: a field the schema does not declare is dropped,
    unless its object has `x-kubernetes-preserve-unknown-fields: true` (then unknown
    fields are kept and known ones still pruned); `additionalProperties` is the schema of
    a map's values and `items` of an array's elements; apiVersion, kind and metadata are
    kept at the root and in `x-kubernetes-embedded-resource` objects. Pruning happens on
    every write (POST, PUT, PATCH, status included: the whole object after the write is
    pruned and stored so) and on every read (get, list, watch, and the object a write
    answers), as the API server prunes what it decodes from storage: applying a narrower
    CRD hides fields of objects already stored, a wider one shows them again, and the
    next write of the object drops them for good.
24. The scale subresource a stored CRD declares (`subresources.scale`: specReplicasPath,
    statusReplicasPath, labelSelectorPath): GET .../NAME/scale answers an autoscaling/v1
    Scale (metadata name, namespace, uid, resourceVersion and creationTimestamp of the
    object; spec.replicas and status.replicas read at the paths, 0 when absent;
    status.selector when labelSelectorPath is set); PUT (a Scale, with a stale
    metadata.resourceVersion answered 409 Conflict) and PATCH (a merge patch of the
    Scale) write the new spec.replicas at specReplicasPath of the object (MODIFIED, a new
    resourceVersion, pruned as 23) and answer the Scale. spec.replicas must be a
    non-negative integer (else 422 Invalid). Discovery lists PLURAL/scale as kind Scale of
    autoscaling/v1 with get, patch and update, which is where `kubectl scale` looks. A
    kind without a stored CRD that declares scale answers 404.

Known and left as is: strategic merge patch and server-side apply are treated as
JSON merge patch (lists replaced, not merged by key); no metadata.generation; no
deletecollection; POST pods/binding is 404; objects may be created in namespaces that do
not exist; a watch with a selector does not send DELETED when an object stops matching;
lists ignore resourceVersion and resourceVersionMatch (no 410 on lists); eviction
ignores the budget's observedGeneration and sets no DisruptionAllowed condition; deletion has no grace period
(an evicted or deleted pod without finalizers is gone at once); preferredVersion of a
group with several versions is arbitrary; list order is insertion order. CRDs (23): no
validation (types, enums, patterns, CEL) and no defaulting, no conversion between versions,
no status conditions (Established, NamesAccepted); deleting a CRD neither deletes its objects
nor undeclares its kind; metadata is not pruned to ObjectMeta's fields.
"""

import asyncio
import bisect
import collections
import copy
import decimal
import itertools
import datetime
import json
import random
import re
import sys
import traceback
import uuid

import aiohttp.web
import attrs
import kmock
from kmock._internal import dicts, enums, k8s, parsing

VERBS = {'create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'}
KARPENTER = {
    'karpenter.sh/v1/nodepools': ('NodePool', 'nodepool'),
    'karpenter.sh/v1/nodeclaims': ('NodeClaim', 'nodeclaim'),
    'karpenter.k8s.aws/v1/ec2nodeclasses': ('EC2NodeClass', 'ec2nodeclass'),
}
PODS = kmock.resource('', 'v1', 'pods')
PDBS = kmock.resource('policy', 'v1', 'poddisruptionbudgets')
NODES = kmock.resource('', 'v1', 'nodes')
CRDS = kmock.resource('apiextensions.k8s.io', 'v1', 'customresourcedefinitions')  # 23
CONTROL = '/_peer/'  # 17-22: the test controls, outside /api and /apis
REQUEST_LOG_SIZE = 5000  # 20
# 18: the statuses a fault may have, with the reason the API server gives each.
FAULT_REASONS = {
    400: 'BadRequest', 403: 'Forbidden', 404: 'NotFound', 409: 'Conflict', 410: 'Gone',
    422: 'Invalid', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable',
    504: 'Timeout',
}
FAULT_METHODS = {'GET', 'POST', 'PUT', 'PATCH', 'DELETE', '*'}
# 21: resource.Quantity's suffixes (decimal SI and binary) and their multipliers.
QUANTITY_SUFFIXES = {
    '': 1, 'm': decimal.Decimal('0.001'), 'k': 10**3, 'M': 10**6, 'G': 10**9, 'T': 10**12,
    'P': 10**15, 'E': 10**18, 'Ki': 2**10, 'Mi': 2**20, 'Gi': 2**30, 'Ti': 2**40,
    'Pi': 2**50, 'Ei': 2**60,
}
QUANTITY = re.compile(r'([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+)|(' + '|'.join(
    sorted(filter(None, QUANTITY_SUFFIXES), key=len, reverse=True)) + r'))?')
KWOK_LABEL = 'karpenter-tui.dev/kwok'  # 22: the nodes the kubelet stand-in registers late
NOT_READY_TAINT = 'node.kubernetes.io/not-ready'  # 22
UNSCHEDULABLE_TAINT = 'node.kubernetes.io/unschedulable'  # 21: tolerating it ignores a cordon
KUBELET_TICK = 0.05  # 22: how often the kubelet stand-in looks for nodes due to be Ready


# Gap 5: /api/v1/namespaces, /api/v1/namespaces/NAME and .../NAME/{status,finalize}.
_kmock_parse_path = parsing.parse_path


def _parse_path(path: str) -> parsing.ParsedPath:
    parts = path.strip('/').split('/')
    if parts[:3] == ['api', 'v1', 'namespaces'] and (
        len(parts) <= 4 or (len(parts) == 5 and parts[4] in ('status', 'finalize'))
    ):
        return parsing.ParsedPath(
            group='', version='v1', plural='namespaces',
            name=parts[3] if len(parts) > 3 else None,
            subresource=parts[4] if len(parts) > 4 else None,
        )
    return _kmock_parse_path(path)


parsing.parse_path = _parse_path


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def _lookup(obj, path: str):
    for key in path.split('.'):
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _selected(params, obj) -> bool:
    """Gap 3: labelSelector and fieldSelector (comma-separated requirements, ANDed)."""
    labels = obj.get('metadata', {}).get('labels') or {}
    # Split on commas outside parentheses: "app in (a,b),tier!=db".
    for req in re.findall(r'(?:[^,(]|\([^)]*\))+', params.get('labelSelector', '')):
        req = req.strip()
        if m := re.fullmatch(r'(\S+?)\s*(==|=|!=)\s*(\S*)', req):
            key, op, value = m.groups()
            if (labels.get(key) == value) != (op != '!='):
                return False
        elif m := re.fullmatch(r'(\S+)\s+(in|notin)\s+\((.*)\)', req):
            key, op, values = m.groups()
            if (labels.get(key) in {v.strip() for v in values.split(',')}) != (op == 'in'):
                return False
        elif (req.startswith('!') and req[1:] in labels) or (req[:1] != '!' and req not in labels):
            return False
    for req in filter(None, params.get('fieldSelector', '').split(',')):
        key, op, value = re.fullmatch(r'([^=!]+)(==|=|!=)(.*)', req.strip()).groups()
        if (str(_lookup(obj, key) or '') == value) != (op != '!='):
            return False
    return True


def _label_selector_matches(selector, labels: dict) -> bool:
    """15: a metav1.LabelSelector against a pod's labels ({} selects all, None nothing)."""
    if selector is None:
        return False
    for key, value in (selector.get('matchLabels') or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get('matchExpressions') or []:
        key, op, values = expr.get('key'), expr.get('operator'), expr.get('values') or []
        ok = {
            'In': key in labels and labels[key] in values,
            'NotIn': key not in labels or labels[key] not in values,
            'Exists': key in labels,
            'DoesNotExist': key not in labels,
        }.get(op, False)  # an unknown operator selects nothing
        if not ok:
            return False
    return True


def _quantity(value) -> decimal.Decimal:
    """21: a resource.Quantity ("100m", "0.5", "8Gi", "1e3", or a JSON number). One that does
    not parse is 0: the API server would have refused the object that carries it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return decimal.Decimal(str(value))
    m = QUANTITY.fullmatch(str(value).strip()) if isinstance(value, str) else None
    if m is None:
        return decimal.Decimal(0)
    number, exponent, suffix = m.groups()
    if exponent is not None:
        return decimal.Decimal(number).scaleb(int(exponent))
    return decimal.Decimal(number) * QUANTITY_SUFFIXES[suffix or '']


def _pod_requests(pod: dict) -> tuple[decimal.Decimal, decimal.Decimal]:
    """21: the pod's cpu (cores) and memory (bytes) requests, summed over its containers."""
    cpu = memory = decimal.Decimal(0)
    for container in (pod.get('spec') or {}).get('containers') or []:
        requests = (container.get('resources') or {}).get('requests') or {}
        cpu += _quantity(requests.get('cpu', 0))
        memory += _quantity(requests.get('memory', 0))
    return cpu, memory


def _is_terminal(pod: dict) -> bool:
    """21: a Succeeded or Failed pod holds no resources on its node."""
    return (pod.get('status') or {}).get('phase') in ('Succeeded', 'Failed')


def _condition(obj: dict, kind: str):
    """21, 22: the status.conditions entry of type `kind`, or None."""
    conditions = (obj.get('status') or {}).get('conditions') or []
    return next((c for c in conditions if isinstance(c, dict) and c.get('type') == kind), None)


def _with_conditions(obj: dict, *changes: dict) -> list:
    """21, 22: obj's status.conditions with `changes` put in place of those of their types
    (the others kept, in order). lastTransitionTime moves only when the status does."""
    conditions = list((obj.get('status') or {}).get('conditions') or [])
    for change in changes:
        old = _condition(obj, change['type'])
        change = {**change, 'lastTransitionTime': _now()}
        if old is not None and old.get('status') == change['status'] and old.get('lastTransitionTime'):
            change['lastTransitionTime'] = old['lastTransitionTime']
        if old is None:
            conditions.append(change)
        else:
            conditions[conditions.index(old)] = change
    return conditions


def _tolerates(toleration: dict, taint: dict) -> bool:
    """21: Kubernetes' Toleration.ToleratesTaint: an empty effect matches every effect and
    an empty key every key; Exists ignores the value, Equal (the default) compares it."""
    if toleration.get('effect') and toleration['effect'] != taint.get('effect'):
        return False
    if toleration.get('key') and toleration['key'] != taint.get('key'):
        return False
    match toleration.get('operator') or 'Equal':
        case 'Equal':
            return (toleration.get('value') or '') == (taint.get('value') or '')
        case 'Exists':
            return True
    return False  # an unknown operator tolerates nothing


def _requirement_matches(expr: dict, values_of: dict) -> bool:
    """21: one NodeSelectorRequirement against a node's labels (or its fields)."""
    key, op, values = expr.get('key'), expr.get('operator'), expr.get('values') or []
    present = key in values_of
    if op in ('Gt', 'Lt'):  # one integer value, compared with an integer label
        try:
            have, want = int(values_of[key]), int(values[0])
        except (KeyError, IndexError, TypeError, ValueError):
            return False
        return have > want if op == 'Gt' else have < want
    return {
        'In': present and values_of[key] in values,
        'NotIn': not present or values_of[key] not in values,
        'Exists': present,
        'DoesNotExist': not present,
    }.get(op, False)  # an unknown operator matches nothing


def _node_affinity_matches(pod: dict, node: dict) -> bool:
    """21: spec.nodeSelector (every label) and the required node affinity's
    nodeSelectorTerms (ORed; a term ANDs its matchExpressions and matchFields, and an
    empty term matches nothing), as the NodeAffinity filter does."""
    spec, meta = pod.get('spec') or {}, node.get('metadata') or {}
    labels = meta.get('labels') or {}
    if any(labels.get(k) != v for k, v in (spec.get('nodeSelector') or {}).items()):
        return False
    required = (((spec.get('affinity') or {}).get('nodeAffinity') or {})
                .get('requiredDuringSchedulingIgnoredDuringExecution'))
    if required is None:
        return True
    fields = {'metadata.name': meta.get('name')}
    for term in required.get('nodeSelectorTerms') or []:
        exprs, field_exprs = term.get('matchExpressions') or [], term.get('matchFields') or []
        if (exprs or field_exprs) and all(_requirement_matches(e, labels) for e in exprs) and all(
                _requirement_matches(e, fields) for e in field_exprs):
            return True
    return False


def _node_is_ready(node: dict) -> bool:
    ready = _condition(node, 'Ready')
    return ready is not None and ready.get('status') == 'True'


@attrs.define
class NodeUse:
    """21: what a node offers (status.allocatable) and what its pods request of it."""
    cpu: decimal.Decimal
    memory: decimal.Decimal
    pods: decimal.Decimal
    used_cpu: decimal.Decimal = decimal.Decimal(0)
    used_memory: decimal.Decimal = decimal.Decimal(0)
    used_pods: int = 0

    @classmethod
    def of(cls, node: dict) -> 'NodeUse':
        allocatable = (node.get('status') or {}).get('allocatable') or {}
        return cls(*(_quantity(allocatable.get(r, 0)) for r in ('cpu', 'memory', 'pods')))

    def add(self, cpu: decimal.Decimal, memory: decimal.Decimal) -> None:
        self.used_cpu += cpu
        self.used_memory += memory
        self.used_pods += 1

    def misfits(self, cpu: decimal.Decimal, memory: decimal.Decimal) -> list[str]:
        """The NodeResourcesFit filter's reasons; a resource not requested is not checked."""
        reasons = ['Too many pods'] if self.used_pods + 1 > self.pods else []
        if cpu > 0 and cpu > self.cpu - self.used_cpu:
            reasons.append('Insufficient cpu')
        if memory > 0 and memory > self.memory - self.used_memory:
            reasons.append('Insufficient memory')
        return reasons

    def cpu_fraction(self, cpu: decimal.Decimal) -> decimal.Decimal:
        """The share of the node's cpu requested once the pod is on it (no cpu: full)."""
        return (self.used_cpu + cpu) / self.cpu if self.cpu > 0 else decimal.Decimal(1)


def _node_misfits(pod: dict, node: dict, use: NodeUse) -> list[str]:
    """21: why the scheduler stand-in will not put `pod` on `node` ([]: it fits). Like the
    real scheduler's filters, in their order, the first that fails gives the reasons."""
    meta, spec = node.get('metadata') or {}, node.get('spec') or {}
    tolerations = [t for t in (pod.get('spec') or {}).get('tolerations') or [] if isinstance(t, dict)]
    if meta.get('deletionTimestamp'):
        return ['node(s) were being deleted']
    if not _node_is_ready(node):
        return ['node(s) were not ready']
    cordon = {'key': UNSCHEDULABLE_TAINT, 'effect': 'NoSchedule'}
    if spec.get('unschedulable') is True and not any(_tolerates(t, cordon) for t in tolerations):
        return ['node(s) were unschedulable']
    for taint in spec.get('taints') or []:
        if taint.get('effect') in ('NoSchedule', 'NoExecute') and not any(
                _tolerates(t, taint) for t in tolerations):
            return [f'node(s) had untolerated taint {{{taint.get("key")}: {taint.get("value") or ""}}}']
    if not _node_affinity_matches(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    return use.misfits(*_pod_requests(pod))


def _unschedulable_message(nodes: int, reasons: list[str]) -> str:
    """21: the scheduler's FitError text: each reason with the number of nodes that gave
    it, sorted as strings ("1 Insufficient cpu, 2 node(s) were not ready")."""
    if nodes == 0:
        return 'no nodes available to schedule pods'
    counted = sorted(f'{n} {reason}' for reason, n in collections.Counter(reasons).items())
    return f'0/{nodes} nodes are available: {", ".join(counted)}.'


def _merge_diff(old: dict, new: dict) -> dict:
    """The JSON merge patch that turns `old` into `new` (for PUT, gap 8)."""
    patch = {key: None for key in old if key not in new}
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(old.get(key), dict):
            if sub := _merge_diff(old[key], value):
                patch[key] = sub
        elif key not in old or old[key] != value:
            patch[key] = value
    return patch


def _status(code: int, reason: str = '', message: str = '', details=None, headers=None):
    """A metav1.Status response, as the API server writes it (empty fields left out)."""
    body = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
            'status': 'Success' if code < 400 else 'Failure'}
    body.update({k: v for k, v in (('message', message), ('reason', reason),
                                   ('details', details)) if v})
    body['code'] = code
    return aiohttp.web.json_response(body, status=code, headers=headers)


def _not_found(resource, name: str):
    """The API server's 404 for a missing object, e.g. `pods "web-1" not found`."""
    qualified = f'{resource.plural}.{resource.group}'.rstrip('.')
    return k8s.KubernetesError(
        status=404, reason='NotFound', message=f'{qualified} "{name}" not found',
        details={'name': name, 'group': resource.group, 'kind': resource.plural})


def _expired(asked, compacted: int) -> dict:
    """17: the watch event the API server sends for a version it has forgotten."""
    return {'type': 'ERROR', 'object': {
        'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure',
        'message': f'too old resource version: {asked} ({compacted})',
        'reason': 'Expired', 'code': 410,
    }}


def _field_schema(schema, key: str):
    """23: the schema of an object's field `key`: its property, else the map values'
    schema (additionalProperties), else None (the field is unknown)."""
    if not isinstance(schema, dict):
        return None
    props = schema.get('properties') or {}
    if key in props:
        return props[key]
    values = schema.get('additionalProperties')
    return values if isinstance(values, dict) else None


def _prune(value, schema, root: bool = False) -> None:
    """23: structural pruning, in place (apiextensions-apiserver's pruning algorithm): drops
    every field `schema` does not declare. apiVersion, kind and metadata stay at the root
    and in embedded resources; a preserve-unknown-fields object keeps its unknown fields."""
    if isinstance(schema, dict) and schema.get('x-kubernetes-preserve-unknown-fields') is True:
        _prune_known(value, schema)
        return
    if isinstance(value, dict):
        embedded = root or (isinstance(schema, dict)
                            and schema.get('x-kubernetes-embedded-resource') is True)
        for key in list(value):
            if embedded and key in ('apiVersion', 'kind', 'metadata'):
                continue
            sub = _field_schema(schema, key)
            if sub is None:
                del value[key]
            else:
                _prune(value[key], sub)
    elif isinstance(value, list):
        items = schema.get('items') if isinstance(schema, dict) else None
        for item in value:
            _prune(item, items)


def _prune_known(value, schema) -> None:
    """23: under x-kubernetes-preserve-unknown-fields: unknown fields stay, known ones are
    pruned by their own schema (the API server's skipPrune)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if (sub := _field_schema(schema, key)) is not None:
                _prune(item, sub)
    elif isinstance(value, list) and isinstance(schema, dict):
        for item in value:
            _prune_known(item, schema.get('items'))


def _json_path(path: str) -> list[str]:
    """24: a CRD's `.spec.replicas` as keys."""
    return [key for key in path.split('.') if key]


def _scale_of(obj: dict, scale: dict) -> dict:
    """24: the autoscaling/v1 Scale of `obj` by its CRD's subresources.scale (the API
    server's scaleFromCustomResource: a missing replicas field reads 0)."""
    def number(path):
        value = _lookup(obj, '.'.join(_json_path(path))) if path else None
        return value if isinstance(value, int) and not isinstance(value, bool) else 0
    keep = ('name', 'namespace', 'uid', 'resourceVersion', 'creationTimestamp')
    meta = {k: v for k, v in obj.get('metadata', {}).items() if k in keep}
    status = {'replicas': number(scale.get('statusReplicasPath'))}
    if scale.get('labelSelectorPath'):
        selector = _lookup(obj, '.'.join(_json_path(scale['labelSelectorPath'])))
        if isinstance(selector, str):
            status['selector'] = selector
    return {'kind': 'Scale', 'apiVersion': 'autoscaling/v1', 'metadata': meta,
            'spec': {'replicas': number(scale.get('specReplicasPath'))}, 'status': status}


@attrs.define
class Fault:
    """18: one queued fault and how many times it has been served."""
    id: int
    method: str
    path_contains: str
    status: int
    count: int
    retry_after: int
    delay: float = 0.0
    served: int = 0

    @classmethod
    def parse(cls, id: int, body) -> 'Fault':
        if not isinstance(body, dict):
            raise ValueError('the body must be a JSON object')
        unknown = set(body) - {'method', 'path_contains', 'status', 'count', 'retry_after',
                               'delay'}
        if unknown:
            raise ValueError(f'unknown fields {sorted(unknown)}')
        fault = cls(
            id=id, method=str(body.get('method', '*')).upper(),
            path_contains=body.get('path_contains', ''), status=body.get('status'),
            count=body.get('count', 1), retry_after=body.get('retry_after', 1),
            delay=body.get('delay', 0.0),
        )
        if (not isinstance(fault.delay, (int, float)) or isinstance(fault.delay, bool)
                or fault.delay < 0):
            raise ValueError('delay must be a non-negative number of seconds')
        if fault.status is None and fault.delay > 0:
            return fault
        if fault.method not in FAULT_METHODS:
            raise ValueError(f'method must be one of {sorted(FAULT_METHODS)}')
        if not isinstance(fault.path_contains, str):
            raise ValueError('path_contains must be a string')
        if fault.status not in FAULT_REASONS:
            raise ValueError(f'status must be one of {sorted(FAULT_REASONS)}')
        for field in ('count', 'retry_after'):
            value = getattr(fault, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f'{field} must be a non-negative integer')
        return fault

    @property
    def remaining(self) -> int:
        return self.count - self.served

    def matches(self, raw: aiohttp.web.BaseRequest) -> bool:
        target = f'{raw.path}?{raw.query_string}' if raw.query_string else raw.path
        return (self.remaining > 0 and self.method in ('*', raw.method)
                and self.path_contains in target)

    def serve(self, raw: aiohttp.web.BaseRequest):
        self.served += 1
        reason = FAULT_REASONS[self.status]
        message = (f'injected fault {self.id} ({self.served} of {self.count}): '
                   f'{self.status} {reason} for {raw.method} {raw.path}')
        if self.status in (429, 503):
            return _status(self.status, reason, message,
                           details={'retryAfterSeconds': self.retry_after},
                           headers={'Retry-After': str(self.retry_after)})
        return _status(self.status, reason, message)

    def to_json(self) -> dict:
        return {**attrs.asdict(self), 'remaining': self.remaining}


def _settings(body, defaults: dict) -> dict:
    """21, 22: a stand-in's control body: a JSON object with some of `defaults`' fields,
    each a non-negative number (seconds); the fields left out take their defaults."""
    if not isinstance(body, dict):
        raise ValueError('the body must be a JSON object')
    unknown = set(body) - set(defaults)
    if unknown:
        raise ValueError(f'unknown fields {sorted(unknown)}')
    settings = {**defaults, **body}
    for field, value in settings.items():
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not 0 <= value < float('inf')):  # NaN fails the comparison too
            raise ValueError(f'{field} must be a non-negative number of seconds')
    return {field: float(value) for field, value in settings.items()}


def _unscheduled(pod: dict) -> bool:
    """21: a pod the scheduler is to place: no node, not being deleted, Pending (or no
    phase yet)."""
    return (not (pod.get('spec') or {}).get('nodeName')
            and not (pod.get('metadata') or {}).get('deletionTimestamp')
            and (pod.get('status') or {}).get('phase') in (None, '', 'Pending'))


def _marked_unschedulable(pod: dict) -> bool:
    scheduled = _condition(pod, 'PodScheduled')
    return (scheduled is not None and scheduled.get('status') == 'False'
            and scheduled.get('reason') == 'Unschedulable')


def _binding(pod: dict, node: str) -> dict:
    """21: the merge patch that binds a pod (and, with no kubelet, starts it at once)."""
    conditions = _with_conditions(pod, {'type': 'PodScheduled', 'status': 'True'},
                                  {'type': 'Ready', 'status': 'True'})
    status = {'phase': 'Running', 'conditions': conditions,
              'startTime': (pod.get('status') or {}).get('startTime') or _now()}
    return {'spec': {'nodeName': node}, 'status': status}


@attrs.define
class Scheduler:
    """21: the kube-scheduler stand-in: its settings, and what it remembers of the pods it
    has looked at, keyed by (namespace, name, uid) so that a recreated pod starts afresh."""
    enabled: bool = False
    min_delay: float = 2.0
    max_delay: float = 4.0
    interval: float = 0.2
    bound: int = 0
    unschedulable_marked: int = 0
    due: dict = attrs.field(factory=dict)  # pod -> when it may be bound (first seen + delay)
    marked: set = attrs.field(factory=set)  # pods found unschedulable (marked or found so)
    task: asyncio.Task | None = None

    def configure(self, body) -> None:
        settings = _settings(body, {'min_delay': 2.0, 'max_delay': 4.0, 'interval': 0.2})
        if settings['min_delay'] > settings['max_delay']:
            raise ValueError('min_delay must not be more than max_delay')
        if settings['interval'] <= 0:
            raise ValueError('interval must be more than 0')
        for field, value in settings.items():
            setattr(self, field, value)

    def forget(self) -> None:
        """Turned off: delays are drawn again, and marks given again, once turned on."""
        self.due.clear()
        self.marked.clear()

    def to_json(self) -> dict:
        return {'enabled': self.enabled, 'min_delay': self.min_delay, 'max_delay': self.max_delay,
                'interval': self.interval, 'bound': self.bound,
                'unschedulable_marked': self.unschedulable_marked}

    def plan(self, nodes: list[dict], pods: list[dict], now: float) -> list[tuple[int, dict]]:
        """One pass over the store: the writes to make, as (index in `pods`, merge patch).
        A pod bound in this pass uses its node's room before the next pod is looked at."""
        uses = {node['metadata']['name']: NodeUse.of(node) for node in nodes}
        for pod in pods:
            on = (pod.get('spec') or {}).get('nodeName')
            if on in uses and not _is_terminal(pod):
                uses[on].add(*_pod_requests(pod))
        writes, looked_at = [], set()
        for index, pod in enumerate(pods):
            if not _unscheduled(pod):
                continue
            meta = pod['metadata']
            key = (meta.get('namespace'), meta.get('name'), meta.get('uid'))
            looked_at.add(key)
            fitting, reasons = [], []
            for node in nodes:
                name = node['metadata']['name']
                if why := _node_misfits(pod, node, uses[name]):
                    reasons += why
                else:
                    fitting.append(name)
            if fitting:
                due = self.due.setdefault(key, now + random.uniform(self.min_delay, self.max_delay))
                if now >= due:  # still bindable once its delay is over
                    cpu, memory = _pod_requests(pod)
                    name = min(fitting, key=lambda n: (uses[n].cpu_fraction(cpu), n))
                    uses[name].add(cpu, memory)
                    writes.append((index, _binding(pod, name)))
                    self.bound += 1
            elif key not in self.marked:
                self.marked.add(key)
                if not _marked_unschedulable(pod):
                    message = _unschedulable_message(len(nodes), reasons)
                    conditions = _with_conditions(pod, {
                        'type': 'PodScheduled', 'status': 'False', 'reason': 'Unschedulable',
                        'message': message})
                    writes.append((index, {'status': {'conditions': conditions}}))
                    self.unschedulable_marked += 1
        # Bound, deleted or otherwise gone from the queue: nothing more to remember.
        self.due = {k: v for k, v in self.due.items() if k in looked_at}
        self.marked &= looked_at
        return writes


def _registered_not_ready(node: dict) -> None:
    """22: a kwok node as its kubelet registers it: NotReady and tainted so (in place)."""
    if not isinstance(node.get('status'), dict):
        node['status'] = {}
    if not isinstance(node.get('spec'), dict):
        node['spec'] = {}
    node['status']['conditions'] = _with_conditions(node, {
        'type': 'Ready', 'status': 'False', 'reason': 'KubeletNotReady',
        'message': 'container runtime network not ready: NetworkReady=false '
                   'reason:NetworkPluginNotReady message:Network plugin returns error: '
                   'cni plugin not initialized',
        'lastHeartbeatTime': _now()})
    taints = [t for t in node['spec'].get('taints') or []
              if not (t.get('key') == NOT_READY_TAINT and t.get('effect') == 'NoSchedule')]
    node['spec']['taints'] = taints + [{'key': NOT_READY_TAINT, 'effect': 'NoSchedule'}]


def _ready_patch(node: dict) -> dict:
    """22: the merge patch that makes a node Ready and lifts its not-ready taints."""
    patch = {'status': {'conditions': _with_conditions(node, {
        'type': 'Ready', 'status': 'True', 'reason': 'KubeletReady',
        'message': 'kubelet is posting ready status', 'lastHeartbeatTime': _now()})}}
    taints = (node.get('spec') or {}).get('taints') or []
    kept = [t for t in taints if t.get('key') != NOT_READY_TAINT]
    if kept != taints:
        patch['spec'] = {'taints': kept or None}  # None drops the field, as the API omits []
    return patch


@attrs.define
class Kubelet:
    """22: the kubelet stand-in: its setting, and the kwok nodes still to be made Ready."""
    enabled: bool = False
    ready_after: float = 3.0
    made_ready: int = 0
    waiting: dict = attrs.field(factory=dict)  # node name -> (its uid, when it is to be Ready)
    task: asyncio.Task | None = None
    interval = KUBELET_TICK  # not a setting (no annotation: a class attribute, not a field)

    def configure(self, body) -> None:
        self.ready_after = _settings(body, {'ready_after': 3.0})['ready_after']

    def to_json(self) -> dict:
        return {'enabled': self.enabled, 'ready_after': self.ready_after,
                'waiting': len(self.waiting), 'made_ready': self.made_ready}


class Journal:
    """Gap 1, 4 and 17: stands in for kmock's `_buses` (resource -> Bus).

    Positions in the log are absolute: entry `pos` is `log[pos - base]`, and the
    entries before `base` are forgotten by compaction (17)."""

    def __init__(self, emulator: 'Apiserver') -> None:
        self.emulator = emulator
        self.rv = 0
        self.log: list[tuple[int, kmock.resource, dict]] = []  # (rv, resource, event)
        self.base = 0  # how many entries compaction has dropped from the log's front
        self.compacted = 0  # the version the journal was compacted at (0: never)
        self.changed = asyncio.Event()

    def __getitem__(self, resource):
        journal = self

        class Feed:
            async def put(self, event: dict) -> None:
                journal.record(resource, event)

        return Feed()

    def record(self, resource, event: dict) -> None:
        self.rv += 1
        obj = copy.deepcopy(event['object'])
        meta = obj.setdefault('metadata', {})
        meta['resourceVersion'] = str(self.rv)
        if event['type'] == 'ADDED':
            meta['uid'] = str(uuid.uuid4())
            meta['creationTimestamp'] = _now()
        if event['type'] != 'DELETED':  # kmock has already soft-deleted a DELETED one
            stored = self.emulator.objects[resource, meta.get('namespace'), meta['name']]
            stored.last['metadata'] = copy.deepcopy(meta)
        self.log.append((self.rv, resource, {'type': event['type'], 'object': obj}))
        self.wake()

    def wake(self) -> None:
        """Wakes every watch waiting for the journal (a new entry, or 19's drop)."""
        self.changed.set()
        self.changed = asyncio.Event()

    @property
    def end(self) -> int:
        return self.base + len(self.log)

    def after(self, rv: int) -> int:
        """The position of the first entry newer than `rv`."""
        return self.base + bisect.bisect_right(self.log, rv, key=lambda e: e[0])

    def read(self, pos: int) -> list | None:
        """The entries from `pos` on; None if compaction has forgotten some of them."""
        return None if pos < self.base else self.log[pos - self.base:]

    def compact(self) -> int:
        self.base, self.log, self.compacted = self.end, [], self.rv
        return self.compacted


class Apiserver(kmock.KubernetesEmulator):
    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._buses = self.journal = Journal(self)
        self.resources.load_bundled()  # gap 7
        for key, (kind, singular) in KARPENTER.items():
            self.resources[key] = kmock.ResourceInfo(
                kind=kind, singular=singular, namespaced=False, verbs=VERBS,
                categories={'karpenter'}, subresources={'status'},
            )
        self['get /openapi/v2'] << b''  # 13
        self.faults: list[Fault] = []  # 18
        self.faults_served = 0  # 18: by every fault ever queued
        self.fault_ids = itertools.count(1)  # 18: never reused, even after DELETE
        self.open_watches: set[asyncio.Transport] = set()  # 19: their connections
        self.request_log = collections.deque(maxlen=REQUEST_LOG_SIZE)  # 20
        self.scheduler = Scheduler()  # 21
        self.kubelet = Kubelet()  # 22

    def _gv(self, resource) -> str:
        return f'{resource.group}/{resource.version}'.lstrip('/')

    def _check_version(self, stored, body) -> None:
        """Gap 10: a stale resourceVersion in the body is a conflict."""
        sent = body.get('metadata', {}).get('resourceVersion')
        if sent and stored is not None and sent != stored['metadata'].get('resourceVersion'):
            raise k8s.KubernetesError(
                status=409, reason='Conflict',
                message=f'the object has been modified (resourceVersion {sent} is stale); '
                        'please apply your changes to the latest version and try again')

    def _rewrite(self, request, **changes):
        """A changed copy of the request. kmock's reactions match only the requests it has
        recorded (by identity), so the copy takes the original's place in the record."""
        changed = attrs.evolve(request, **changes)
        self._requests[self._requests.index(request)] = changed
        return changed

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """The entry point for every HTTP request: the controls (17-20), injected faults
        (18) and the request log (20) come before kmock."""
        if raw.path.startswith(CONTROL):
            return await self._control(raw)
        entry = {'method': raw.method, 'path': raw.path, 'query': dict(raw.query),
                 'status': None, 'injected': False}
        self.request_log.append(entry)
        raw['peer_log_entry'] = entry  # _serve_watch sets the status of a watch
        fault = next((f for f in self.faults if f.matches(raw)), None)
        if fault is not None and fault.delay > 0:
            fault.served += fault.status is None
            await asyncio.sleep(fault.delay)
        if fault is not None and fault.status is not None:
            await raw.read()
            entry['injected'] = True
            self.faults_served += 1
            response = fault.serve(raw)
        else:
            response = await super().__call__(raw)
        entry['status'] = response.status
        return response

    async def _control(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """17-22: the test controls. Errors are {"error": ...}, 400 or 404."""
        try:
            match raw.method, raw.path.removeprefix(CONTROL):
                case 'POST', 'faults':
                    fault = Fault.parse(next(self.fault_ids), await raw.json())
                    self.faults.append(fault)
                    return aiohttp.web.json_response(fault.to_json())
                case 'GET', 'faults':
                    return aiohttp.web.json_response(self._fault_summary())
                case 'DELETE', 'faults':
                    self.faults = []
                    return aiohttp.web.json_response(self._fault_summary())
                case 'POST', 'drop-watches':
                    return aiohttp.web.json_response({'dropped': self._drop_watches()})
                case 'POST', 'compact':
                    return aiohttp.web.json_response({'compacted': self.journal.compact()})
                case 'GET', 'requests':
                    return aiohttp.web.json_response(list(self.request_log))
                case 'DELETE', 'requests':
                    cleared = len(self.request_log)
                    self.request_log.clear()
                    return aiohttp.web.json_response({'cleared': cleared})
                case 'POST', 'scheduler':
                    self.scheduler.configure(await self._control_body(raw))
                    self._switch(self.scheduler, self._schedule_pass, True)
                    return aiohttp.web.json_response(self.scheduler.to_json())
                case 'DELETE', 'scheduler':
                    self._switch(self.scheduler, self._schedule_pass, False)
                    self.scheduler.forget()
                    return aiohttp.web.json_response(self.scheduler.to_json())
                case 'GET', 'scheduler':
                    return aiohttp.web.json_response(self.scheduler.to_json())
                case 'POST', 'kubelet':
                    self.kubelet.configure(await self._control_body(raw))
                    self._switch(self.kubelet, self._kubelet_pass, True)
                    return aiohttp.web.json_response(self.kubelet.to_json())
                case 'DELETE', 'kubelet':
                    self._switch(self.kubelet, self._kubelet_pass, False)
                    return aiohttp.web.json_response(self.kubelet.to_json())
                case 'GET', 'kubelet':
                    return aiohttp.web.json_response(self.kubelet.to_json())
        except ValueError as e:  # includes a body that is not JSON
            return aiohttp.web.json_response({'error': str(e)}, status=400)
        return aiohttp.web.json_response(
            {'error': f'no control {raw.method} {raw.path}'}, status=404)

    def _fault_summary(self) -> dict:
        return {'remaining': sum(f.remaining for f in self.faults),
                'served': self.faults_served,
                'faults': [f.to_json() for f in self.faults]}

    @staticmethod
    async def _control_body(raw: aiohttp.web.BaseRequest):
        """21, 22: the body as JSON; an empty one (`curl -X POST`) is {}, all defaults."""
        text = await raw.text()
        return json.loads(text) if text.strip() else {}

    def _switch(self, standin, one_pass, on: bool) -> None:
        """21, 22: turns a stand-in on (starting its background task once) or off
        (cancelling it: it waits on the lock or sleeps then, never halfway through a pass)."""
        standin.enabled = on
        if on and (standin.task is None or standin.task.done()):
            standin.task = asyncio.create_task(self._run_standin(standin, one_pass))
        elif not on and standin.task is not None:
            standin.task.cancel()
            standin.task = None

    @staticmethod
    async def _run_standin(standin, one_pass) -> None:
        """21, 22: a pass, then a pause, until cancelled. A pass that fails is printed
        (stderr is the peer's log) and the next one tried: one odd object must not stop it."""
        while True:
            try:
                await one_pass()
            except Exception:
                traceback.print_exc()
            await asyncio.sleep(standin.interval)

    async def _patch_locked(self, resource, obj, patch: dict) -> None:
        """21, 22: a merge patch as kmock's _handle applies a PATCH (lock held): a new
        version, a resourceVersion and a MODIFIED event from the journal."""
        obj.patch(patch)
        await self._buses[resource].put({'type': 'MODIFIED', 'object': obj.raw})

    async def _schedule_pass(self) -> None:
        """21: one scheduling pass, the store read and written under one hold of the lock,
        so that no request sees half of it and none changes the store beneath it."""
        now = asyncio.get_running_loop().time()
        async with self._lock:
            nodes = [obj.raw for (res, _, _), obj in self.objects.items()
                     if res == NODES and not obj.deleted]
            pods = [obj for (res, _, _), obj in self.objects.items()
                    if res == PODS and not obj.deleted]
            for index, patch in self.scheduler.plan(nodes, [obj.raw for obj in pods], now):
                await self._patch_locked(PODS, pods[index], patch)

    async def _kubelet_pass(self) -> None:
        """22: makes Ready the kwok nodes whose time has come, unless they are gone (or
        were recreated: another uid) meanwhile."""
        waiting = self.kubelet.waiting
        if not any(at <= asyncio.get_running_loop().time() for _, at in waiting.values()):
            return  # the usual case: no need to take the lock
        async with self._lock:
            now = asyncio.get_running_loop().time()
            for name in [n for n, (_, at) in waiting.items() if at <= now]:
                uid, _ = waiting.pop(name)
                key = (NODES, None, name)
                if key not in self.objects or self.objects[key].deleted:
                    continue
                obj = self.objects[key]
                if obj.raw['metadata'].get('uid') == uid:
                    await self._patch_locked(NODES, obj, _ready_patch(obj.raw))
                    self.kubelet.made_ready += 1

    def _drop_watches(self) -> int:
        """19: aborts every open watch's connection; the watches then end (see
        _serve_watch)."""
        dropped = [t for t in self.open_watches if not t.is_closing()]
        for transport in dropped:
            transport.abort()
        self.journal.wake()
        return len(dropped)

    async def _handle(self, request):
        res, data = request.resource, request.data
        if request.method == enums.method.POST and res == PODS and request.subresource == 'eviction':
            return await self._evict(request)  # 15
        if request.subresource == 'scale' and res in self.resources:
            return await self._scale(request)  # 24
        if res is None or res not in self.resources or not isinstance(data, dict):
            return await super()._handle(request)
        key = (res, request.namespace, request.name)
        stored = None
        if key in self.objects and not self.objects[key].deleted:
            stored = copy.deepcopy(self.objects[key].raw)
        if request.method in (enums.method.POST, enums.method.PUT) and not request.subresource:
            data.update(apiVersion=self._gv(res), kind=self.resources[res].kind)  # 14
        if request.action == enums.action.CREATE:  # 12
            meta = data.setdefault('metadata', {})
            if not meta.get('name') and meta.get('generateName'):
                meta['name'] = meta['generateName'] + uuid.uuid4().hex[:5]
            if self.resources[res].namespaced:
                meta['namespace'] = request.namespace or meta.get('namespace')
            else:
                meta.pop('namespace', None)
        elif request.method == enums.method.PUT and request.name:  # 8, 14
            if stored is None:
                raise _not_found(res, request.name)
            self._check_version(stored, data)
            if request.subresource == 'status':
                data = {**stored, 'status': data.get('status')}
            else:
                keep = ('name', 'namespace', 'uid', 'creationTimestamp', 'deletionTimestamp',
                        'resourceVersion')
                meta = {k: v for k, v in data.get('metadata', {}).items() if k not in keep}
                meta.update({k: stored['metadata'][k] for k in keep if k in stored['metadata']})
                data = {**data, 'metadata': meta}
            request = self._rewrite(request, action=enums.action.UPDATE,
                                    data=_merge_diff(stored, data))
        elif request.action == enums.action.UPDATE:
            self._check_version(stored, data)
            if request.subresource == 'status':  # 9
                request = self._rewrite(request, data={k: data[k] for k in ('status',) if k in data})
        if (schema := self._schema(res)) is not None:  # 23: what is stored is pruned
            request = self._pruned_write(request, schema, stored)
        late = (request.action == enums.action.CREATE and res == NODES and self.kubelet.enabled
                and ((data.get('metadata') or {}).get('labels') or {}).get(KWOK_LABEL) == 'true')
        if late:  # 22: stored NotReady; the kubelet stand-in makes it Ready later
            _registered_not_ready(data)
        response = await super()._handle(request)
        if late and response.status < 400:  # not when it already existed (409)
            name = data['metadata']['name']
            uid = self.objects[NODES, None, name].raw['metadata'].get('uid')
            ready_at = asyncio.get_running_loop().time() + self.kubelet.ready_after
            self.kubelet.waiting[name] = (uid, ready_at)
        if res == CRDS and response.status < 400 and request.action in (
                enums.action.CREATE, enums.action.UPDATE):  # 23: serve what it declares
            self._declare((data.get('metadata') or {}).get('name') or request.name)
        return response

    def _crd_version(self, res):
        """23: the stored CRD's entry in spec.versions for `res` (its group, plural and
        version), or None without a CRD or that version."""
        if res is None or not res.group or res == CRDS:
            return None
        key = (CRDS, None, f'{res.plural}.{res.group}')
        if key not in self.objects or self.objects[key].deleted:
            return None
        versions = (self.objects[key].raw.get('spec') or {}).get('versions') or []
        return next((v for v in versions if isinstance(v, dict) and v.get('name') == res.version),
                    None)

    def _schema(self, res):
        """23: the openAPIV3Schema objects of `res` are pruned by, or None."""
        schema = ((self._crd_version(res) or {}).get('schema') or {}).get('openAPIV3Schema')
        return schema if isinstance(schema, dict) else None

    def _pruned(self, res, obj):
        """23: what a read shows of a stored object: a pruned copy once a CRD is stored."""
        schema = self._schema(res)
        if schema is None or not isinstance(obj, dict):
            return obj
        obj = copy.deepcopy(obj)
        _prune(obj, schema, root=True)
        return obj

    def _pruned_write(self, request, schema: dict, stored):
        """23: a create stores the pruned body; an update (a PATCH, or a PUT made a merge
        patch by 8) stores the pruned result: the merge patch from the stored object to
        it, which also drops fields a narrower CRD no longer declares."""
        if request.action == enums.action.CREATE:
            _prune(request.data, schema, root=True)
        elif request.action == enums.action.UPDATE and stored is not None:
            merged = copy.deepcopy(dicts.patch_dict(stored, request.data))
            _prune(merged, schema, root=True)
            request = self._rewrite(request, data=_merge_diff(stored, merged))
        return request

    def _declare(self, name) -> None:
        """23: serves the kind a stored CRD declares, in each served version, in place of
        any declaration before it (7)."""
        key = (CRDS, None, name)
        if not name or key not in self.objects or self.objects[key].deleted:
            return
        spec = self.objects[key].raw.get('spec') or {}
        names, group = spec.get('names') or {}, spec.get('group')
        if not group or not names.get('plural') or not names.get('kind'):
            return
        for version in spec.get('versions') or []:
            if not isinstance(version, dict) or not version.get('name') or not version.get('served', True):
                continue
            subresources = version.get('subresources') or {}
            self.resources[f"{group}/{version['name']}/{names['plural']}"] = kmock.ResourceInfo(
                kind=names['kind'], singular=names.get('singular') or names['kind'].lower(),
                namespaced=spec.get('scope') == 'Namespaced', verbs=VERBS,
                shortnames=set(names.get('shortNames') or []),
                categories=set(names.get('categories') or []),
                subresources={s for s in ('status', 'scale') if s in subresources},
            )

    async def _scale(self, request):
        """24: the scale subresource of a kind whose stored CRD declares one."""
        res, name, method = request.resource, request.name, request.method
        scale = ((self._crd_version(res) or {}).get('subresources') or {}).get('scale')
        if not isinstance(scale, dict) or not name:
            return _status(404, 'NotFound', 'the server could not find the requested resource')
        if method not in (enums.method.GET, enums.method.PUT, enums.method.PATCH):
            return _status(405, 'MethodNotAllowed', f'{method} is not allowed on scale')
        async with self._lock:
            key = (res, request.namespace, name)
            if key not in self.objects or self.objects[key].deleted:
                raise _not_found(res, name)
            obj = self.objects[key]
            current = _scale_of(self._pruned(res, obj.raw), scale)  # read as 23 reads
            if method == enums.method.GET:
                return aiohttp.web.json_response(current)
            body = request.data
            if not isinstance(body, dict):
                return _status(400, 'BadRequest', 'the body of a scale write must be a JSON object')
            if method == enums.method.PUT:
                self._check_version(obj.raw, body)  # 10
                wanted = body
            else:
                wanted = dicts.patch_dict(current, body)
            replicas = (wanted.get('spec') or {}).get('replicas')
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                return _status(422, 'Invalid', f'Scale.autoscaling "{name}" is invalid: '
                                               f'spec.replicas: Invalid value: {json.dumps(replicas)}: '
                                               'must be greater than or equal to 0')
            patch = replicas
            for field in reversed(_json_path(scale.get('specReplicasPath') or '.spec.replicas')):
                patch = {field: patch}
            merged = self._pruned(res, copy.deepcopy(dicts.patch_dict(obj.raw, patch)))
            if diff := _merge_diff(obj.raw, merged):
                await self._patch_locked(res, obj, diff)
            return aiohttp.web.json_response(_scale_of(obj.raw, scale))

    async def _serve_fetch(self, request):  # 23
        return self._pruned(request.resource, await super()._serve_fetch(request))

    async def _serve_create(self, request):  # 23
        return self._pruned(request.resource, await super()._serve_create(request))

    async def _serve_update(self, request):  # 23
        return self._pruned(request.resource, await super()._serve_update(request))

    async def _serve_delete(self, request):  # 23
        return self._pruned(request.resource, await super()._serve_delete(request))

    async def _evict(self, request):
        """15: the eviction subresource (the API server's EvictionREST.Create)."""
        name, namespace = request.name, request.namespace
        body = request.data if isinstance(request.data, dict) else {}
        if (body.get('metadata') or {}).get('name') not in (None, name):
            return _status(400, 'BadRequest', 'name in URL does not match name in Eviction object')
        dry_run = request.params.get('dryRun') == 'All'
        async with self._lock:
            key = (PODS, namespace, name)
            if key not in self.objects or self.objects[key].deleted:
                error = _not_found(PODS, name)
                return _status(404, error.reason, error.message, error.details)
            pod = self.objects[key].raw
            if not self._pdb_can_be_ignored(pod):
                labels = pod['metadata'].get('labels') or {}
                budgets = [
                    obj for (res, ns, _), obj in self.objects.items()
                    if res == PDBS and ns == namespace and not obj.deleted
                    and _label_selector_matches(obj.raw.get('spec', {}).get('selector'), labels)
                ]
                if len(budgets) > 1:
                    return _status(500, message='This pod has more than one PodDisruptionBudget, '
                                                'which the eviction subresource does not support.')
                if budgets and not self._unhealthy_pod_may_go(pod, budgets[0].raw):
                    if refusal := await self._take_disruption(budgets[0], name, dry_run):
                        return refusal
            if not dry_run:
                await self._delete_locked(key)
        return _status(201)

    @staticmethod
    def _pdb_can_be_ignored(pod: dict) -> bool:
        """15: upstream's canIgnorePDB: terminal, pending or terminating pods."""
        phase = (pod.get('status') or {}).get('phase')
        return phase in ('Pending', 'Succeeded', 'Failed') or bool(
            pod['metadata'].get('deletionTimestamp'))

    @staticmethod
    def _unhealthy_pod_may_go(pod: dict, pdb: dict) -> bool:
        """15: an unready pod does not count as healthy, so evicting it uses no budget when
        the policy is AlwaysAllow or (IfHealthyBudget, the default) the budget is met."""
        conditions = (pod.get('status') or {}).get('conditions') or []
        if any(c.get('type') == 'Ready' and c.get('status') == 'True' for c in conditions):
            return False
        if (pdb.get('spec') or {}).get('unhealthyPodEvictionPolicy') == 'AlwaysAllow':
            return True
        status = pdb.get('status') or {}
        desired = status.get('desiredHealthy', 0)
        return 0 < desired <= status.get('currentHealthy', 0)

    async def _take_disruption(self, pdb, pod_name: str, dry_run: bool):
        """15: upstream's checkAndDecrement; a refusal response, or None once the budget's
        disruptionsAllowed is decremented (lock held)."""
        name, status = pdb.raw['metadata']['name'], pdb.raw.get('status') or {}
        allowed = status.get('disruptionsAllowed', 0)
        if allowed < 0:
            return _status(403, 'Forbidden', f'poddisruptionbudget.policy "{name}" is forbidden: '
                                             'pdb disruptions allowed is negative',
                           {'name': name, 'group': 'policy', 'kind': 'poddisruptionbudget'})
        if allowed == 0:
            cause = (f'The disruption budget {name} needs {status.get("desiredHealthy", 0)} '
                     f'healthy pods and has {status.get("currentHealthy", 0)} currently')
            return _status(429, 'TooManyRequests',
                           "Cannot evict pod as it would violate the pod's disruption budget.",
                           {'causes': [{'reason': 'DisruptionBudget', 'message': cause}]})
        if not dry_run:
            pdb.patch({'status': {'disruptionsAllowed': allowed - 1,
                                  'disruptedPods': {pod_name: _now()}}})
            await self._buses[PDBS].put({'type': 'MODIFIED', 'object': pdb.raw})
        return None

    async def _delete_locked(self, key) -> None:
        """A DELETE as kmock's _handle does it (lock held): with finalizers the object gets
        a deletionTimestamp, without it is gone."""
        obj = self.objects[key]
        meta = obj.raw['metadata']
        if meta.get('deletionTimestamp'):
            return
        if meta.get('finalizers'):
            obj.patch({'metadata': {'deletionTimestamp': _now()}})
            await self._buses[key[0]].put({'type': 'MODIFIED', 'object': obj.raw})
        else:
            obj.delete()
            await self._buses[key[0]].put({'type': 'DELETED', 'object': obj.last.raw})

    async def _render_error(self, exc):  # 11
        if isinstance(exc, k8s.KubernetesObjectConflictError):
            exc = attrs.evolve(exc, reason='AlreadyExists')
        elif isinstance(exc, k8s.KubernetesNotFoundError):
            exc = attrs.evolve(exc, reason='NotFound')
        return await super()._render_error(exc)

    async def _serve_version(self, request):  # 6, 24
        doc = await super()._serve_version(request)
        doc['groupVersion'] = doc['groupVersion'].lstrip('/')
        for entry in doc['resources']:  # kmock copies the parent's names and verbs
            if '/' in entry['name']:
                entry.update(singularName='', shortNames=[], categories=[],
                             verbs=['get', 'patch', 'update'])
            if entry['name'].endswith('/scale'):  # 24, where kubectl scale looks
                entry.update(kind='Scale', group='autoscaling', version='v1')
            if entry['name'] in ('pods/eviction', 'pods/binding'):  # 15, as kubectl drain checks
                kind = 'Eviction' if entry['name'] == 'pods/eviction' else 'Binding'
                group = 'policy' if kind == 'Eviction' else ''
                entry.update(kind=kind, group=group, version='v1', verbs=['create'])
        return doc

    async def _serve_list(self, request):  # 2, 3, 23
        doc = await super()._serve_list(request)
        return {
            'apiVersion': self._gv(request.resource),
            'kind': f'{self.resources[request.resource].kind}List',
            'metadata': {'resourceVersion': str(self.journal.rv)},
            'items': [self._pruned(request.resource, obj)  # 23
                      for obj in doc['items'] if _selected(request.params, obj)],
        }

    def _watched(self, request, resource, obj) -> bool:
        meta = obj.get('metadata', {})
        return (
            resource == request.resource
            and request.namespace in (None, meta.get('namespace'))
            and request.name in (None, meta.get('name'))
            and _selected(request.params, obj)
        )

    async def _serve_watch(self, request):  # 4, 17, 19, 23
        yield b''  # send the headers now, as kmock does
        raw = request._raw_request
        raw['peer_log_entry']['status'] = 200  # 20: the headers are out
        loop = asyncio.get_running_loop()
        timeout = request.params.get('timeoutSeconds')
        deadline = loop.time() + float(timeout) if timeout else None
        journal = self.journal
        since = request.params.get('resourceVersion') or '0'
        if since == '0':
            async with self._lock:  # writers hold it: the snapshot and position agree
                snapshot = [
                    obj.raw for (res, _, _), obj in self.objects.items()
                    if not obj.deleted and self._watched(request, res, obj.raw)
                ]
                pos = journal.end
            for obj in snapshot:
                yield {'type': 'ADDED', 'object': self._pruned(request.resource, obj)}  # 23
        elif int(since) < journal.compacted:  # 17
            yield _expired(since, journal.compacted)
            return
        else:
            pos = journal.after(int(since))
        transport = raw.transport  # 19
        if transport is None:  # the client has gone already
            return
        self.open_watches.add(transport)
        try:
            while True:
                entries = journal.read(pos)
                if entries is None:  # 17: fell behind a compaction
                    yield _expired(since, journal.compacted)
                    return
                pos += len(entries)
                for rv, res, event in entries:
                    since = rv
                    if self._watched(request, res, event['object']):
                        yield {**event, 'object': self._pruned(res, event['object'])}  # 23
                changed = journal.changed
                try:
                    left = None if deadline is None else max(0.0, deadline - loop.time())
                    await asyncio.wait_for(changed.wait(), left)
                except asyncio.TimeoutError:
                    return
                if transport.is_closing():  # 19, or the client has gone
                    return
        finally:
            self.open_watches.discard(transport)


async def main(port: int) -> None:
    async with Apiserver() as emulator, kmock.Server(emulator, port=port or None) as server:
        print(f'listening on {server.port}', flush=True)
        await asyncio.Event().wait()


if __name__ == '__main__':
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
