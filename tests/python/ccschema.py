"""ClusterCockpit's job-archive JSON schemas (tests/fixtures/ccarchive-schemas/,
copies of cc-lib's and cc-backend's, MIT: see the folder's README.md) and a
validator for the JSON Schema 2020-12 keywords they use ($ref between the
files by their ``embedfs://NAME`` ids and within one by a JSON pointer,
type, enum, required, properties, additionalProperties, minProperties,
items, minItems, contains, uniqueItems, minimum, maximum, exclusiveMinimum).
jsonschema is not in the venv; a keyword this does not know fails loudly
rather than passing. A plain module: test_ccarchive.py imports it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "ccarchive-schemas"
_KNOWN = {
    "$schema", "$id", "$ref", "title", "description", "type", "enum", "required", "properties",
    "additionalProperties", "minProperties", "items", "minItems", "contains", "uniqueItems",
    "minimum", "maximum", "exclusiveMinimum",
}  # fmt: skip
_TYPES: dict[str, Any] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
}  # fmt: skip


def load(name: str) -> dict[str, Any]:
    """One schema file by its name without .schema.json (job-meta, job-data, cluster ...)."""
    doc: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    return doc


def _resolve(ref: str, root: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the schema ``ref`` names, the document it lives in)."""
    target, _, pointer = ref.partition("#")
    doc = root
    if target:
        if not target.startswith("embedfs://"):
            raise ValueError(f"$ref {ref!r}: only embedfs:// ids are known here")
        doc = load(target.removeprefix("embedfs://").removesuffix(".schema.json"))
    node: Any = doc
    for part in filter(None, pointer.split("/")):
        node = node[part]
    return node, doc


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def errors(
    value: Any, schema: dict[str, Any], path: str = "$", root: dict[str, Any] | None = None
) -> list[str]:
    """Every violation of ``schema`` in ``value`` (empty: valid)."""
    root = schema if root is None else root
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} at {path}: not implemented here")
    out: list[str] = []
    if "$ref" in schema:
        target, doc = _resolve(schema["$ref"], root)
        out += errors(value, target, path, doc)
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [*out, f"{path}: {type(value).__name__} is not {'/'.join(kinds)}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} not in {schema['enum']}")
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {value} > {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append(f"{path}: {value} <= {schema['exclusiveMinimum']}")
    if isinstance(value, dict):
        out += [f"{path}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        if len(value) < schema.get("minProperties", 0):
            out.append(f"{path}: fewer than {schema['minProperties']} properties")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                out += errors(item, props[key], f"{path}.{key}", root)
            elif isinstance(schema.get("additionalProperties"), dict):
                out += errors(item, schema["additionalProperties"], f"{path}.{key}", root)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: fewer than {schema['minItems']} items")
        for i, item in enumerate(value):
            if "items" in schema:
                out += errors(item, schema["items"], f"{path}[{i}]", root)
        if "contains" in schema and not any(
            not errors(v, schema["contains"], path, root) for v in value
        ):
            out.append(f"{path}: no item matches {schema['contains']}")
        if schema.get("uniqueItems"):
            seen = [json.dumps(v, sort_keys=True) for v in value]
            if len(set(seen)) < len(seen):
                out.append(f"{path}: items are not unique")
    return out


META = load("job-meta")
DATA = load("job-data")
CLUSTER = load("cluster")
