"""docs/openapi.json and the route table describe the same API, held both ways: the route table as
the server declares it (`payd dev routes --json`: routes, Idempotency-Key and auth rules, and each
declared body and query as JSON Schema) against the document's operations. Every route is an
operation and every operation a route; each request body has the same fields, required ones,
types, enums, bounds, lengths, patterns and formats, and refuses other members; each query has
the same parameters with the same schemas."""

import json
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
BUILD = os.environ.get("PAYD_BUILD", os.path.join(ROOT, "build"))
PAYD = os.environ.get("PAYD_BIN", os.path.join(BUILD, "payd"))
METHODS = ("get", "post", "put", "patch", "delete")
# What a schema says about the values it accepts; descriptions and examples are for people.
KEYWORDS = ("type", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "format",
            "maxProperties", "propertyNames", "additionalProperties", "minItems", "maxItems",
            "items", "default")


def load_doc():
    with open(os.path.join(ROOT, "docs/openapi.json")) as f:
        return json.load(f)


DOC = load_doc()


def load_routes():
    out = subprocess.run([PAYD, "dev", "routes", "--json"], capture_output=True, text=True,
                         check=True, timeout=30)
    return json.loads(out.stdout)


ROUTES = load_routes()


def resolve(node):
    """Follows $ref (keywords beside a $ref add to the target's)."""
    while isinstance(node, dict) and "$ref" in node:
        target = DOC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def is_null(node):
    return resolve(node) == {"type": "null"}


def normalize(node):
    """(the schema's value keywords, whether null is accepted too), the same for both sides:
    `anyOf: [X, {type: null}]` and `type: [T, "null"]` are X or T plus null; a union of enums
    or consts is one enum; enums compare as sets."""
    node = resolve(node)
    nullable = False
    for union in ("anyOf", "oneOf"):
        if union in node:
            alternatives = [a for a in node[union] if not is_null(a)]
            nullable = len(alternatives) < len(node[union])
            if len(alternatives) == 1:
                inner, inner_null = normalize(alternatives[0])
                return inner, nullable or inner_null
            values = []
            for a in map(resolve, alternatives):
                assert "enum" in a or "const" in a, f"a union other than of values: {node}"
                values += a.get("enum", [a.get("const")])
            return {"enum": sorted(values)}, nullable
    out = {}
    for key in KEYWORDS:
        if key not in node:
            continue
        value = node[key]
        if key == "type" and isinstance(value, list):
            nullable = "null" in value
            rest = [t for t in value if t != "null"]
            value = rest[0] if len(rest) == 1 else sorted(rest)
        elif key == "enum":
            value = sorted(value)
        elif key in ("items", "additionalProperties", "propertyNames") and isinstance(value, dict):
            value = normalize(value)[0]
        out[key] = value
    return out, nullable


def operations():
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                params = [resolve(p) for p in item.get("parameters", []) + op.get("parameters", [])]
                yield method.upper(), path, op, params


OPERATIONS = {(m, p): (op, params) for m, p, op, params in operations()}
ROUTE_IDS = [f"{r['method']} {r['path']}" for r in ROUTES]


def test_the_same_operations_both_ways():
    table = {(r["method"], r["path"]) for r in ROUTES}
    assert len(table) == len(ROUTES) > 20
    assert table - set(OPERATIONS) == set(), "routes missing from docs/openapi.json"
    assert set(OPERATIONS) - table == set(), "documented operations the server does not have"


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_request_body(route):
    op, _ = OPERATIONS[(route["method"], route["path"])]
    declared = route.get("body")
    documented = op.get("requestBody")
    if declared is None:
        assert documented is None, "the document has a body the server does not read"
        return
    assert documented is not None, "the server reads a body the document does not describe"
    # A body is needed only when a field is: no body at all reads as {} (§1).
    assert documented.get("required", False) == bool(declared["required"]), \
        "requestBody.required must say whether any field is required"
    doc = resolve(documented["content"]["application/json"]["schema"])
    assert doc.get("type") == "object"
    assert doc.get("additionalProperties") is False  # a member not declared: unknown_parameter
    assert sorted(doc.get("required", [])) == sorted(declared["required"])
    assert sorted(doc["properties"]) == sorted(declared["properties"])
    for name, schema in declared["properties"].items():
        assert normalize(doc["properties"][name]) == normalize(schema), name


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_query_parameters(route):
    _, params = OPERATIONS[(route["method"], route["path"])]
    documented = {p["name"]: p for p in params if p["in"] == "query"}
    declared = route.get("query", {})
    assert sorted(documented) == sorted(declared)
    for name, schema in declared.items():
        assert not documented[name].get("required", False), name
        assert normalize(documented[name]["schema"]) == normalize(schema), name


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_idempotency_key_and_auth(route):
    op, params = OPERATIONS[(route["method"], route["path"])]
    keys = [p for p in params if p["in"] == "header" and p["name"] == "Idempotency-Key"]
    rule = None if not keys else "required" if keys[0].get("required") else "optional"
    assert rule == route["idempotency_key"]
    security = op.get("security", DOC["security"])
    assert bool(security and any(security)) == route["auth"]


def test_the_comparison_sees_a_difference():
    """The normalization must not make everything equal."""
    amount = DOC["components"]["schemas"]["Amount"]
    assert normalize(amount) != normalize({**amount, "maximum": 10})
    assert normalize({"anyOf": [amount, {"type": "null"}]}) != normalize(amount)
    assert normalize({"type": ["string", "null"]}) == ({"type": "string"}, True)
