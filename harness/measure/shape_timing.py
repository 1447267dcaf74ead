"""A workload timed by step shape, whoever runs its kernels (the harness's reference kernels,
:mod:`harness.measure.kernel_figures`, or a commit's own forward, :mod:`harness.measure.forward`):
what a shape is, its name in a row, and the workload's figures from its shapes' timings."""

from __future__ import annotations

from collections import Counter

from harness.measure.settings import KernelOptions


def shape_of(keys) -> tuple:
    """A step's shape: its batched key and its per-sequence keys (order-free)."""
    batched = next((k for k in keys if k.kernel != "attn"), None)
    return batched, tuple(sorted(k for k in keys if k.kernel == "attn"))


def shape_label(shape: tuple) -> str:
    """A shape as rows name it: its batched key and each per-sequence key, with counts."""
    batched, seqs = shape
    parts = [str(batched)] if batched else []
    for key, n in sorted(Counter(seqs).items()):
        parts.append(f"{n}x{key}" if n > 1 else str(key))
    return " + ".join(parts)


def sampling(samples) -> dict:
    """How many samples a row asked for and why it has the ones it has (a time budget)."""
    return {"samples_asked": samples.repeat, "sampling_stopped": samples.stopped}


def budget_record(options: KernelOptions, left_out: int) -> dict:
    """The workload's time budget and the step shapes it left untimed (--max-shapes' are not
    counted here: timed_shapes and distinct_shapes say those)."""
    return {"time_budget_s": options.time_budget_s, "shapes_left_by_budget": left_out}


def workload_timing(rows: list[dict], workload, shapes: dict, timed: list, times: dict,
                    num_layers: int) -> dict:
    """A workload's timing from its timed shapes, each weighted by the steps that land on it."""
    timed = [sh for sh in timed if sh in times]
    covered = [i for sh in timed for i in shapes[sh]]
    tokens = sum(1 for i in covered for s in workload.steps[i] if s.is_decode)
    layer_us = sum(times[sh] * len(shapes[sh]) for sh in timed)
    return {
        "shapes": rows, "distinct_shapes": len(shapes), "timed_shapes": len(timed),
        "steps": len(workload.steps), "steps_timed": len(covered), "decode_tokens": tokens,
        # per decode token and layer, like a shape's us_per_token; tokens/s over whole steps
        "workload_us_per_token": layer_us / tokens if tokens else None,
        "workload_tokens_per_s": (tokens / (layer_us * num_layers * 1e-6)
                                  if tokens and layer_us else None),
    }
