"""ClusterCockpit's job-archive JSON formats, reduced to what a checker needs:
the required fields, their types, enums and bounds, as published in
cc-backend's pkg/schema/schemas (job-meta, job-data, job-metric-data,
job-metric-statistics, unit, cluster; JSON Schema 2020-12, MIT licence).
Written here from those facts (not a copy), with a validator for the
keywords they use, since jsonschema is not in the venv. A plain module:
test_ccarchive.py imports it."""

from __future__ import annotations

from typing import Any

UNIT = {
    "type": "object", "required": ["base_unit"],
    "properties": {
        "base_unit": {"type": "string", "enum": ["B", "F", "B/s", "F/s", "CPI", "IPC",
                                                 "cpu_used", "cpu_load", "Hz", "W"]},
        "prefix": {"type": "string", "enum": ["K", "M", "G", "T", "P", "E"]},
    },
}  # fmt: skip
STAT = {
    "type": "object", "required": ["unit", "avg", "min", "max"],
    "properties": {"unit": UNIT,
                   **{k: {"type": "number", "minimum": 0} for k in ("avg", "min", "max")}},
}  # fmt: skip
POSITIVE_INT = {"type": "integer", "exclusiveMinimum": 0}
META = {
    "type": "object",
    "required": ["jobId", "user", "project", "cluster", "subCluster", "numNodes", "exclusive",
                 "startTime", "jobState", "duration", "resources", "statistics"],
    "properties": {
        "jobId": {"type": "integer"}, "user": {"type": "string"}, "project": {"type": "string"},
        "cluster": {"type": "string"}, "subCluster": {"type": "string"},
        "numNodes": POSITIVE_INT, "exclusive": {"type": "integer", "minimum": 0, "maximum": 2},
        "jobState": {"type": "string", "enum": ["completed", "failed", "cancelled", "stopped",
                                                "out_of_memory", "node_fail", "timeout"]},
        "startTime": POSITIVE_INT, "duration": POSITIVE_INT,
        "resources": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["hostname"],
            "properties": {"hostname": {"type": "string"}}}},
        "metaData": {"type": "object", "properties": {"jobName": {"type": "string"}}},
        "tags": {"type": "array", "items": {
            "type": "object", "required": ["name", "type"],
            "properties": {"name": {"type": "string"}, "type": {"type": "string"}}}},
        "statistics": {
            "type": "object",
            "required": ["cpu_user", "cpu_load", "mem_used", "flops_any", "mem_bw"],
            "additionalProperties": STAT,
        },
    },
}  # fmt: skip
SERIES = {
    "type": "object", "required": ["hostname", "statistics", "data"],
    "properties": {
        "hostname": {"type": "string"},
        "statistics": {"type": "object", "required": ["avg", "min", "max"], "properties": {
            k: {"type": "number", "minimum": 0} for k in ("avg", "min", "max")}},
        "data": {"type": "array", "minItems": 1,
                 "items": {"type": ["number", "null"]},
                 "contains": {"type": "number", "minimum": 0}},
    },
}  # fmt: skip
METRIC_DATA = {
    "type": "object", "required": ["unit", "timestep", "series"],
    "properties": {"unit": UNIT, "timestep": {"type": "integer"},
                   "series": {"type": "array", "items": SERIES}},
}  # fmt: skip
# each metric: one or more scopes (node, socket, core, accelerator ...)
DATA = {
    "type": "object",
    "additionalProperties": {"type": "object", "minProperties": 1,
                             "additionalProperties": METRIC_DATA},
}  # fmt: skip
CLUSTER = {
    "type": "object", "required": ["name", "metricConfig", "subClusters"],
    "properties": {
        "name": {"type": "string"},
        "metricConfig": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["name", "unit", "scope", "timestep", "aggregation", "peak", "normal",
                         "caution", "alert"],
            "properties": {"unit": UNIT, "timestep": {"type": "integer"},
                           "aggregation": {"type": "string", "enum": ["sum", "avg"]},
                           **{k: {"type": "number"} for k in ("peak", "normal", "caution",
                                                               "alert")}}}},
        "subClusters": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["name", "nodes", "topology", "processorType", "socketsPerNode",
                         "coresPerSocket", "threadsPerCore", "flopRateScalar", "flopRateSimd",
                         "memoryBandwidth"],
            "properties": {
                "topology": {"type": "object", "required": ["node", "socket", "memoryDomain"]},
                **{k: {"type": "integer"} for k in ("socketsPerNode", "coresPerSocket",
                                                    "threadsPerCore")}}}},
    },
}  # fmt: skip

_TYPES: dict[str, Any] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
}  # fmt: skip


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def errors(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every violation of ``schema`` in ``value`` (empty: valid)."""
    out: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{path}: {type(value).__name__} is not {'/'.join(kinds)}"]
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
                out += errors(item, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += errors(item, schema["additionalProperties"], f"{path}.{key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: fewer than {schema['minItems']} items")
        for i, item in enumerate(value):
            if "items" in schema:
                out += errors(item, schema["items"], f"{path}[{i}]")
        if "contains" in schema and not any(not errors(v, schema["contains"]) for v in value):
            out.append(f"{path}: no item matches {schema['contains']}")
    return out
