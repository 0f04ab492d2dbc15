"""A Kubernetes API peer for the kube-rs backend tests: kmock 0.8 plus a small adapter.

Usage: python kmock_server.py PORT   (0 = any free port; prints "listening on PORT")

kmock's KubernetesEmulator (https://pypi.org/project/kmock/) stores objects, merges
patches, soft-deletes with finalizers and fans events out to watchers. This adapter
fills the gaps that stop kube-rs (kube-runtime's watcher) and kubectl from using it
(1-14), and adds what the controller backend's tests need (15-20): evictions, 410 Gone,
injected faults, lost watches and a request log, the test controls under /_peer/.

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
    ones (and answers the same summary).
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

Known and left as is: strategic merge patch and server-side apply are treated as
JSON merge patch (lists replaced, not merged by key); no metadata.generation; no
deletecollection; POST pods/binding is 404; objects may be created in namespaces that do
not exist; a watch with a selector does not send DELETED when an object stops matching;
lists ignore resourceVersion and resourceVersionMatch (no 410 on lists); eviction
ignores the budget's observedGeneration and sets no DisruptionAllowed condition; deletion has no grace period
(an evicted or deleted pod without finalizers is gone at once); preferredVersion of a
group with several versions is arbitrary; list order is insertion order.
"""

import asyncio
import bisect
import collections
import copy
import itertools
import datetime
import re
import sys
import uuid

import aiohttp.web
import attrs
import kmock
from kmock._internal import enums, k8s, parsing

VERBS = {'create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'}
KARPENTER = {
    'karpenter.sh/v1/nodepools': ('NodePool', 'nodepool'),
    'karpenter.sh/v1/nodeclaims': ('NodeClaim', 'nodeclaim'),
    'karpenter.k8s.aws/v1/ec2nodeclasses': ('EC2NodeClass', 'ec2nodeclass'),
}
PODS = kmock.resource('', 'v1', 'pods')
PDBS = kmock.resource('policy', 'v1', 'poddisruptionbudgets')
CONTROL = '/_peer/'  # 17-20: the test controls, outside /api and /apis
REQUEST_LOG_SIZE = 5000  # 20
# 18: the statuses a fault may have, with the reason the API server gives each.
FAULT_REASONS = {
    400: 'BadRequest', 403: 'Forbidden', 404: 'NotFound', 409: 'Conflict', 410: 'Gone',
    422: 'Invalid', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable',
    504: 'Timeout',
}
FAULT_METHODS = {'GET', 'POST', 'PUT', 'PATCH', 'DELETE', '*'}


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


@attrs.define
class Fault:
    """18: one queued fault and how many times it has been served."""
    id: int
    method: str
    path_contains: str
    status: int
    count: int
    retry_after: int
    served: int = 0

    @classmethod
    def parse(cls, id: int, body) -> 'Fault':
        if not isinstance(body, dict):
            raise ValueError('the body must be a JSON object')
        unknown = set(body) - {'method', 'path_contains', 'status', 'count', 'retry_after'}
        if unknown:
            raise ValueError(f'unknown fields {sorted(unknown)}')
        fault = cls(
            id=id, method=str(body.get('method', '*')).upper(),
            path_contains=body.get('path_contains', ''), status=body.get('status'),
            count=body.get('count', 1), retry_after=body.get('retry_after', 1),
        )
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
        if fault := next((f for f in self.faults if f.matches(raw)), None):
            await raw.read()
            entry['injected'] = True
            self.faults_served += 1
            response = fault.serve(raw)
        else:
            response = await super().__call__(raw)
        entry['status'] = response.status
        return response

    async def _control(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """17-20: the test controls. Errors are {"error": ...}, 400 or 404."""
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
        except ValueError as e:  # includes a body that is not JSON
            return aiohttp.web.json_response({'error': str(e)}, status=400)
        return aiohttp.web.json_response(
            {'error': f'no control {raw.method} {raw.path}'}, status=404)

    def _fault_summary(self) -> dict:
        return {'remaining': sum(f.remaining for f in self.faults),
                'served': self.faults_served,
                'faults': [f.to_json() for f in self.faults]}

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
        return await super()._handle(request)

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

    async def _serve_version(self, request):  # 6
        doc = await super()._serve_version(request)
        doc['groupVersion'] = doc['groupVersion'].lstrip('/')
        for entry in doc['resources']:  # kmock copies the parent's names and verbs
            if '/' in entry['name']:
                entry.update(singularName='', shortNames=[], categories=[],
                             verbs=['get', 'patch', 'update'])
            if entry['name'] in ('pods/eviction', 'pods/binding'):  # 15, as kubectl drain checks
                kind = 'Eviction' if entry['name'] == 'pods/eviction' else 'Binding'
                group = 'policy' if kind == 'Eviction' else ''
                entry.update(kind=kind, group=group, version='v1', verbs=['create'])
        return doc

    async def _serve_list(self, request):  # 2, 3
        doc = await super()._serve_list(request)
        return {
            'apiVersion': self._gv(request.resource),
            'kind': f'{self.resources[request.resource].kind}List',
            'metadata': {'resourceVersion': str(self.journal.rv)},
            'items': [obj for obj in doc['items'] if _selected(request.params, obj)],
        }

    def _watched(self, request, resource, obj) -> bool:
        meta = obj.get('metadata', {})
        return (
            resource == request.resource
            and request.namespace in (None, meta.get('namespace'))
            and request.name in (None, meta.get('name'))
            and _selected(request.params, obj)
        )

    async def _serve_watch(self, request):  # 4, 17, 19
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
                yield {'type': 'ADDED', 'object': obj}
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
                        yield event
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
