"""A Kubernetes API peer for the kube-rs backend tests: kmock 0.8 plus a small adapter.

Usage: python kmock_server.py PORT   (0 = any free port; prints "listening on PORT")

kmock's KubernetesEmulator (https://pypi.org/project/kmock/) stores objects, merges
patches, soft-deletes with finalizers and fans events out to watchers. This adapter
fills the gaps that stop kube-rs (kube-runtime's watcher) and kubectl from using it:

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

Known and left as is: strategic merge patch and server-side apply are treated as
JSON merge patch (lists replaced, not merged by key); no metadata.generation; no
deletecollection; POST subresources (eviction, binding) are 404; objects may be created
in namespaces that do not exist; a watch with a selector does not send DELETED when an
object stops matching; the journal is never compacted (no 410 Gone); preferredVersion
of a group with several versions is arbitrary; list order is insertion order.
"""

import asyncio
import bisect
import copy
import datetime
import re
import sys
import uuid

import attrs
import kmock
from kmock._internal import enums, k8s, parsing

VERBS = {'create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'}
KARPENTER = {
    'karpenter.sh/v1/nodepools': ('NodePool', 'nodepool'),
    'karpenter.sh/v1/nodeclaims': ('NodeClaim', 'nodeclaim'),
    'karpenter.k8s.aws/v1/ec2nodeclasses': ('EC2NodeClass', 'ec2nodeclass'),
}


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


class Journal:
    """Gap 1 and 4: stands in for kmock's `_buses` (resource -> Bus)."""

    def __init__(self, emulator: 'Apiserver') -> None:
        self.emulator = emulator
        self.rv = 0
        self.log: list[tuple[int, kmock.resource, dict]] = []  # (rv, resource, event)
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
            now = datetime.datetime.now(datetime.timezone.utc)
            meta['creationTimestamp'] = now.strftime('%Y-%m-%dT%H:%M:%SZ')
        if event['type'] != 'DELETED':  # kmock has already soft-deleted a DELETED one
            stored = self.emulator.objects[resource, meta.get('namespace'), meta['name']]
            stored.last['metadata'] = copy.deepcopy(meta)
        self.log.append((self.rv, resource, {'type': event['type'], 'object': obj}))
        self.changed.set()
        self.changed = asyncio.Event()


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

    async def _handle(self, request):
        res, data = request.resource, request.data
        if res is None or res not in self.resources or not isinstance(data, dict):
            return await super()._handle(request)
        key = (res, request.namespace, request.name)
        stored = None
        if key in self.objects and not self.objects[key].deleted:
            stored = copy.deepcopy(self.objects[key].raw)
        if request.action == enums.action.CREATE:  # 12
            meta = data.setdefault('metadata', {})
            if not meta.get('name') and meta.get('generateName'):
                meta['name'] = meta['generateName'] + uuid.uuid4().hex[:5]
            if self.resources[res].namespaced:
                meta['namespace'] = request.namespace or meta.get('namespace')
            else:
                meta.pop('namespace', None)
        elif request.method == enums.method.PUT and request.name and stored is not None:  # 8
            self._check_version(stored, data)
            if request.subresource == 'status':
                data = {**stored, 'status': data.get('status')}
            else:
                keep = ('uid', 'creationTimestamp', 'deletionTimestamp', 'resourceVersion')
                meta = {**data.get('metadata', {})}
                meta.update({k: stored['metadata'][k] for k in keep if k in stored['metadata']})
                data = {**data, 'metadata': meta}
            request = self._rewrite(request, action=enums.action.UPDATE,
                                    data=_merge_diff(stored, data))
        elif request.action == enums.action.UPDATE:
            self._check_version(stored, data)
            if request.subresource == 'status':  # 9
                request = self._rewrite(request, data={k: data[k] for k in ('status',) if k in data})
        return await super()._handle(request)

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

    async def _serve_watch(self, request):  # 4
        yield b''  # send the headers now, as kmock does
        loop = asyncio.get_running_loop()
        timeout = request.params.get('timeoutSeconds')
        deadline = loop.time() + float(timeout) if timeout else None
        since = request.params.get('resourceVersion') or '0'
        if since == '0':
            async with self._lock:  # writers hold it: the snapshot and position agree
                snapshot = [
                    obj.raw for (res, _, _), obj in self.objects.items()
                    if not obj.deleted and self._watched(request, res, obj.raw)
                ]
                pos = len(self.journal.log)
            for obj in snapshot:
                yield {'type': 'ADDED', 'object': obj}
        else:
            pos = bisect.bisect_right(self.journal.log, int(since), key=lambda e: e[0])
        while True:
            while pos < len(self.journal.log):
                _, res, event = self.journal.log[pos]
                pos += 1
                if self._watched(request, res, event['object']):
                    yield event
            changed = self.journal.changed
            try:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                await asyncio.wait_for(changed.wait(), left)
            except asyncio.TimeoutError:
                return


async def main(port: int) -> None:
    async with Apiserver() as emulator, kmock.Server(emulator, port=port or None) as server:
        print(f'listening on {server.port}', flush=True)
        await asyncio.Event().wait()


if __name__ == '__main__':
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
