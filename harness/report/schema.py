"""The comparison document's strict schema, and its validator (no third-party imports).

The document (``harness.analyze.comparison.as_document``) is written by a job that ran PR code, so the
privileged job that posts treats it as hostile data: every object has exactly the keys listed, every
string a bounded length (the names spyre-bench makes match a pattern), every list a bounded size,
numbers are finite and written in at most 40 characters, nesting is at most 16 deep, the whole at
most 64 MiB. A document that does not fit is refused whole, in one line naming the path of the first
offence. Validation decides shape only; what the strings say is still escaped when rendered.

Every document ``spyre-bench compare`` writes fits (tests/test_schema_compare.py generates env
overrides and configs and checks): text that comes from the command line or from the subject's own
code (override set names such as ``kv=128,8192+batched=1``, their values, trace file names, subject
labels, exception messages) is bounded only by the document's size.

The schema is JSON Schema vocabulary (type, properties, required, additionalProperties,
propertyNames, items, maxItems, minLength, maxLength, pattern, enum, minimum), interpreted here by a
small validator so the posting path needs no extra package; ``SCHEMA`` can be dumped for
documentation.
"""

from __future__ import annotations

import json
import math
import re

from harness.analyze.document import DOCUMENT_SCHEMA as SCHEMA_NAME
from harness.errors import HarnessError

#: Documents larger than this are refused before parsing.
MAX_BYTES = 64 << 20
#: Containers nested deeper than this are refused before parsing (the schema's own depth is 6).
MAX_DEPTH = 16
#: A number written with more characters than this is refused before parsing: every figure fits in
#: 20 digits, and a float as ``json.dumps`` writes it in 24 characters (400 digits overflowed).
MAX_NUMBER_CHARS = 40
_MANY = 500_000
#: Text that comes from a command line or from the subject's own code (an override set's name and
#: values, a workload's trace file name, a subject's label, an exception it raised): ``compare``
#: writes it whole, so it is bounded here only by what one document may hold. A single argument
#: is at most 128 KiB on Linux (MAX_ARG_STRLEN) and a command line 2 MiB; messages the subject
#: raises have no bound but the document's.
_LONG = MAX_BYTES
_TEXT = {"type": "string", "maxLength": _LONG}
_NAME = {"type": "string", "maxLength": 200, "pattern": r"[A-Za-z0-9_.:\-]+"}
_NUM = {"type": ["number", "null"]}
_SCALAR = {"type": ["integer", "number", "string", "boolean", "null"], "maxLength": _LONG}
_PARAMS = {"type": "object", "maxProperties": 16,
           "propertyNames": {"type": "string", "pattern": r"[a-z_][a-z0-9_]{0,40}"},
           "additionalProperties": _SCALAR}
_LADDER = {"type": ["array", "null"], "maxItems": 1 << 20, "items": {"type": "integer"}}
_SIDE = {"type": "object", "additionalProperties": False,
         "required": ["label", "commit", "machine", "device", "env_name", "harness"],
         "properties": {"label": _TEXT,
                        "commit": {"type": ["string", "null"], "pattern": r"[0-9a-f]{40}"},
                        **{k: {"type": ["string", "null"], "maxLength": _LONG}
                           for k in ("machine", "device", "env_name", "harness")},
                        # module path -> content hash (harness.subjects.source.sources)
                        "sources": {"type": ["object", "null"], "maxProperties": 1024,
                                    "propertyNames": {"type": "string", "maxLength": 300,
                                                      "pattern": r"[A-Za-z0-9_./\-]+"},
                                    "additionalProperties": {"type": "string",
                                                             "pattern": r"[0-9a-f]{1,64}"}}}}
_REASONED = {"type": "array", "maxItems": _MANY, "items": {
    "type": "object", "additionalProperties": False, "required": ["what", "why"],
    "properties": {"what": _TEXT, "why": _TEXT}}}
_SAMPLES = {"type": "array", "maxItems": 1 << 20, "items": {"type": "number"}}
#: One side's host profile (harness.measure.host_profile): names from the subject's own code.
_PROFILE = {
    "type": "object", "additionalProperties": False,
    "required": ["seconds", "passes", "functions"],
    "properties": {"seconds": _NUM, "passes": {"type": "integer", "minimum": 0},
                   "functions": {"type": "array", "maxItems": 100, "items": {
                       "type": "object", "additionalProperties": False,
                       "required": ["name", "where", "share"],
                       "properties": {"name": {"type": "string", "maxLength": 1000},
                                      "where": {"type": "string", "maxLength": 2000},
                                      "share": {"type": "number", "minimum": 0}}}}}}
#: Every env variable spyre-bench hands a subject (harness.config.ENV_VARS) is upper case.
_ENV_VAR = {"type": "string", "pattern": r"[A-Z][A-Z0-9_]{0,63}"}
_OPT_TEXT = {"type": ["string", "null"], "maxLength": 200}

_COUNT = {"type": "integer", "minimum": 0}
#: A ladder placed on the head's frontier (harness.analyze.frontier_place).
_PLACED = {"type": ["object", "null"], "additionalProperties": False,
           "required": ["ladder", "graphs", "iterations_per_layer_mean",
                        "padded_slots_per_real_token", "h2d_bytes_per_step", "excess_padding",
                        "best"],
           "properties": {"ladder": _LADDER, "graphs": _COUNT, "iterations_per_layer_mean": _NUM,
                          "padded_slots_per_real_token": _NUM, "h2d_bytes_per_step": _NUM,
                          "excess_padding": _NUM,
                          "best": {"type": "object", "additionalProperties": False,
                                   "required": ["ladder", "graphs",
                                                "padded_slots_per_real_token"],
                                   "properties": {"ladder": _LADDER, "graphs": _COUNT,
                                                  "padded_slots_per_real_token": _NUM}}}}
_FRONTIER = {"type": "array", "maxItems": 1000, "items": {
    "type": "object", "additionalProperties": False, "required": ["params", "axis", "workload"],
    "properties": {"params": _PARAMS, "axis": _NAME, "ladder": _NAME, "workload": _TEXT,
                   "sides": {"type": "object", "maxProperties": 3,
                             "propertyNames": {"enum": ["base", "head", "default"]},
                             "additionalProperties": _PLACED},
                   "skipped": _TEXT}}}

SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["schema", "base", "head", "factor", "alpha", "exact_compared", "exact_changed",
                 "ladders", "timings", "timings_measured", "timing_advisory", "timing_notes",
                 "oracle", "mismatches", "lost", "skipped", "problems", "configs", "envs"],
    "properties": {
        "schema": {"enum": [SCHEMA_NAME]},
        "base": _SIDE, "head": _SIDE,
        "factor": {"type": "number", "minimum": 1}, "alpha": {"type": "number", "minimum": 0},
        "exact_compared": {"type": "integer", "minimum": 0},
        "exact_changed": {"type": "array", "maxItems": _MANY, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["metric", "params", "base", "head"],
            "properties": {"metric": _NAME, "params": _PARAMS, "base": _NUM, "head": _NUM,
                           "acknowledged": {"type": "boolean"}}}},
        "ladders": {"type": "array", "maxItems": _MANY, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["params", "axis", "base", "head"],
            "properties": {"params": _PARAMS, "axis": _NAME, "base": _LADDER, "head": _LADDER,
                           "acknowledged": {"type": "boolean"}}}},
        "timings": {"type": "array", "maxItems": 10_000, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["benchmark", "params", "unit", "base", "head", "verdict"],
            "properties": {
                "benchmark": _NAME, "params": _PARAMS, "unit": _NAME,
                "base": _SAMPLES, "head": _SAMPLES,
                "verdict": {"type": "object", "additionalProperties": False,
                            "required": ["kind", "ratio", "ci", "p_value", "advice"],
                            "properties": {
                                "kind": {"enum": ["regression", "improvement", "no change",
                                                  "inconclusive"]},
                                "ratio": _NUM, "p_value": _NUM, "advice": _TEXT,
                                "ci": {"type": "array", "maxItems": 2, "minItems": 2,
                                       "items": _NUM},
                                # the adaptive sampler's (harness.measure.sampler)
                                "method": {"enum": ["paired"]},
                                "rounds": {"type": "integer", "minimum": 0},
                                "seconds": _NUM,
                                "stopped": {"enum": ["decided", "time bound", "round bound"]},
                                "decision_ci": {"type": ["array", "null"], "maxItems": 2,
                                                "minItems": 2, "items": _NUM}}},
                # host build() only: where each side's time went
                "profile": {"type": "object", "additionalProperties": False,
                            "required": ["base", "head"],
                            "properties": {"base": _PROFILE, "head": _PROFILE}}}}},
        "timings_measured": {"type": "boolean"}, "timing_advisory": {"type": "boolean"},
        "timing_notes": {"type": "array", "maxItems": 1000, "items": _TEXT},
        "oracle": {"type": ["object", "null"], "additionalProperties": False,
                   "required": ["matched", "checked"],
                   "properties": {"matched": {"type": "integer", "minimum": 0},
                                  "checked": {"type": "integer", "minimum": 0}}},
        "mismatches": _REASONED, "lost": _REASONED, "skipped": _REASONED,
        "problems": {"type": "array", "maxItems": 1000, "items": _TEXT},
        "configs": {"type": "array", "maxItems": _MANY, "items": _PARAMS},
        # knobs whose default (the commits' envs.py) differs; None: that side lacks the knob
        "knobs": {"type": "array", "maxItems": 1000, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["knob", "base", "head", "change"],
            "properties": {"knob": _ENV_VAR, "base": _OPT_TEXT, "head": _OPT_TEXT,
                           "change": {"enum": ["default", "added", "removed"]}}}},
        # each side's own compile guard beside spyre-bench's late compiles (harness.measure.guard)
        "guard": {"type": "array", "maxItems": 2, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["side", "workload", "level", "violations", "late_compiles",
                         "model_late", "agrees", "finding"],
            "properties": {"side": {"enum": ["base", "head"]}, "workload": _TEXT,
                           "level": _TEXT, "violations": {"type": "integer", "minimum": 0},
                           "late_compiles": {"type": "integer", "minimum": 0},
                           "model_late": {"type": "integer", "minimum": 0},
                           "agrees": {"type": "boolean"},
                           "finding": {"type": ["string", "null"], "maxLength": _LONG}}}},
        # what the commits' code warned while building a config's buckets and builder
        "notes": {"type": "array", "maxItems": _MANY, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["params", "base", "head"],
            "properties": {"params": _PARAMS,
                           "base": {"type": "array", "maxItems": 100, "items": _TEXT},
                           "head": {"type": "array", "maxItems": 100, "items": _TEXT}}}},
        # override set name (a named set, or the --env given, e.g. ``kv=128,8192+batched=1``) ->
        # its env in full
        "envs": {"type": "object", "maxProperties": _MANY,
                 "propertyNames": {"type": "string", "minLength": 1, "maxLength": _LONG},
                 "additionalProperties": {
                     "type": "object", "maxProperties": 64, "propertyNames": _ENV_VAR,
                     "additionalProperties": _TEXT}},
        # ladder changes placed on the head's frontier (absent from older documents)
        "frontier": _FRONTIER,
        # kernel probe name -> what it is: config, step, env in full (harness.measure.probe_set)
        "probes": {"type": "object", "maxProperties": 1000,
                   "propertyNames": {"type": "string", "minLength": 1, "maxLength": 200},
                   "additionalProperties": {
                       "type": "object", "additionalProperties": False,
                       "required": ["config", "step", "env", "per_sequence"],
                       "properties": {
                           "config": {"type": "object", "maxProperties": 16,
                                      "propertyNames": {"type": "string", "pattern": r"[a-z_]{1,40}"},
                                      "additionalProperties": {"type": "integer"}},
                           "step": _TEXT,
                           "env": {"type": "object", "maxProperties": 64,
                                   "propertyNames": _ENV_VAR, "additionalProperties": _TEXT},
                           "per_sequence": {"type": "boolean"}}}},
        "expected": {"type": "object", "additionalProperties": False,
                     "required": ["file", "acknowledged", "unacknowledged", "stale"],
                     "properties": {"file": _TEXT,
                                    **{k: {"type": "integer", "minimum": 0}
                                       for k in ("acknowledged", "unacknowledged", "stale")}}},
    },
}


class SchemaError(HarnessError):
    """The document does not fit the schema; nothing of it is used."""


def load_document(raw: bytes) -> dict:
    """Parse and validate a document (bytes from an artifact); SchemaError when it does not fit.

    Size, nesting depth and the length of every number are checked on the raw text before it is
    parsed, so a hostile file costs one linear scan and ends in one line, never a traceback
    (Python's parser recurses per level and converts a 5,000-digit number slowly, then refuses
    it; a 400-digit one overflows any float it meets later).
    """
    if len(raw) > MAX_BYTES:
        raise SchemaError(f"comparison document is {len(raw):,} bytes, over {MAX_BYTES:,}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"comparison document is not UTF-8 (byte {exc.start:,})") from None
    _check_shape(text)
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"comparison document is not JSON: {str(exc)[:200]}") from None
    validate(doc)
    return doc


# A JSON string (escapes included); what remains outside strings is structure and scalars.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NUMBER = re.compile(r"-?[0-9][0-9.eE+\-]*")


def _check_shape(text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH and numbers longer than MAX_NUMBER_CHARS."""
    skeleton = _STRING.sub('""', text)
    depth = deepest = 0
    for bracket in re.findall(r"[\[\]{}]", skeleton):
        depth += 1 if bracket in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                raise SchemaError(f"comparison document nests deeper than {MAX_DEPTH} levels")
    for number in _NUMBER.finditer(skeleton):
        if len(number.group()) > MAX_NUMBER_CHARS:
            raise SchemaError(f"comparison document has a number of {len(number.group()):,} "
                              f"characters (at most {MAX_NUMBER_CHARS})")


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def validate(doc, schema: dict = SCHEMA, path: str = "$") -> None:
    """Raise SchemaError naming the first place ``doc`` breaks ``schema``."""
    if "enum" in schema and doc not in schema["enum"]:
        _fail(path, f"must be one of {schema['enum']}")
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is(doc, t) for t in types):
            _fail(path, f"must be {' or '.join(types)}")
    if isinstance(doc, str):
        if len(doc) > schema.get("maxLength", 10_000):
            _fail(path, f"longer than {schema.get('maxLength', 10_000):,} characters")
        if len(doc) < schema.get("minLength", 0):
            _fail(path, f"shorter than {schema['minLength']} characters")
        if "pattern" in schema and not re.fullmatch(schema["pattern"], doc):
            _fail(path, "has characters its field does not allow")
        if _SURROGATE.search(doc):
            _fail(path, "is not Unicode text (a lone surrogate)")
    if isinstance(doc, (int, float)) and not isinstance(doc, bool):
        if "minimum" in schema and doc < schema["minimum"]:
            _fail(path, f"below {schema['minimum']}")
    if isinstance(doc, list):
        if len(doc) > schema.get("maxItems", 0) or len(doc) < schema.get("minItems", 0):
            _fail(path, "has the wrong number of items")
        for i, item in enumerate(doc):
            validate(item, schema.get("items", {}), f"{path}[{i}]")
    if isinstance(doc, dict):
        _validate_object(doc, schema, path)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _validate_object(doc: dict, schema: dict, path: str) -> None:
    if len(doc) > schema.get("maxProperties", 10_000):
        _fail(path, "has too many keys")
    for key in schema.get("required", []):
        if key not in doc:
            _fail(path, f"lacks {key!r}")
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    names = schema.get("propertyNames")
    for key, value in doc.items():
        if names:
            try:
                validate(key, names, f"{path}.<key>")
            except SchemaError:
                _fail(path, f"has a key its schema does not allow ({key[:40]!r})")
        if key in props:
            validate(value, props[key], f"{path}.{key}")
        elif extra is False:
            _fail(path, f"has an unknown key {key[:40]!r}")
        elif isinstance(extra, dict):
            validate(value, extra, f"{path}.{key}")


def _is(value, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":  # an int is finite, and may be too large for math.isfinite
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and math.isfinite(value))
    return isinstance(value, {"string": str, "array": list, "object": dict}[kind])


def _fail(path: str, what: str):
    raise SchemaError(f"comparison document: {path} {what}")
