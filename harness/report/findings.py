"""What a reviewer reads first: a verdict, a truth line, then one ranked line per distinct finding.

Works on the comparison document (plain, validated data: ``harness.report.schema``), so the job
that posts computes the findings itself. One finding is one cause: a ladder change of one axis
under one env (default, or an override set named in full), with the iterations, padding, host-to-
device bytes and compile counts it causes at the same configs. Ranked: wrong or lost, then
regressions in the default config, then override-only ones, then improvements, then changes with
no cost effect. Text here is plain; renderers escape it (it carries names from the document).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import median

from harness.analyze.tradeoff import (
    COSTS,
    GRAPH_FIGURES,
    KV_LADDERS,
    Change,
    change_over,
    distance_text,
)
from harness.config import BATCHED_DECODE, is_default_env
from harness.metrics import METRICS, format_value
from harness.metrics import ladder_text as ladder
from harness.registry import label_of
from harness.subjects.source.sources import PART_ORDER, changed_parts, short_path

#: Which ladder axis explains a cost change best, first.
AXIS_ORDER = ("batched_num_blocks", "kv", "num_blocks", "query", "batched_num_seqs", "num_seqs")
AXIS_LABEL = {"batched_num_blocks": "batched num_blocks", "batched_num_seqs": "batched num_seqs",
              "num_blocks": "num_blocks", "num_seqs": "num_seqs", "kv": "kv", "query": "query"}
#: The cost figures reported with a finding, in this order.
EFFECTS = ("iterations_per_layer_mean", "padded_slots_per_real_token", "h2d_bytes_per_step",
           "mask_bytes_per_step", "distinct_compile_keys")
#: The parts of the attention path (harness.subjects.source.sources) in words.
PART_LABEL = {"bucketer": "bucketer", "builder": "builder", "kernel": "kernels",
              "env": "env parsing", "other": "other modules"}
#: Per deployment config: compiled graphs the batched ladder implies.
COMPILES = "batched_num_blocks_distinct"
ICONS = {"failed": "❌", "wrong": "❌", "lost": "❌", "regression": "🔴", "trade-off": "⚖️",
         "improvement": "🟢", "change": "🟡", "acknowledged": "✅", "info": "ℹ️"}
#: Rank of each kind of finding (default config first, then under an override: one more).
ORDER = {"regression": 2, "trade-off": 4, "improvement": 6, "change": 8, "acknowledged": 9}


@dataclass
class Finding:
    kind: str           # failed, wrong, lost, regression, trade-off, improvement, change,
    #                     acknowledged, info
    text: str           # plain text; escape before putting it into markdown
    rank: tuple = ()
    #: The document's items (changes, effects, timings) it states: where and under which env
    #: its text says they are.
    items: list[dict] = field(default_factory=list)

    @property
    def icon(self) -> str:
        return ICONS[self.kind]


@dataclass
class _Group:
    axis: str
    envs: list[str]
    changes: list[dict]                       # ladder changes (doc items)
    effects: list[dict] = field(default_factory=list)


# -- small helpers -----------------------------------------------------------------------------

def config_key(params: dict) -> tuple:
    return (params.get("block_size"), params.get("max_model_len"), params.get("max_num_seqs"),
            params.get("overrides"), params.get("probe"), params.get("sliding_window"),
            params.get("preset"), params.get("spec_tokens"))


def _where(params: dict) -> tuple:
    """The config an item is at, whatever its env: sizes, kernel probe, window, model shape,
    speculative tokens."""
    key = config_key(params)
    return key[:3] + key[4:]


def env_name(params: dict):
    """The env an item was measured under: its override set's name, or its kernel probe's."""
    return params.get("overrides", params.get("probe"))


def _envs(doc: dict) -> dict[str, dict]:
    """Env name -> its variables in full: the override sets, then the kernel probes."""
    return {**doc["envs"], **{name: p["env"] for name, p in doc.get("probes", {}).items()}}


def is_default(doc: dict, overrides) -> bool:
    """No env override beyond the batched-decode switch (unknown sets count as overrides)."""
    env = _envs(doc).get(overrides)
    if env is None:
        return overrides in ("none", "batched", None)
    return is_default_env(env)


def env_text(doc: dict, names: list[str]) -> str:
    """``default config`` or the override set's variables in full (``SPYRE_ATTN_KV_BUCKETS=...``)."""
    if all(is_default(doc, n) for n in names):
        return "default config (no env override)"
    parts = []
    for n in names:
        env = _envs(doc).get(n)
        if env is None:
            parts.append(f"env {n}")
        else:
            parts.append(" ".join(f"{k}={v}" for k, v in sorted(env.items()) if k != BATCHED_DECODE)
                         or "default config")
    return " / ".join(dict.fromkeys(parts))


def factor(base, head) -> str:
    if base is None or head is None:
        return ""
    if base == 0:
        return "new" if head else ""
    return f"{head / base:.3g}×"


def change(base, head, unit: str) -> str:
    """``4 → 128``, with as many digits as it takes to show that two values differ."""
    a, b = format_value(base, unit), format_value(head, unit)
    if a == b and base != head and base is not None and head is not None:
        if unit == "bytes":
            a, b = f"{base:,.0f} B", f"{head:,.0f} B"
        for digits in (6, 9, 12, 17):
            if a != b:
                break
            a, b = f"{base:.{digits}g}", f"{head:.{digits}g}"
    return f"{a} → {b}"


def change_with_factor(base, head, unit: str) -> str:
    f = factor(base, head)
    return change(base, head, unit) + (f", {f}" if f else "")


def label(metric: str) -> str:
    return METRICS[metric].label if metric in METRICS else metric


def unit(metric: str) -> str:
    return METRICS[metric].unit if metric in METRICS else ""


def _padding_efficiency(metric: str, e: dict) -> str:
    """Beside padded slots per real token: the share of the kernel's K/V work that is real."""
    if metric != "padded_slots_per_real_token" or not (e["base"] and e["head"]):
        return ""
    return f" (padding efficiency {1 / e['base']:.1%} → {1 / e['head']:.1%})"


def _log_factor(e: dict) -> float:
    b, h = e["base"], e["head"]
    if b is None or h is None:
        return 0.0
    if b == 0 or h == 0:
        return math.inf if b != h else 0.0
    return abs(math.log(h / b))


def _place_text(doc: dict, params: dict) -> str:
    """Where a figure is, in full: its config (a kernel probe's spelled out) and its env."""
    where = _fields(doc, params, [k for k in params if k != "overrides"])
    env = env_text(doc, [env_name(params)])
    return f"{where}, {env}" if where else env


# -- grouping ----------------------------------------------------------------------------------

def _groups(doc: dict) -> list[_Group]:
    """Ladder changes by (axis, env); envs with identical changes merged; effects attached."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for ld in doc["ladders"]:
        env = env_name(ld["params"])
        by[(ld["axis"], "default" if is_default(doc, env) else env)].append(ld)
    merged: dict[tuple, _Group] = {}
    for (axis, _cls), items in by.items():
        shape = frozenset((ld["params"].get("block_size"), ld["params"].get("max_model_len"),
                           ld["params"].get("max_num_seqs"), tuple(ld["base"] or ()),
                           tuple(ld["head"] or ())) for ld in items)
        envs = list(dict.fromkeys(env_name(ld["params"]) for ld in items))
        if (axis, shape) in merged:
            merged[(axis, shape)].envs += envs
            merged[(axis, shape)].changes += items
        else:
            merged[(axis, shape)] = _Group(axis, envs, list(items))
    groups = list(merged.values())
    rank = {a: i for i, a in enumerate(AXIS_ORDER)}
    at: dict[tuple, _Group] = {}
    for g in sorted(groups, key=lambda g: rank.get(g.axis, 99), reverse=True):
        for ld in g.changes:
            at[config_key(ld["params"])] = g        # the best-ranked axis wins
    loose: dict[str, list[dict]] = defaultdict(list)
    for e in doc["exact_changed"]:
        g = at.get(config_key(e["params"]))
        if g is not None:
            g.effects.append(e)
        else:
            env = env_name(e["params"])
            loose["default" if is_default(doc, env) else str(env)].append(e)
    for cls, effects in loose.items():
        envs = list(dict.fromkeys(env_name(e["params"]) for e in effects))
        groups.append(_Group("", envs, [], effects))
    return groups


def ladder_change(g: _Group) -> Change:
    """What a group's ladder change did to compiled graphs (per config) and to the per-step
    costs (per config and workload), from every figure the comparison found changed."""
    graphs: dict[tuple, int] = defaultdict(int)
    ratios: dict[str, list[float]] = defaultdict(list)
    for e in g.effects:
        if e["base"] is None or e["head"] is None:
            continue
        if e["metric"] in GRAPH_FIGURES and "workload" not in e["params"]:
            graphs[config_key(e["params"])] += e["head"] - e["base"]
        elif e["metric"] in COSTS and e["base"]:
            ratios[e["metric"]].append(e["head"] / e["base"])
    return change_over(list(graphs.values()), dict(ratios))


def _kind(g: _Group) -> str:
    if g.changes and not all(i.get("acknowledged") for i in g.changes + g.effects):
        kind = ladder_change(g).kind     # a ladder change: what it bought for what
        if kind != "change":
            return kind
    worse = any(e["base"] is not None and e["head"] is not None and e["head"] > e["base"]
                for e in g.effects)
    better = any(e["base"] is not None and e["head"] is not None and e["head"] < e["base"]
                 for e in g.effects)
    items = g.changes + g.effects
    if items and all(i.get("acknowledged") for i in items):
        return "acknowledged"
    return "regression" if worse else "improvement" if better else "change"


_FULL = {"spec_tokens": "speculative tokens"}
_FIELDS = ("preset", "block_size", "max_model_len", "max_num_seqs", "spec_tokens", "probe")


def _fields(doc: dict, params: dict, names) -> str:
    """``block_size 64, max_model_len 2048``; a kernel probe with what it is, as the document
    says (``probe review-4x3-kv-above (block_size 64, max_model_len 2048, step 150,150,150,150)``)."""
    return ", ".join(_probe_text(doc, params[k]) if k == "probe"
                     else f"{_FULL.get(k, k)} {params[k]}"
                     for k in names if k in params)


def _probe_text(doc: dict, name) -> str:
    probe = doc.get("probes", {}).get(name)
    if probe is None:
        return f"probe {name}"
    what = [f"{k} {v}" for k, v in probe["config"].items()] + [f"step {probe['step']}"]
    if probe["per_sequence"]:
        what.append("per-sequence path")
    return f"probe {name} ({', '.join(what)})"


def _group_text(doc: dict, g: _Group, kind: str) -> str:
    default = all(is_default(doc, n) for n in g.envs)
    every = len(g.envs) > 1 and set(g.envs) >= set(doc["envs"]) and doc["envs"]
    where = ("every env compared" if every else env_text(doc, g.envs))
    items = g.changes + g.effects
    configs = {_where(x["params"]) for x in items}
    fixed = [k for k in _FIELDS if len({x["params"].get(k) for x in items}) == 1]
    varying = [k for k in _FIELDS if k not in fixed]
    what = {"regression": "regression", "trade-off": "trade-off", "improvement": "improvement",
            "change": "change", "acknowledged": "acknowledged change"}[kind]
    sample = items[0]["params"]
    at = _fields(doc, sample, fixed)
    at = f" at {at}" if at else ""
    head = (f"{what} in the {where}" if default and not every else f"{what} in {where}"
            if every else f"{what} under {where}") + at + f" × {len(configs)} configs"
    parts = []
    moved = ladder_change(g).text() if g.changes else ""
    if moved and kind in ("regression", "trade-off", "improvement"):
        parts.append(moved)
    workload_effects = [e for e in g.effects if e["params"].get("workload") is not None]
    if kind == "regression":   # its largest worse figure, a workload's first
        worse = [e for e in g.effects if (e["head"] or 0) > (e["base"] or 0)]
        pool = [e for e in worse if e in workload_effects] or worse
    else:
        pool = workload_effects
    worst = max(pool or g.effects, key=_log_factor, default=None)
    if g.changes:
        seen, shown = set(), []
        for ld in sorted(g.changes, key=lambda ld: _order(_where(ld["params"]))):
            key = _where(ld["params"])
            if key not in seen:
                seen.add(key)
                shown.append(f"{_fields(doc, ld['params'], varying)} "
                             f"{ladder(ld['base'])} → {ladder(ld['head'])}".strip())
        parts.append(f"{AXIS_LABEL.get(g.axis, g.axis)} ladder " + "; ".join(shown[:4])
                     + ("; …" if len(shown) > 4 else ""))
    else:
        parts.append("figures changed with no ladder change ("
                     + ", ".join(sorted({label(e["metric"]) for e in g.effects})) + ")")
    credit = _credit(doc, g)
    if credit:
        parts.append(credit)
    parts += _placed(doc, g, varying)
    if worst is not None:
        same = [e for e in g.effects if e["params"] == worst["params"]]
        effects = [f"{label(m)} {change_with_factor(e['base'], e['head'], unit(m))}"
                   + _padding_efficiency(m, e)
                   for m in EFFECTS for e in same if e["metric"] == m] or [
            f"{label(worst['metric'])} "
            f"{change_with_factor(worst['base'], worst['head'], unit(worst['metric']))}"]
        place = _fields(doc, worst["params"], varying + ["workload"])
        parts.append("largest: " + "; ".join(effects) + (f" ({place})" if place else ""))
    compiles = sorted((e for e in g.effects if e["metric"] == COMPILES),
                      key=lambda e: _order(_where(e["params"])))
    if compiles:
        per = list(dict.fromkeys(
            f"{_fields(doc, e['params'], varying) or 'each config'} {_fewer(e['base'], e['head'])}"
            for e in compiles))
        parts.append("compiled batched graphs per num_seqs bucket: " + "; ".join(per[:4])
                     + ("; …" if len(per) > 4 else ""))
    return f"{head}: " + ". ".join(parts) + _directions(g.effects)


def _placed(doc: dict, g: _Group, varying: list[str]) -> list[str]:
    """Each side's distance from the head's frontier, where the comparison placed the group's
    ladders (harness.analyze.frontier_compare): at one config per block size."""
    if g.axis not in KV_LADDERS or not g.effects:
        return []
    configs = {config_key(ld["params"]) for ld in g.changes}
    out = []
    for entry in doc.get("frontier", []):
        if config_key(entry["params"]) not in configs:
            continue
        at = _fields(doc, entry["params"], [k for k in varying if k in entry["params"]])
        where = f" at {at}" if at else ""
        if entry.get("skipped") or not entry.get("sides"):
            out.append(f"not placed on the head's frontier{where}: {entry.get('skipped')}")
            continue
        over = "every mix compared" if entry["workload"] == "every-mix" else \
            f"workload {entry['workload']}"
        sides = [distance_text(f"the {who}", s["ladder"], s["graphs"], s["excess_padding"],
                               s["best"]["ladder"], s["best"]["graphs"])
                 for who in ("base", "head") if (s := entry["sides"].get(who))]
        out.append(f"on the head's frontier{where} (its code, {over}): " + "; ".join(sides))
    return out


def _credit(doc: dict, g: _Group) -> str | None:
    """Whose code the group's effects can come from, when the sources say: a ladder change
    beside an edited builder or kernel is not the ladder's alone."""
    parts = code_changes(doc)
    if parts is None or not g.effects:
        return None
    others = [p for p in parts if p not in ("bucketer", "other")]
    if g.changes and others:
        return (_parts_text(parts, others) + " changed too: these effects are not the ladder's "
                "alone")
    if not g.changes and parts:
        return "code changed: " + _parts_text(parts, list(parts))
    return None


def _parts_text(parts: dict[str, list[str]], names: list[str]) -> str:
    return ", ".join(f"{PART_LABEL.get(p, p)} ({', '.join(map(short_path, parts[p][:3]))}"
                     + (", …" if len(parts[p]) > 3 else "") + ")" for p in names)


def code_changes(doc: dict) -> dict[str, list[str]] | None:
    """Part -> the attention-path modules whose content differs between base and head, or
    None when either side's sources are unknown (the embedded reference, older documents)."""
    base, head = doc["base"].get("sources"), doc["head"].get("sources")
    if base is None or head is None:
        return None
    return changed_parts(base, head)


def _code_finding(doc: dict) -> Finding | None:
    """Which part's code changed between base and head (by content hash), said once."""
    parts = code_changes(doc)
    if parts is None:
        return None
    if not parts:
        return Finding("info", "no attention-path module changed between base and head "
                               "(bucketer, builder, kernels and env parsing identical)")
    same = [PART_LABEL[p] for p in PART_ORDER if p not in parts]
    return Finding("info", "code changed between base and head: " + _parts_text(parts, list(parts))
                   + (f"; {', '.join(same)} unchanged" if same else ""))


def _order(key: tuple) -> tuple:
    return tuple((v is None, v if isinstance(v, (int, float)) else 0, str(v)) for v in key)


def _fewer(base, head) -> str:
    if base is None or head is None:
        return change(base, head, "")
    d = base - head
    return f"{base:g} → {head:g} ({d:g} fewer)" if d > 0 else f"{base:g} → {head:g} ({-d:g} more)"


def _directions(effects: list[dict]) -> str:
    worse = sum(1 for e in effects if e["base"] is not None and e["head"] is not None
                and e["head"] > e["base"])
    better = sum(1 for e in effects if e["base"] is not None and e["head"] is not None
                 and e["head"] < e["base"])
    if not (worse or better):
        return ""
    return f" ({worse} figures worse, {better} better)"


def _common_block_size(g: _Group):
    sizes = {x["params"].get("block_size") for x in g.changes}
    return next(iter(sizes)) if len(sizes) == 1 else None


def _unchanged_default(doc: dict) -> Finding | None:
    """Default configs whose batched num_blocks ladder did not move: 0 fewer compiles there."""
    moved = {config_key(x["params"]) for x in doc["ladders"] if x["axis"] == "batched_num_blocks"}
    moved |= {config_key(x["params"]) for x in doc["exact_changed"] if x["metric"] == COMPILES}
    default = [c for c in doc["configs"] if c.get("block_size") is not None
               and is_default(doc, c.get("overrides"))]
    if not default or not (doc["ladders"] or doc["exact_changed"]):
        return None
    touched = {c.get("block_size") for c in default if config_key(c) in moved}
    quiet = sorted({c.get("block_size") for c in default} - touched,
                   key=lambda v: (v is None, v))
    if not quiet:
        return None
    return Finding("info", "default config at block_size " + ", ".join(map(str, quiet))
                   + " (every max_model_len compared): batched num_blocks ladder identical, "
                     "so 0 fewer compiles there")


# -- the head's own failures -------------------------------------------------------------------

# "<subject> (commit c): subject raised X in Where() on step S | Q: message (file.py:12: source)"
# (harness.subjects.spyre.drive.session): one cause whatever the step, config or workload it met.
_RAISED = re.compile(r"subject raised (?P<exc>[\w.]+) in (?P<where>.+?)(?: on step [^:]*)?: "
                     r"(?P<rest>.*)$", re.S)
_AT = re.compile(r"\((?P<loc>[^()\s]+\.py:\d+)(?::[^()]*|\([^()]*\))*\)$")


def failure_cause(why: str) -> tuple[tuple, str] | None:
    """(key, text) of the failure a reason reports: the subject's own code raised (``build()``,
    ``forward()``, the cache update). Reasons that differ only in the step, config or workload
    that met it share the key; the text names the exception, where and the line it raised at."""
    m = _RAISED.search(why)
    if m is None:
        return None
    at = _AT.search(m["rest"])
    key = (m["exc"], m["where"], at["loc"] if at else m["rest"])
    return key, f"subject raised {m['exc']} in {m['where']}: {m['rest']}"


def _config_of(what: str) -> str:
    return re.sub(r", workload .*$", "", what)


def _failures(doc: dict) -> tuple[list[Finding], list[dict]]:
    """The head's failures, one finding per cause with the figures it made unavailable folded
    into it; and the lost items that are not failures."""
    causes: dict[tuple, tuple[str, list[str]]] = {}
    rest = []
    for item in doc["lost"]:
        found = failure_cause(item["why"])
        if found is None:
            rest.append(item)
            continue
        causes.setdefault(found[0], (found[1], []))[1].append(item["what"])
    out = []
    for i, (text, whats) in enumerate(sorted(causes.values(), key=lambda c: -len(c[1]))):
        configs = list(dict.fromkeys(_config_of(w) for w in whats))
        out.append(Finding("failed", f"the head failed: {text}. Unavailable because of it: "
                                     f"{len(whats):,} figures at {len(configs):,} configs "
                                     f"(e.g. {configs[0]})", (-1, i)))
    return out, rest


# -- the findings ------------------------------------------------------------------------------

def findings(doc: dict) -> list[Finding]:
    out, lost_items = _failures(doc)
    out += [Finding("wrong", f"wrong kernel: {m['what']}: {m['why']}", (0, i))
            for i, m in enumerate(doc["mismatches"])]
    lost: dict[str, list[str]] = defaultdict(list)
    for item in lost_items:
        lost[item["why"]].append(item["what"])
    for i, (why, whats) in enumerate(sorted(lost.items(), key=lambda kv: -len(kv[1]))):
        out.append(Finding("lost", f"lost: the base had it, the head does not: {why} "
                                   f"(e.g. {whats[0]}) × {len(whats)}", (1, i)))
    for g in _groups(doc):
        kind = _kind(g)
        default = all(is_default(doc, n) for n in g.envs)
        order = ORDER[kind]
        if kind in ("regression", "trade-off", "improvement") and not default:
            order += 1
        worst = max((_log_factor(e) for e in g.effects), default=0.0)
        out.append(Finding(kind, _group_text(doc, g, kind), (order, -worst, g.axis),
                           g.changes + g.effects))
    for t in doc["timings"]:
        v = t["verdict"]
        if v["kind"] not in ("regression", "improvement"):
            continue
        ci = v["ci"]
        ci_text = f"95% CI {ci[0]:.2f}–{ci[1]:.2f}×" if None not in ci else "no interval"
        p = f"p={v['p_value']:.2g}" if v["p_value"] is not None else ""
        advisory = " (advisory)" if doc["timing_advisory"] else ""
        slower = "slower" if v["kind"] == "regression" else "faster"
        medians = (f"{format_value(median(t['base']), 's')} → "
                   f"{format_value(median(t['head']), 's')}")
        named = label_of(t["benchmark"])
        place = _place_text(doc, t["params"])
        text = (f"timing {v['kind']}{advisory}: {named or t['benchmark']} at {place}: "
                f"{v['ratio']:.2f}× ({slower}; median {medians}; {ci_text}, {p})")
        out.append(Finding(v["kind"], text, (ORDER[v["kind"]], -abs(math.log(v["ratio"]))
                                             if v["ratio"] else 0, t["benchmark"]), [t]))
    out.sort(key=lambda f: f.rank)
    for info in (_unchanged_default(doc), _code_finding(doc), *_guard_findings(doc)):
        if info is not None:
            out.append(info)
    return out


def exact_regressions(doc: dict) -> int:
    """Causes (one finding each) whose exact figures only got worse: regressions, never a
    trade-off (what ``--fail-on regression`` counts beside timing regressions)."""
    return sum(_kind(g) == "regression" for g in _groups(doc))


def more_graphs(doc: dict) -> int:
    """Ladder changes after which some config compiles more graphs, trade-offs included (what
    ``--fail-on variants`` counts)."""
    return sum(ladder_change(g).graphs[1] > 0 for g in _groups(doc)
               if g.changes and _kind(g) != "acknowledged")


def _guard_findings(doc: dict) -> list[Finding]:
    """Each side's own compile guard beside spyre-bench's late compiles, in a line: where they
    disagree the finding, where they agree both figures (the second opinion was asked)."""
    return [Finding("info", f"{g['side']}'s compile guard ({g['level']}, {g['workload']}): "
                            + (g["finding"] or
                               f"agrees: it raised for {g['violations']} compile(s); "
                               f"spyre-bench counts {g['late_compiles']} late compile(s) and "
                               f"the exact model {g['model_late']} late key(s)"))
            for g in doc.get("guard", ())]


def headline(doc: dict, found: list[Finding]) -> str:
    """The verdict: the worst thing first, never green for what could not be checked, and what
    was not checked (the oracle, the timings) said in it."""
    text = _verdict(doc, found)
    unchecked = [what for what, missing in (("oracle not run", doc["oracle"] is None),
                                            ("timings not measured", not doc["timings_measured"]))
                 if missing and what not in text]
    return text + (" · " + ", ".join(unchecked) if unchecked else "")


def _verdict(doc: dict, found: list[Finding]) -> str:
    kinds = [f.kind for f in found]
    failed = next((f for f in found if f.kind == "failed"), None)
    if failed is not None:
        m = _RAISED.search(failed.text)
        return f"❌ the head failed: {m['exc']} in {m['where']}" if m else "❌ the head failed"
    if "wrong" in kinds:
        return "❌ wrong kernel: the oracle rejects an output"
    if "lost" in kinds:
        return "❌ lost: the head lacks figures the base had"
    if doc["problems"]:
        return "⚠️ not comparable"
    regressions = kinds.count("regression")
    improvements = kinds.count("improvement")
    changes = kinds.count("change")
    tradeoffs = kinds.count("trade-off")
    if regressions or tradeoffs or improvements or changes:
        parts = [f"{n} {w}{'s' if n != 1 else ''}" for n, w in
                 ((regressions, "regression"), (tradeoffs, "trade-off"),
                  (improvements, "improvement"), (changes, "other change")) if n]
        icon = "🔴" if regressions else "🟡"
        return f"{icon} " + ", ".join(parts)
    if "acknowledged" in kinds:
        return "✅ every change acknowledged"
    if not doc["exact_compared"] and not doc["timings"]:
        return "⚠️ nothing compared"
    if not doc["timings_measured"] or doc["oracle"] is None:
        return "⚪ exact figures unchanged; " + ("timings not measured" if not
                                                 doc["timings_measured"] else "oracle not run")
    unsure = sum(t["verdict"]["kind"] == "inconclusive" for t in doc["timings"])
    if unsure or doc["timing_advisory"]:
        return "⚪ no change found; " + (f"{unsure} timings inconclusive" if unsure
                                          else "timing verdicts advisory")
    return "🟢 no change"


def status(doc: dict) -> str:
    """The truth line: what was compared, what was not, whether the oracle and timings ran."""
    changed = len(doc["exact_changed"])
    parts = [f"exact: {changed:,} of {doc['exact_compared']:,} figures changed"
             + (f", {len(doc['ladders']):,} ladder entries" if doc["ladders"] else "")]
    not_compared = len(doc["skipped"]) + len(doc["lost"])
    parts.append(f"{not_compared:,} not compared")
    exp = doc.get("expected")
    if exp is not None:
        parts.append(f"{exp['unacknowledged']:,} unacknowledged, {exp['acknowledged']:,} "
                     "acknowledged" + (f" ({exp['stale']} stale)" if exp["stale"] else ""))
    oracle = doc["oracle"]
    if oracle is None:
        parts.append("oracle not run")
    else:
        parts.append(f"oracle: {oracle['matched']}/{oracle['checked']} probes match")
    if not doc["timings_measured"]:
        parts.append("timings not measured")
    else:
        kinds = defaultdict(int)
        for t in doc["timings"]:
            kinds[t["verdict"]["kind"]] += 1
        text = ", ".join(f"{n} {k if n == 1 or k != 'regression' else 'regressions'}"
                         if k != "improvement" or n == 1 else f"{n} improvements"
                         for k, n in kinds.items()) or "none paired"
        parts.append(f"timings: {text}" + (" (advisory)" if doc["timing_advisory"] else ""))
    return " · ".join(parts)
