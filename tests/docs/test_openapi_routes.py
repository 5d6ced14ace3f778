"""docs/openapi.json describes exactly the routes of the route table (src/api/routes.c): every
method and path pattern, no more, no less."""

import json
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))


def test_openapi_paths_match_the_route_table():
    with open(os.path.join(ROOT, "src/api/routes.c")) as f:
        table = set(re.findall(r'R(?:_RECOVER|_QUERY)?\("([A-Z]+)", "([^"]+)"', f.read()))
    with open(os.path.join(ROOT, "docs/openapi.json")) as f:
        doc = json.load(f)
    documented = {(method.upper(), path) for path, item in doc["paths"].items()
                  for method in item if method in ("get", "post", "put", "patch", "delete")}
    assert len(table) > 20
    assert table - documented == set(), "routes missing from docs/openapi.json"
    assert documented - table == set(), "documented routes the server does not have"
