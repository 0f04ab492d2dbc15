#!/usr/bin/env python3
"""Independent check of karpenter-tui's CRD schemas with the `jsonschema` package.

Used by tests/crd_schemas.rs. It reads the CRD manifests exactly as `karpenter-tui crds`
prints them (multi-document YAML), takes each kind's openAPIV3Schema, turns the Kubernetes
OpenAPI dialect into plain JSON Schema, and validates every document of the fixture files
against the schema of its kind.

Output: one JSON object per line and per document:
  {"file": ..., "doc": <index>, "kind": ..., "name": ..., "errors": [{"path": ..., "message": ...}]}
Documents whose kind has no CRD in the input are reported with "skipped": true.

Usage: jsonschema_check.py --crds crds.yaml [--draft 7|2020-12] FIXTURE.yaml...
"""

import argparse
import datetime
import json
import sys

import jsonschema
import yaml


def to_json_schema(node):
    """Translates one Kubernetes structural schema node (recursively) to JSON Schema.

    - x-kubernetes-int-or-string: the value may be an integer or a string (the API server
      checks `pattern` and friends only against strings, as JSON Schema does).
    - nullable: null is allowed in addition to the declared type.
    - every other x-kubernetes-* key is an API-server concern (CEL rules, list and map
      types, pruning) and is dropped.
    """
    if isinstance(node, list):
        return [to_json_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in ("properties", "patternProperties", "definitions", "$defs"):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        else:
            out[key] = to_json_schema(value)
    if node.get("x-kubernetes-int-or-string") is True:
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") is True:
        if "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = types + ["null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = list(out["enum"]) + [None]
        if "anyOf" in out:
            out["anyOf"] = list(out["anyOf"]) + [{"type": "null"}]
    return out


def plain(value):
    """YAML 1.1 turns unquoted dates into date objects; Kubernetes sees them as strings."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def json_path(error):
    """`spec.disruption.budgets[0].nodes` style path of an error's instance."""
    out = ""
    for part in error.absolute_path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def leaf_errors(error):
    """anyOf/oneOf failures carry the real reasons in their context; report those too."""
    yield error
    for sub in error.context or []:
        yield from leaf_errors(sub)


def load_schemas(path):
    schemas = {}
    with open(path, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            kind = doc["spec"]["names"]["kind"]
            for version in doc["spec"]["versions"]:
                if version.get("storage"):
                    schemas[kind] = to_json_schema(version["schema"]["openAPIV3Schema"])
    return schemas


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--crds", required=True)
    parser.add_argument("--draft", choices=["7", "2020-12"], default="2020-12")
    parser.add_argument("--dump-schemas", help="write the translated JSON Schemas here")
    parser.add_argument("fixtures", nargs="*")
    args = parser.parse_args()

    cls = jsonschema.Draft7Validator if args.draft == "7" else jsonschema.Draft202012Validator
    schemas = load_schemas(args.crds)
    if args.dump_schemas:
        with open(args.dump_schemas, "w", encoding="utf-8") as f:
            json.dump(schemas, f, indent=1, sort_keys=True)
    validators = {}
    for kind, schema in schemas.items():
        # The translated schema must itself be a valid JSON Schema of the chosen draft.
        cls.check_schema(schema)
        validators[kind] = cls(schema)
    print(json.dumps({"crds": sorted(schemas)}))

    for path in args.fixtures:
        with open(path, encoding="utf-8") as f:
            docs = list(yaml.safe_load_all(f))
        for index, doc in enumerate(docs):
            if doc is None:
                continue
            doc = plain(doc)
            kind = doc.get("kind") if isinstance(doc, dict) else None
            name = (doc.get("metadata") or {}).get("name") if isinstance(doc, dict) else None
            record = {"file": path, "doc": index, "kind": kind, "name": name}
            validator = validators.get(kind)
            if validator is None:
                record["skipped"] = True
                print(json.dumps(record))
                continue
            errors = []
            for error in validator.iter_errors(doc):
                for leaf in leaf_errors(error):
                    errors.append({"path": json_path(leaf), "message": leaf.message})
            record["errors"] = errors
            print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
