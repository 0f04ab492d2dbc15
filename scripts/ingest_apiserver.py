# A read-only stand-in API server for scripts/bench_kube_ingest.sh: serves N pods bound to
# nodes, as a real API server would list them (pages with continue tokens, managedFields
# and all), empty lists of every other kind, and watches that stay open without events.
# The kmock test peer creates objects at ~30/s and slows as it grows, too slow for 50,000.
# Usage: python3 ingest_apiserver.py N  (prints "listening on PORT", on 127.0.0.1).
import json, sys, time, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlparse, parse_qs
N = int(sys.argv[1])
def pod(i):
    return {"metadata":{"name":f"p{i}","namespace":"default","uid":f"u{i}","resourceVersion":"1","labels":{"app":f"a{i%50}","pod-template-hash":"abc"},
             "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":f"rs{i%50}","uid":"x","controller":True}],
             "managedFields":[{"manager":"kubectl","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:containers":{}}}}]},
            "spec":{"nodeName":f"n{i%500}","containers":[{"name":"m","image":"nginx:1.27","env":[{"name":"A","value":"x"*40}],"resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}],
                    "tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},
            "status":{"phase":"Running","podIP":"10.0.0.1","conditions":[{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]}}
PODS=[json.dumps(pod(i)) for i in range(N)]
class H(BaseHTTPRequestHandler):
    protocol_version="HTTP/1.1"
    def log_message(self,*a): pass
    def do_GET(self):
        u=urlparse(self.path); q=parse_qs(u.query)
        if q.get("watch",["false"])[0] in ("true","1"):
            self.send_response(200); self.send_header("Content-Type","application/json"); self.send_header("Transfer-Encoding","chunked"); self.end_headers()
            try:
                time.sleep(int(q.get("timeoutSeconds",["290"])[0]))
                self.wfile.write(b"0\r\n\r\n")
            except Exception: pass
            return
        if u.path.endswith("/pods"):
            limit=int(q.get("limit",["0"])[0]) or N; off=int(q.get("continue",["0"])[0] or 0)
            items=PODS[off:off+limit]; nxt=off+limit
            meta={"resourceVersion":"1"}
            if nxt<N: meta["continue"]=str(nxt)
            body=('{"kind":"PodList","apiVersion":"v1","metadata":'+json.dumps(meta)+',"items":['+",".join(items)+']}').encode()
        else:
            body=json.dumps({"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}).encode()
        self.send_response(200); self.send_header("Content-Type","application/json"); self.send_header("Content-Length",str(len(body))); self.end_headers(); self.wfile.write(body)
s=ThreadingHTTPServer(("127.0.0.1",0),H); print("listening on",s.server_address[1],flush=True); s.serve_forever()
