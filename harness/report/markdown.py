"""The PR comment (and nightly summary) as GitHub markdown, from a comparison document.

Renders only validated data (``harness.report.schema``): the job that posts calls this itself, so
nothing written where PR code ran reaches GitHub as markdown. Order is what a reviewer asks first:
the verdict, the truth line (what was compared, oracle, timings), one ranked line per finding
(``harness.report.findings``); every full table is folded below. An unchanged comparison is a few
lines. Every string from the document goes through ``escape`` or ``code``. The hidden marker is
not added here: the publisher adds it, in one place (``harness.report.marker.with_marker``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from statistics import median

from harness import __version__
from harness.analyze.comparison import added_removed_lines, default_lines
from harness.matrix import PARAM_SHORT
from harness.metrics import METRICS, format_value
from harness.registry import label_of
from harness.report.findings import (
    AXIS_ORDER,
    COMPILES,
    change,
    failure_cause,
    findings,
    headline,
    ladder,
    status,
)
from harness.report.fit import GITHUB_BODY_LIMIT, fit_body
from harness.report.markdown_escape import code, escape

#: Room left for the marker the publisher adds.
_MARKER_ROOM = 100
_CAP = 100


def _cells(values) -> str:
    return "| " + " | ".join(str(v) for v in values) + " |"


def _table(header, rows) -> list[str]:
    return [_cells(header), _cells(["---"] * len(header)), *(_cells(r) for r in rows)]


def _details(summary: str, lines: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>", ""]


def _at(params: dict) -> str:
    return escape(", ".join(f"{PARAM_SHORT.get(k, k)} {v}" for k, v in params.items()))


def _side(side: dict) -> str:
    commit = f" ({code(side['commit'][:12])})" if side.get("commit") else ""
    return f"{code(side['label'])}{commit}"


def _where(doc: dict) -> str:
    extra = []
    for what in ("machine", "device", "env_name"):
        b, h = doc["base"].get(what), doc["head"].get(what)
        if b or h:
            extra.append(f"{what.replace('_', ' ')} {escape(b or '-')}"
                         + ("" if b == h else f" / {escape(h or '-')}"))
    return f"base {_side(doc['base'])} → head {_side(doc['head'])}" + (
        " · " + " · ".join(extra) if extra else "")


def _ladder_table(doc: dict) -> list[str]:
    """Every ladder change; the same change under several envs is one row naming them all."""
    if not doc["ladders"]:
        return []
    rank = {a: i for i, a in enumerate(AXIS_ORDER)}
    rows: dict[tuple, list] = {}
    for ld in doc["ladders"]:
        where = {k: v for k, v in ld["params"].items() if k != "overrides"}
        key = (ld["axis"], str(ld["base"]), str(ld["head"]), str(sorted(where.items())))
        rows.setdefault(key, [ld, []])[1].append(str(ld["params"].get("overrides")))
    items = sorted(rows.values(), key=lambda r: (rank.get(r[0]["axis"], 99), r[1],
                                                 r[0]["params"].get("block_size") or 0,
                                                 r[0]["params"].get("max_model_len") or 0))
    said = _said_by_config(doc)
    table = [[escape(ld["axis"]), f"{ladder(ld['base'])} → {ladder(ld['head'])}",
              _at({k: v for k, v in ld["params"].items() if k != "overrides"})
              + " \\| env " + escape(", ".join(envs))]
             + ([_said_cell(said, ld["params"], envs)] if said else [])
             for ld, envs in items[:_CAP]]
    more = [f"… and {len(items) - _CAP} more (`--json`)"] if len(items) > _CAP else []
    return _details(f"ladder changes: {len(doc['ladders'])} (axis × config × env) in "
                    f"{len(items)} rows", _table(["axis", "before → after", "at"]
                                                 + ["the code said"] * bool(said), table) + more)


def _said_by_config(doc: dict) -> dict[tuple, tuple[list, list]]:
    """What the code warned per config (its params as a key): (base's, head's)."""
    return {tuple(sorted(n["params"].items())): (n["base"], n["head"])
            for n in doc.get("notes", ())}


def _said_text(base: list, head: list) -> str:
    if base == head:
        return escape(" · ".join(head))
    return (f"base: {escape(' · '.join(base) or '-')}; "
            f"head: {escape(' · '.join(head) or '-')}")


def _said_cell(said: dict, params: dict, envs: list[str]) -> str:
    """The warnings of the configs a ladder row stands for (its envs), once each: one every env
    said plainly, one only some said after the envs that said it (a row stands for them all)."""
    by_warning: dict[str, list[str]] = {}
    for env in envs:
        key = tuple(sorted({**params, "overrides": env}.items()))
        base, head = said.get(key, ((), ()))
        for warning in dict.fromkeys([*base, *head]):
            side = "" if warning in base and warning in head else (
                "base: " if warning in base else "head: ")
            by_warning.setdefault(side + warning, []).append(env)
    return " · ".join(escape(warning if len(who) == len(envs) else f"{', '.join(who)}: {warning}")
                      for warning, who in by_warning.items()) or "-"


def _said_table(doc: dict) -> list[str]:
    """Every config where the head's code warned otherwise than the base's while building its
    buckets and builder, once each (warnings both said stand beside the ladders they concern)."""
    notes = [n for n in doc.get("notes") or [] if n["base"] != n["head"]]
    if not notes:
        return []
    rows = [[_at(n["params"]), _said_text(n["base"], n["head"])] for n in notes[:_CAP]]
    more = [f"… and {len(notes) - _CAP} more (`--json`)"] if len(notes) > _CAP else []
    return _details(f"what the code said differently: warnings at {len(notes)} configs",
                    _table(["at", "warnings"], rows) + more)


def _knob_lines(doc: dict) -> list[str]:
    """Knob defaults that differ: each side is measured on its own default (said first)."""
    lines = [f"- ⚙️ {escape(line)}" for line in default_lines(doc.get("knobs", []))]
    return lines + [""] if lines else []


def _knob_sets(doc: dict) -> list[str]:
    """The knobs the head's envs.py added or removed (folded)."""
    lines = added_removed_lines(doc.get("knobs", []))
    if not lines:
        return []
    return _details(f"knobs added or removed: {sum(k['change'] != 'default' for k in doc['knobs'])}",
                    [f"- {escape(line)}" for line in lines])


def _frontier_table(doc: dict) -> list[str]:
    """Each placed ladder against the best with at most as many compiled graphs (the head's
    code, every mix compared): the figures the findings' frontier sentences come from."""
    rows = []
    for entry in doc.get("frontier", []):
        for who, side in (entry.get("sides") or {}).items():
            if side is None:
                continue
            rows.append([_at(entry["params"]), escape(who), ladder(side["ladder"]),
                         side["graphs"], format_value(side["padded_slots_per_real_token"],
                                                      "slots/token"),
                         f"{100 * side['excess_padding']:.3g} %", ladder(side["best"]["ladder"]),
                         side["best"]["graphs"]])
    if not rows:
        return []
    return _details("ladders on the head's frontier (its code, every mix compared)",
                    _table(["config", "side", "ladder", "graphs", "padded/real",
                            "pads more than best", "best with at most as many graphs",
                            "its graphs"], rows))


def _compile_table(doc: dict) -> list[str]:
    """Compiled batched graphs per deployment config (never summed across configs)."""
    rows = [[_at(e["params"]), _fewer_cell(e["base"], e["head"])]
            for e in doc["exact_changed"] if e["metric"] == COMPILES]
    if not rows:
        return []
    return _details(f"compiles per deployment config: {len(rows)} configs changed "
                    f"({escape(METRICS[COMPILES].description)})",
                    _table(["config", "base → head"], rows[:_CAP]))


def _fewer_cell(b, h) -> str:
    if b is None or h is None:
        return change(b, h, "")
    return f"{b:g} → {h:g} ({b - h:g} fewer)" if h < b else f"{b:g} → {h:g} ({h - b:g} more)"


def _exact_table(doc: dict) -> list[str]:
    if not doc["exact_changed"]:
        return []
    rows = []
    for e in doc["exact_changed"][:_CAP]:
        unit = METRICS[e["metric"]].unit if e["metric"] in METRICS else ""
        name = METRICS[e["metric"]].label if e["metric"] in METRICS else e["metric"]
        direction = ("worse" if e["head"] is not None and e["base"] is not None
                     and e["head"] > e["base"] else "better")
        rows.append([escape(name), _at(e["params"]), escape(change(e["base"], e["head"], unit)),
                     direction + (" ✅" if e.get("acknowledged") else "")])
    more = ([f"… and {len(doc['exact_changed']) - _CAP} more: the full comparison (`--json`) "
             "is in the run's artifacts."] if len(doc["exact_changed"]) > _CAP else [])
    return _details(f"changed exact figures: {len(doc['exact_changed'])} of "
                    f"{doc['exact_compared']}",
                    _table(["figure", "at", "base → head", ""], rows) + more)


def _timing_table(doc: dict) -> list[str]:
    if not doc["timings"]:
        return []
    rows = []
    for t in sorted(doc["timings"], key=lambda t: (t["verdict"]["kind"] != "regression",
                                                   t["benchmark"])):
        v = t["verdict"]
        ci = v["ci"]
        ratio = (f"{v['ratio']:.2f}×" if v["ratio"] is not None else "-") + (
            f" ({ci[0]:.2f}–{ci[1]:.2f})" if None not in ci else "")
        rows.append([escape(t["benchmark"]), _at(t["params"]),
                     format_value(median(t["base"]), "s") if t["base"] else "-",
                     format_value(median(t["head"]), "s") if t["head"] else "-", ratio,
                     f"{v['p_value']:.2g}" if v["p_value"] is not None else "-",
                     escape(v["kind"] + (f": {v['advice']}" if v["advice"] else ""))])
    rule = (f"ratio head/base (Hodges–Lehmann over paired ABBA rounds) with 95% interval; a "
            f"change needs the interval, corrected for the sampler's looks, past "
            f"√{doc['factor']:g}×" if any(t["verdict"].get("method") == "paired"
                                          for t in doc["timings"]) else
            f"median ratio head/base with 95% interval; a change needs the ratio past "
            f"{doc['factor']:g}× and Mann–Whitney p < {doc['alpha']:g}")
    return _details(f"timings: {rule}",
                    _table(["benchmark", "params", "base", "head", "ratio", "p", "verdict"],
                           rows))


def _host_profiles(doc: dict) -> list[str]:
    """For each host timing that regressed, where the head's time goes (the commit's own
    functions by self time, harness.measure.host_profile), next to the base's shares."""
    out = []
    for t in doc["timings"]:
        profile = t.get("profile")
        if t["verdict"]["kind"] != "regression" or not profile:
            continue
        base = {(f["name"], f["where"].rsplit(":", 1)[0]): f["share"]
                for f in profile["base"]["functions"]}
        head = profile["head"]["functions"]
        rows = [[code(f["name"]), escape(f["where"]),
                 _share(base.get((f["name"], f["where"].rsplit(":", 1)[0]))), _share(f["share"])]
                for f in head]
        top = ", ".join(f"{code(f['name'])} {_share(f['share'])}" for f in head[:3])
        what = label_of(t["benchmark"]) or t["benchmark"]
        out += _details(f"where the head's time goes, {escape(what)}, {_at(t['params'])}: "
                        f"{top or 'no function of its own'}",
                        _table(["function", "where", "base", "head"], rows) +
                        ["", "share of one pass over the workload's steps, profiled apart from the "
                         "timed samples: each function's own lines and what it calls outside the "
                         "commit's code"])
    return out


def _share(share) -> str:
    return "-" if share is None else f"{share * 100:.0f} %"


def _not_compared(doc: dict) -> list[str]:
    items = [("lost", x) for x in doc["lost"]] + [("skipped", x) for x in doc["skipped"]]
    if not items:
        return []
    by_reason: dict[tuple, list[str]] = defaultdict(list)
    said: dict[tuple, str] = {}
    for kind, x in items:   # a failure met at many steps is one reason
        found = failure_cause(x["why"])
        key = (kind, found[0] if found else x["why"])
        said.setdefault(key, found[1] if found else x["why"])
        by_reason[key].append(x["what"])
    lines = [f"- {key[0]}: {escape(said[key])} × {len(whats)} (e.g. {escape(whats[0])})"
             for key, whats in by_reason.items()]
    return _details(f"{len(items)} figures not compared", lines[:_CAP])


#: The acknowledge lines are listed when they fit in this many characters; else the command.
ACK_LISTED = 24_000


def _fenced(lines: list[str], info: str = "") -> list[str]:
    """A fenced code block that no backtick run inside it can close (its text is literal)."""
    body = ["".join(" " if ord(c) < 32 or c in _BIDI_OR_BREAK else c for c in line)
            for line in lines]
    longest = max((len(run) for line in body for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *body, fence]


_BIDI_OR_BREAK = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                     "\x85\u2028\u2029\x7f")


def acknowledge_lines(doc: dict) -> list[str]:
    """The expected-changes lines that acknowledge this comparison's unacknowledged changes:
    what to add to the expected-changes file (``compare --expected``) for the check to pass on
    exactly these values."""
    from harness.analyze.expected import replacement
    pending = {"exact_changed": [e for e in doc["exact_changed"] if not e.get("acknowledged")],
               "ladders": [ld for ld in doc["ladders"] if not ld.get("acknowledged")]}
    return [x.translate(_INERT_JSON) for x in replacement(pending).splitlines()
            if x and not x.startswith("#")]


# Characters GitHub or markdown could act on, written as the JSON escapes they equal (they occur
# only inside JSON strings, where ``json.loads`` reads them back unchanged): in the code block no
# backtick can close it, and no mention, reference or tag appears even as text.
_INERT_JSON = {ord(c): f"\\u{ord(c):04x}" for c in "@#<>&`"}


def _config_flags(doc: dict) -> str | None:
    """The compare flags that give the configs of ``doc``: a tier, with ``--env`` when one env
    override set of its own replaced the tier's sets; None when no tier gives them."""
    from harness.matrix import OVERRIDE_SETS, TIERS, tier_cases
    configs = doc["configs"]
    fields = ("block_size", "max_model_len", "max_num_seqs")
    shape = [tuple(c.get(k) for k in fields) for c in configs]
    names = list(dict.fromkeys(c.get("overrides") for c in configs))
    for tier, t in TIERS.items():
        cases = tier_cases(tier)
        if sorted(set(shape)) != sorted({tuple(c.key()[k] for k in fields) for c in cases}):
            continue
        if names == list(t.override_sets) and len(shape) == len(cases):
            return f"--tier {tier}"
        if (len(names) == 1 and names[0] not in OVERRIDE_SETS and names[0] in doc["envs"]
                and len(shape) == len(set(shape))):
            env = doc["envs"][names[0]]
            return f"--tier {tier}" + "".join(f" --env {k}={v}" for k, v in sorted(env.items()))
    return None


def _acknowledge(doc: dict) -> list[str]:
    """How to acknowledge the changes found: the lines to add, or the command that writes them."""
    from harness.analyze.expected import DEFAULT_PATH
    lines = acknowledge_lines(doc)
    if not lines:
        return []
    n = len(lines)
    intro = (f"**To acknowledge {'this change' if n == 1 else f'these {n:,} changes'}** (if the "
             f"PR means them), add {'this line' if n == 1 else 'these lines'} to `{DEFAULT_PATH}`; "
             "the check then passes on exactly these values and still fails on any other change:")
    if sum(len(x) + 1 for x in lines) <= ACK_LISTED:
        return [intro, "", *_details(f"{n:,} {'line' if n == 1 else 'lines'} for "
                                     f"{DEFAULT_PATH}", _fenced(lines, "jsonl"))]
    sides = [f"git:<spyre-inference>@{doc[s]['commit']}" if doc[s]["commit"] else doc[s]["label"]
             for s in ("base", "head")]
    flags = _config_flags(doc) or "<the check's config flags>"
    command = (f"spyre-bench compare --base {sides[0]} --head {sides[1]} {flags} "
               f"--write-expected {DEFAULT_PATH}")
    return [f"**To acknowledge these {n:,} changes** (if the PR means them), too many to list "
            f"here: commit `expected-changes.jsonl` from the run's artifacts as `{DEFAULT_PATH}`, "
            "or write it with:", "", *_fenced([command], "sh"), ""]


def render(doc: dict, harness_commit: str | None = None,
           limit: int = GITHUB_BODY_LIMIT - _MARKER_ROOM, artifact_hint: str | None = None) -> str:
    """The comment body for a validated comparison document (no marker: the publisher adds it).

    It ends with how to acknowledge the changes found (the expected-changes lines), kept whole
    when the rest is cut to fit."""
    found = findings(doc)
    lines = [f"### spyre-bench: {escape(headline(doc, found))}", "",
             f"**{escape(status(doc))}**", "", _where(doc), "", *_knob_lines(doc)]
    numbered = [f for f in found if f.kind != "info"]
    for i, f in enumerate(numbered, 1):
        lines.append(f"{i}. {f.icon} {escape(f.text)}")
    lines += [f"- {f.icon} {escape(f.text)}" for f in found if f.kind == "info"]
    if found:
        lines.append("")
    notes = list(doc["problems"]) + (doc["timing_notes"] if doc["timing_advisory"] else [])
    if notes:
        lines += ["> [!WARNING]", *(f"> {escape(n)}" for n in notes), ""]
    lines += (_ladder_table(doc) + _said_table(doc) + _knob_sets(doc) + _frontier_table(doc)
              + _compile_table(doc) + _exact_table(doc) + _timing_table(doc) + _host_profiles(doc)
              + _not_compared(doc))
    if not doc["timing_advisory"] and doc["timing_notes"]:
        lines += [escape("; ".join(doc["timing_notes"])), ""]
    lines += [f"<sub>spyre-bench {escape(__version__)}"
              + (f" ({code(harness_commit[:12])})" if harness_commit else "")
              + " · every figure is lower-is-better · exact figures compared exactly</sub>", ""]
    pointer = artifact_hint or ("The comment was cut to fit GitHub's size limit; the full "
                                "comparison is in the run's artifacts.")
    ack = "\n".join(_acknowledge(doc))
    body = fit_body("\n".join(lines), limit=limit - len(ack) - 1, pointer_text=pointer)
    return body + ("\n" + ack if ack else "")


_ERROR_PREFIX = "spyre-bench: error: "
_ERROR_CHARS = 4000


def render_failure(error: str, head_sha: str | None = None, run_url: str | None = None) -> str:
    """The comment when compare stopped before comparing (a subject that does not load): the
    failure first, where and what (its error line, escaped), and what it made unavailable in one
    line. ``head_sha`` (the PR head the run measured) says whether the head is the one named."""
    lines = [x.strip() for x in error.splitlines() if x.strip()]
    text = next((x for x in reversed(lines) if x.startswith(_ERROR_PREFIX)), lines[-1] if lines
                else "no error line")
    text = text.removeprefix(_ERROR_PREFIX)
    if len(text) > _ERROR_CHARS:
        text = text[:_ERROR_CHARS] + " …"
    head = bool(head_sha) and len(head_sha) >= 12 and head_sha[:12] in text
    imports = "failed to import" in text
    who = "the head" if head else "a subject" if imports else "spyre-bench compare"
    what = "failed to import" if imports else "failed"
    out = [f"### spyre-bench: ❌ {who} {what}: nothing compared", "",
           "**every exact figure, the oracle and the timings are unavailable: compare stopped at "
           "this error before comparing anything**", "",
           f"1. ❌ {escape(text)}", ""]
    if run_url:
        out += [f"The run's log: {run_url}", ""]
    out += [f"<sub>spyre-bench {escape(__version__)} · fix the failure and push: the next run "
            "compares</sub>", ""]
    return "\n".join(out)
