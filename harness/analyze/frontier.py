"""Where a ladder sits between compiles and padding: the frontier of a subject's own code.

For a config, a workload and an axis an env override sets (kv, num_seqs, query), the optimiser
(:mod:`harness.analyze.frontier_opt`) proposes the best ladder of each size for each per-step
cost; every proposal, the config's own ladder and any ladder asked for (a PR's base's) are then
evaluated by the subject's own code through that env override (:mod:`harness.evaluate`, so the
figures memo and the worker apply): every point is an exact figure of that commit. A point is on
the frontier when no other point compiles no more graphs and costs no more on every per-step
cost while being better on one; a ladder's distance from the frontier is how much more it pads
than the best point with at most as many compiled graphs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.analyze.frontier_opt import (
    AXES,
    CostModel,
    best_ladders,
    blocks_of,
    check_workload,
    launches,
)
from harness.analyze.tradeoff import (
    COSTS,
    Change,
    change_between,
    compiled_graphs,
    distance_text,
    verdict_line,
)
from harness.errors import ConfigError, HarnessError
from harness.evaluate import config_figures, prefetch_ahead, workload_figures
from harness.matrix import Case
from harness.subjects.base import Subject
from harness.subjects.timeout import SubjectTimeout
from harness.workloads import WorkloadSpec, buildable

#: Per axis: the ladders its env override may move, the one dispatch reads first.
DISPATCH = {"kv": ("batched_num_blocks", "num_blocks"), "num_seqs": ("batched_num_seqs",),
            "query": ("query",)}
PADDING = "padded_slots_per_real_token"
#: Sizes proposed when none are asked: up to this many buckets, or twice the default's.
DEFAULT_MOST = 8


@dataclass
class Point:
    """One ladder evaluated by the subject's code."""

    ladder: tuple[int, ...]
    #: The env value that sets it (None: the config's own ladder, no override given).
    env: str | None
    graphs: int
    costs: dict[str, float]
    marks: list[str] = field(default_factory=list)
    dominated: bool = False

    def figure(self, name: str) -> float:
        return self.graphs if name == "graphs" else self.costs[name]

    def as_dict(self) -> dict:
        return {"ladder": list(self.ladder), "buckets": len(self.ladder), "env": self.env,
                "graphs": self.graphs, **self.costs, "marks": list(self.marks),
                "dominated": self.dominated}


@dataclass(frozen=True)
class Axis:
    """An axis as one subject's code takes it at one config."""

    name: str
    env: str
    #: The ladders its override moves there, and the one shown (what the workload dispatches).
    follows: tuple[str, ...]
    shown: str
    top: int

    def env_value(self, ladder, config) -> str:
        """The override that sets ``ladder`` (in the shown ladder's units: blocks for kv)."""
        if self.name == "kv":
            return ",".join(str(min(b * config.block_size, config.max_model_len)) for b in ladder)
        if self.name == "query":
            ladder = sorted({1, *ladder})
        return ",".join(map(str, ladder))


@dataclass
class Frontier:
    subject: str
    case: Case
    workload: str
    axis: Axis
    points: list[Point]
    notes: list[str] = field(default_factory=list)

    def marked(self, mark: str) -> Point | None:
        return next((p for p in self.points if mark in p.marks), None)

    def best_at(self, graphs: int, metric: str = PADDING) -> Point:
        """The point with the least ``metric`` among those compiling at most ``graphs``."""
        fits = [p for p in self.points if p.graphs <= graphs]
        return min(fits, key=lambda p: (p.costs[metric], p.graphs, len(p.ladder)))

    def excess(self, point: Point, metric: str = PADDING) -> float:
        """How much more ``metric`` the point has than the frontier at its graph count."""
        best = self.best_at(point.graphs, metric)
        return point.costs[metric] / best.costs[metric] - 1 if best.costs[metric] else 0.0

    def as_dict(self) -> dict:
        return {"subject": self.subject, "case": self.case.key(), "workload": self.workload,
                "axis": self.axis.name, "env": self.axis.env, "ladder": self.axis.shown,
                "points": [p.as_dict() for p in self.points], "notes": list(self.notes)}


# -- the axis ----------------------------------------------------------------------------------

def axis_of(subject: Subject, case: Case, name: str, default: dict | None = None) -> Axis:
    """How ``subject`` takes the axis at ``case``: which of its ladders the override moves
    (read from its own code: a probe ladder given and the ladders compared), or a ConfigError
    when none moves (no override for it there)."""
    if name not in AXES:
        raise ConfigError(f"unknown axis {name!r}; known: {', '.join(AXES)}")
    default = default or _figures(config_figures(subject, case), subject, case)
    c = case.config
    top = {"kv": blocks_of(c.max_model_len, c.block_size), "num_seqs": c.max_num_seqs,
           "query": c.max_num_batched_tokens}[name]
    probe_axis = Axis(name, AXES[name], DISPATCH[name], DISPATCH[name][0], top)
    current = default["ladders"].get(DISPATCH[name][-1]) or []
    probe = [top] if list(current) != [top] else [1, top]
    if probe == [1, 1]:     # one bucket is the only ladder there is: nothing to probe
        follows = DISPATCH[name]
    else:
        probed = _figures(config_figures(subject, with_value(case, probe_axis,
                                                        probe_axis.env_value(probe, c))),
                          subject, case)
        follows = tuple(a for a in DISPATCH[name]
                        if probed["ladders"].get(a) != default["ladders"].get(a))
    if not follows:
        raise ConfigError(f"{subject.spec} has no env override for the {name} axis at "
                          f"{case.label()}: {AXES[name]} does not move its "
                          f"{' or '.join(DISPATCH[name])} ladder")
    batched = case.overrides.batched_decode
    shown = next((a for a in follows if batched or not a.startswith("batched")), follows[-1])
    return Axis(name, AXES[name], follows, shown, top)


def _figures(figures: dict, subject: Subject, case: Case) -> dict:
    """Config figures, or the error they stand for: the subject's own failure (exit 1) or why
    it cannot give them (exit 2)."""
    if "skipped" in figures:
        raise (SubjectFailedHere if figures.get("failed") else HarnessError)(
            f"{subject.spec} at {case.label()}: {figures['skipped']}")
    return figures


def with_value(case: Case, axis: Axis, value: str) -> Case:
    """``case`` with the axis's env override set to ``value``."""
    return Case(case.config, case.overrides.with_env(**{axis.env: value}),
                f"{case.overrides_name}+{axis.name}={value}")


# -- evaluation --------------------------------------------------------------------------------

def _evaluate(subject: Subject, items: list[tuple[Case, WorkloadSpec, Axis | None, str | None]],
              per_step: bool = False) -> list[tuple[dict, dict]]:
    """(config figures, workload figures) of each (case, workload, axis, env value): the
    subject's own code under that override (the case's own ladder where the value is None)."""
    cases = [case if value is None else with_value(case, axis, value)
             for case, _, axis, value in items]
    prefetch_ahead([subject], [(case.config, case.overrides, buildable([spec], case.config))
                               for case, (_, spec, _, _) in zip(cases, items)])
    return [(config_figures(subject, case), workload_figures(subject, case, [spec],
                                                             per_step)[spec.name])
            for case, (_, spec, _, _) in zip(cases, items)]


def _point(figures: tuple[dict, dict], axis: Axis, value: str | None, marks) -> Point | str:
    """A point, or the reason its ladder could not be evaluated."""
    config, workload = figures
    for f in (config, workload):
        if "skipped" in f:
            return f["skipped"]
    return Point(tuple(config["ladders"][axis.shown] or ()), value, compiled_graphs(config),
                 {m: workload[m] for m in COSTS}, list(marks))


def _failed(figures: tuple[dict, dict]) -> bool:
    return any(f.get("failed") for f in figures)


@dataclass(frozen=True)
class Prepared:
    """What the optimiser needs of one (subject, config, workload, axis): the axis as the code
    takes it, the config's own figures, and the launches its own dispatch makes."""

    case: Case
    spec: WorkloadSpec
    axis: Axis
    default: dict
    launches: Counter
    model: CostModel

    def best(self, sizes: range):
        return best_ladders(self.launches, self.model, self.axis.top, sizes)

    def value(self, ladder) -> str:
        return self.axis.env_value(ladder, self.case.config)


def prepare(subject: Subject, requests: list[tuple[Case, WorkloadSpec]], axis_name: str,
            keep_errors: bool = False) -> list[Prepared | HarnessError]:
    """Each (config, workload) made ready for the optimiser: bad input (a workload without the
    sequences the axis pads, an axis the code has no override for) raises, or with
    ``keep_errors`` takes that request's place; the config's own per-step dispatch is evaluated
    for all requests at once."""
    ready: list = []
    for case, spec in requests:
        try:
            workload = spec.build(case.config)
            workload.check_fits(case.config)
            check_workload(workload, axis_name)
            default = _figures(config_figures(subject, case), subject, case)
            ready.append((case, spec, workload, default,
                          axis_of(subject, case, axis_name, default)))
        except SubjectTimeout:
            raise
        except HarnessError as exc:
            if not keep_errors:
                raise
            ready.append(exc)
    good = [r for r in ready if not isinstance(r, HarnessError)]
    evaluated = iter(_evaluate(subject, [(case, spec, None, None) for case, spec, *_ in good],
                               per_step=True))
    out: list = []
    for item in ready:
        if isinstance(item, HarnessError):
            out.append(item)
            continue
        try:
            out.append(_prepared(subject, *item, next(evaluated)[1], axis_name))
        except HarnessError as exc:
            if not keep_errors:
                raise
            out.append(exc)
    return out


def _prepared(subject, case, spec, workload, default, axis, rows, axis_name) -> Prepared:
    if "skipped" in rows:
        raise (SubjectFailedHere if rows.get("failed") else HarnessError)(
            f"{subject.spec} at {case.label()}, workload {spec.name}: {rows['skipped']}")
    found = launches(workload, rows["per_step"], case, axis, default["ladders"])
    if not found:
        raise ConfigError(f"{subject.spec}: {axis.env} moves only its "
                          f"{' and '.join(axis.follows)} ladder at {case.label()}, and no launch "
                          f"of {spec.name} dispatches on it")
    chunked = any(r.get("blocks_per_chunk") for r in rows["per_step"])
    return Prepared(case, spec, axis, default, found, CostModel(axis_name, case.config, chunked))


def evaluate_points(subject: Subject, batch: list[tuple[Prepared, dict[str | None, list[str]]]],
                    notes: list[str]) -> list[list[Point]]:
    """Per (prepared, {env value or None for the config's own ladder: names}), each value
    evaluated by the subject's code, one point per ladder it resolves (every name kept), all
    requests driven together; a ladder it skips is a note."""
    items = [(p.case, p.spec, p.axis, v) for p, wanted in batch for v in wanted]
    evaluated = iter(_evaluate(subject, items))
    out = []
    for prepared, wanted in batch:
        case, axis = prepared.case, prepared.axis
        points: dict[tuple, Point] = {}
        for value in wanted:
            figures = next(evaluated)
            if _failed(figures):
                raise SubjectFailedHere(
                    f"{subject.spec} at {case.label()} with {axis.env}={value}: "
                    f"{next(f['skipped'] for f in figures if f.get('failed'))}")
            point = _point(figures, axis, value, wanted[value])
            if isinstance(point, str):
                notes.append(f"{axis.env}={value}: skipped: {point}")
                continue
            same = points.get(point.ladder)
            if same is None:
                points[point.ladder] = point
            else:   # two overrides the subject resolves to one ladder: one point, every name
                same.marks += [m for m in point.marks if m not in same.marks]
                if point.env is None:
                    same.env = None
        out.append(sorted(points.values(), key=lambda p: (p.graphs, p.costs[PADDING])))
    return out


def frontier(subject: Subject, case: Case, spec: WorkloadSpec, axis_name: str,
             sizes: range | None = None, marked: dict[str, tuple] | None = None,
             default_mark: str = "default") -> Frontier:
    """The frontier of ``subject``'s code at ``case`` on ``spec`` along one axis: the config's
    own ladder (``default_mark``), the optimiser's best ladder of each size in ``sizes`` for
    each cost, and each ladder of ``marked`` (name -> ladder in the shown ladder's units)."""
    [prepared] = prepare(subject, [(case, spec)], axis_name)
    axis = prepared.axis
    useful = len({launch.x for launch in prepared.launches} | {axis.top})
    default_size = len(prepared.default["ladders"][axis.shown] or ())
    sizes = sizes or range(1, min(useful, max(DEFAULT_MOST, 2 * default_size)) + 1)
    notes = []
    if sizes.stop - 1 > useful:
        notes.append(f"sizes above {useful} add nothing for {spec.name}: every value it rounds "
                     "up is a bucket by then")
    wanted: dict[str | None, list[str]] = {None: [default_mark]}
    for k, proposals in prepared.best(sizes).items():
        for p in proposals:
            wanted.setdefault(prepared.value(p.ladder), []).append(f"best {k} for {p.objective}")
    for name, ladder in (marked or {}).items():
        wanted.setdefault(prepared.value(ladder), []).append(name)
    [out] = evaluate_points(subject, [(prepared, wanted)], notes)
    mark_dominated(out)
    return Frontier(subject.spec, case, spec.name, axis, out, notes)


class SubjectFailedHere(HarnessError):
    """The subject's own code raised while a ladder was evaluated: its failure (exit 1)."""

    exit_status = 1


def mark_dominated(points: list[Point]) -> None:
    """A point is dominated when another compiles no more graphs and costs no more on every
    per-step cost, and is better on one."""
    names = ["graphs", *COSTS]
    for p in points:
        p.dominated = any(
            all(q.figure(n) <= p.figure(n) for n in names)
            and any(q.figure(n) < p.figure(n) for n in names) for q in points if q is not p)


# -- a PR's two ladders on the head's frontier -------------------------------------------------

def shown_ladder(subject: Subject, case: Case, axis: Axis) -> tuple[int, ...]:
    """The ladder ``subject`` dispatches on along ``axis`` at ``case`` (its own, no override)."""
    figures = _figures(config_figures(subject, case), subject, case)
    return tuple(figures["ladders"].get(axis.shown) or ())


def pr_frontier(base: Subject, head: Subject, case: Case, spec: WorkloadSpec, axis_name: str,
                sizes: range | None = None) -> Frontier:
    """The head's frontier with the head's own ladder marked "head" and the base's ladder,
    evaluated by the head's code through the override, marked "base"."""
    axis = axis_of(head, case, axis_name)
    return frontier(head, case, spec, axis_name, sizes,
                    marked={"base": shown_ladder(base, case, axis)}, default_mark="head")


def summary(point: Point) -> dict:
    return {"graphs": point.graphs, **point.costs}


def distance(f: Frontier, point: Point, who: str) -> str:
    """``who``'s ladder against the frontier at its graph count, in words."""
    best = f.best_at(point.graphs)
    return distance_text(who, point.ladder, point.graphs, f.excess(point), best.ladder,
                         best.graphs)


def pr_verdict(f: Frontier) -> tuple[Change, str]:
    """The change from the base's ladder to the head's (both on the head's code), and the line
    that says it with each side's distance from the frontier."""
    b, h = f.marked("base"), f.marked("head")
    change = change_between(summary(b), summary(h))
    return change, verdict_line(change, [distance(f, b, "the base"),
                                         distance(f, h, "the head")])
