"""A PR's kv ladder change placed on the head's frontier, for the comparison document.

Where the default config's kv-derived ladder changed, one config per block size stands for the
change (batched decode on, max_model_len nearest 2048: the review's): the base's ladder is
evaluated by the head's code through its kv override, beside the head's own, each with the best
ladder the optimiser finds for at most as many compiled graphs, on every mix compared
(:mod:`harness.analyze.frontier_place`). What the comment says of how far each side is from the
frontier comes from here; whether the change is an improvement, a regression or a trade-off
comes from every figure compared (:mod:`harness.report.findings`).
"""

from __future__ import annotations

from harness.analyze.comparison import Comparison
from harness.analyze.frontier import axis_of, shown_ladder
from harness.analyze.frontier_place import every_mix, place, refused
from harness.analyze.tradeoff import KV_LADDERS
from harness.config import is_default_env
from harness.errors import HarnessError
from harness.matrix import Case
from harness.subjects.base import Subject
from harness.subjects.timeout import SubjectTimeout
from harness.workloads import WorkloadSpec

#: Configs placed at most: each is a few evaluations of every mix by the head's code.
MOST = 4
#: The max_model_len the review reasoned at: a representative is the one nearest it.
NEAREST = 2048


def representatives(comparison: Comparison, cases: list[Case]) -> list[Case]:
    """One case per (block_size, max_num_seqs) whose default-config kv ladder changed."""
    changed = {_key(ld.params) for ld in comparison.ladders
               if ld.axis in KV_LADDERS and is_default_env(comparison.envs.get(
                   ld.params.get("overrides"), {}))}
    chosen: dict[tuple, Case] = {}
    for case in cases:
        key = _key(case.key())
        if key not in changed:
            continue
        group = (case.config.block_size, case.config.max_num_seqs)
        if group not in chosen or _rank(case) < _rank(chosen[group]):
            chosen[group] = case
    return list(chosen.values())[:MOST]


def _key(params: dict) -> tuple:
    return (params.get("block_size"), params.get("max_model_len"), params.get("max_num_seqs"),
            params.get("overrides"))


def _rank(case: Case) -> tuple:
    return (not case.overrides.batched_decode, abs(case.config.max_model_len - NEAREST),
            case.config.max_model_len)


def placements(base: Subject, head: Subject, comparison: Comparison, cases: list[Case],
               workloads: list[WorkloadSpec]) -> list[dict]:
    """The document's ``frontier`` entries: per representative config, the base's and the
    head's kv ladders on the head's code (or why that could not be done)."""
    requests, unplaced = [], []
    for case in representatives(comparison, cases):
        union = every_mix(workloads, case)
        if union is None:
            continue
        try:
            axis = axis_of(head, case, "kv")
            ladder = shown_ladder(base, case, axis)
        except SubjectTimeout:
            raise
        except HarnessError as exc:
            unplaced.append(refused(case, union, "kv", exc))
            continue
        requests.append((case, union, {"base": ladder, "head": None}))
    try:
        placed = place(head, requests, keep_errors=True)
    except SubjectTimeout:
        raise
    except HarnessError as exc:     # the head's code failed under a proposed ladder
        placed = [refused(case, union, "kv", exc) for case, union, _ in requests]
    return placed + unplaced
