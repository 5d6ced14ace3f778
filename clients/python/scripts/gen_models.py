#!/usr/bin/env python3
"""Writes payd/models.py, the TypedDicts of the API's resources, from docs/openapi.json's
components.schemas (standard library only).

    python3 clients/python/scripts/gen_models.py            # rewrite payd/models.py
    python3 clients/python/scripts/gen_models.py --check    # exit 1 when it is stale

Mapping: an object schema is a TypedDict (members not `required` are NotRequired); allOf merges
its parts' members, later parts overriding; a schema that is a plain type, an enum or a union is
a type alias; `const` and `enum` are Literal; `"type": [..., "null"]` and oneOf/anyOf are unions;
an inline object with properties becomes a TypedDict of its own named after its place
(Event.data -> EventData); additionalProperties is dict[str, T]."""

from __future__ import annotations

import argparse
import json
import keyword
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PACKAGE))
OPENAPI = os.path.join(ROOT, "docs", "openapi.json")
OUTPUT = os.path.join(PACKAGE, "payd", "models.py")
PRIMITIVES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
              "null": "None"}


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


def literal(value: Any) -> str:
    """A JSON value as Python source for Literal[...]."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


class Generator:
    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas
        self.blocks: list[str] = []  # class and alias definitions, in emission order

    def ref_name(self, ref: str) -> str:
        prefix = "#/components/schemas/"
        if not ref.startswith(prefix):
            raise SystemExit(f"unsupported $ref {ref}")
        return ref[len(prefix):]

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.schemas[self.ref_name(schema["$ref"])]
        return schema

    def members(self, schema: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
        """The properties and required names of an object schema, allOf parts merged."""
        schema = self.resolve(schema)
        properties: dict[str, Any] = {}
        required: set[str] = set()
        for part in schema.get("allOf", []):
            part_properties, part_required = self.members(part)
            properties.update(part_properties)
            required |= part_required
        properties.update(schema.get("properties", {}))
        required |= set(schema.get("required", []))
        return properties, required

    def is_object(self, schema: dict[str, Any]) -> bool:
        return "properties" in schema or "allOf" in schema

    def type_of(self, schema: dict[str, Any], place: str) -> str:
        """The annotation for a schema met at `place` (used to name inline objects)."""
        if "$ref" in schema:
            return self.ref_name(schema["$ref"])
        if "const" in schema:
            return f"Literal[{literal(schema['const'])}]"
        if "enum" in schema:
            return "Literal[" + ", ".join(literal(v) for v in schema["enum"]) + "]"
        for union in ("oneOf", "anyOf"):
            if union in schema:
                options = [self.type_of(option, place) for option in schema[union]]
                return " | ".join(dict.fromkeys(options))
        if self.is_object(schema):
            self.emit_typed_dict(place, schema)
            return place
        kinds = schema.get("type", "any")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        return " | ".join(self.single_type(kind, schema, place) for kind in kinds)

    def single_type(self, kind: str, schema: dict[str, Any], place: str) -> str:
        if kind == "array":
            return f"list[{self.type_of(schema.get('items', {}), place + 'Item')}]"
        if kind == "object":
            extra = schema.get("additionalProperties")
            value = self.type_of(extra, place + "Value") if isinstance(extra, dict) else "Any"
            return f"dict[str, {value}]"
        return PRIMITIVES.get(kind, "Any")

    def emit_typed_dict(self, name: str, schema: dict[str, Any]) -> None:
        properties, required = self.members(schema)
        lines = []
        for member, member_schema in properties.items():
            if not member.isidentifier() or keyword.iskeyword(member):
                raise SystemExit(f"{name}.{member} is not a Python identifier")
            annotation = self.type_of(member_schema, name + camel(member))
            if member not in required:
                annotation = f"NotRequired[{annotation}]"
            lines.append(f"    {member}: {annotation}")
        doc = self.resolve(schema).get("description", "").split("\n")[0].replace('"""', "'''")
        head = f"class {name}(TypedDict):\n"
        if doc:
            head += f'    """{doc}"""\n\n'
        self.blocks.append(head + ("\n".join(lines) if lines else "    pass") + "\n")

    def emit(self, name: str, schema: dict[str, Any]) -> None:
        if self.is_object(schema):
            self.emit_typed_dict(name, schema)
        else:
            self.blocks.append(f"{name} = {self.type_of(schema, name)}\n")

    def module(self) -> str:
        for name, schema in self.schemas.items():
            self.emit(name, schema)
        names = [block.split("(")[0].split(" = ")[0].removeprefix("class ")
                 for block in self.blocks]
        header = (
            '"""The API\'s resources as TypedDicts. Generated from docs/openapi.json by\n'
            'clients/python/scripts/gen_models.py: do not edit; run the script after changing\n'
            'the document (a test fails while this file is stale)."""\n\n'
            "from __future__ import annotations\n\n"
            "from typing import Any, Literal, NotRequired, TypedDict\n\n"
            "__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n")
        # Aliases are evaluated at import, so one that names a later class goes after it.
        aliases = [b for b in self.blocks if not b.startswith("class ")]
        classes = [b for b in self.blocks if b.startswith("class ")]
        simple = [b for b in aliases if not any(n in b.split(" = ")[1] for n in names)]
        composite = [b for b in aliases if b not in simple]
        return header + "\n" + "\n\n".join(["".join(simple)] + classes + ["".join(composite)])


def render(openapi_path: str = OPENAPI) -> str:
    with open(openapi_path, encoding="utf-8") as f:
        document = json.load(f)
    text = Generator(document["components"]["schemas"]).module()
    return text.rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when payd/models.py differs from what would be written")
    args = parser.parse_args()
    text = render()
    if args.check:
        with open(OUTPUT, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{OUTPUT} is stale: run {sys.argv[0]}", file=sys.stderr)
                return 1
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
