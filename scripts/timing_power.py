"""How often does the PR timing verdict catch a planted slowdown, and cry wolf on A/A?

    python scripts/timing_power.py                      # 2-core box defaults
    python scripts/timing_power.py --runs 20 --aa-runs 100 --device cuda

For each condition (A/A, then head slowed 1.10x, 1.25x, 2x) and probe, the script prepares the
probe twice (base and head, each checked against the oracle, and again for every ABBA quad, as
``compare --timings`` does) and lets the adaptive sampler (harness.measure.sampler) decide,
``--runs`` times (``--aa-runs`` for A/A). The slowdown is real work: the head's every sample runs
``k`` times as many kernel calls as the base's and reports the time per base call (calls per
sample are rounded to a multiple that makes k exact: 10 for 1.10, 4 for 1.25). It prints one row
per condition and probe: verdicts, detection rate (regression at k > 1) or false-alarm rate
(regression or improvement at A/A), rounds and seconds per verdict, the median spread of the
samples, and then the seconds one PR verdict (every probe of the tier, preparation included) took
for A/A and for 1.25x.

Targets on the 2-core CI box (issue 24): >= 95% detection at 1.25x, >= 80% at 1.10x, <= 1 false
regression in 100 A/A, <= 3 min per PR verdict.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SLOWDOWNS = (1.10, 1.25, 2.0)


def multiple_for(k: float) -> int:
    """The fewest calls per sample m for which m * k is a whole number of calls (1.1: 10)."""
    return next(m for m in range(1, 101) if abs(m * k - round(m * k)) < 1e-9)


class Planted:
    """A prepared side whose every sample does ``k`` times the kernel calls of the base's (both
    sides of a pair round their calls per sample to the same multiple)."""

    def __init__(self, side, k: float, multiple: int):
        self.side, self.k, self.multiple = side, k, multiple

    def calls_per_sample(self, min_sample_s: float) -> int:
        n = self.side.calls_per_sample(min_sample_s)
        return self.multiple * math.ceil(n / self.multiple)

    def sample(self, number: int) -> float:
        calls = round(number * self.k)
        return self.side.sample(calls) * calls / number


def _prepare(probe, subject, dev):
    from harness.measure import probes
    return probes.prepare(probe, subject, dev)


def one_verdict(probe, subject, dev, k: float, plan, flush):
    """One verdict as ``compare --timings`` reaches it: each ABBA quad on sides prepared anew."""
    from harness.measure.sampler import sample_pair

    def prepared():
        return (Planted(_prepare(probe, subject, dev), 1.0, multiple_for(k)),
                Planted(_prepare(probe, subject, dev), k, multiple_for(k)))
    t0 = time.perf_counter()
    out = sample_pair(*prepared(), plan, flush, refresh=prepared)
    return out, time.perf_counter() - t0


def _spread(samples) -> float:
    q = statistics.quantiles(samples, n=4)
    return (q[2] - q[0]) / statistics.median(samples)


def run_condition(probe, subject, dev, k, runs, plan, flush):
    kinds: dict[str, int] = {}
    seconds, rounds, spreads = [], [], []
    for _ in range(runs):
        out, s = one_verdict(probe, subject, dev, k, plan, flush)
        kinds[out.verdict.kind] = kinds.get(out.verdict.kind, 0) + 1
        seconds.append(s)
        rounds.append(out.verdict.rounds)
        spreads.append(max(_spread(out.base), _spread(out.head)))
    return kinds, seconds, rounds, spreads


def pr_verdict_seconds(tier, subject, dev, k, plan, flush) -> tuple[float, list[str]]:
    """One PR verdict: every probe of the tier prepared, oracle-checked and sampled."""
    from harness.measure import probes
    t0 = time.perf_counter()
    kinds = [one_verdict(p, subject, dev, k, plan, flush)[0].verdict.kind
             for p in probes.TIERS[tier]]
    return time.perf_counter() - t0, kinds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", help="auto, cpu, cuda[:N] (default auto)")
    p.add_argument("--subject", default="reference:post-810-clamp",
                   help="the kernel to time (default %(default)s)")
    p.add_argument("--probes", default="small-4x8,notes-4x16",
                   help="probes of harness.measure.probes (default %(default)s)")
    p.add_argument("--runs", type=int, default=20, help="verdicts per slowdown (default 20)")
    p.add_argument("--aa-runs", type=int, default=100, help="A/A verdicts (default 100)")
    p.add_argument("--slowdowns", default=",".join(map(str, SLOWDOWNS)))
    p.add_argument("--pr-tier", default="quick",
                   help="tier whose every probe one PR verdict times ('' to skip)")
    p.add_argument("--factor", type=float, default=None, help="default: the PR factor (1.1)")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="bound per probe verdict (default: the sampler's, 30)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--cold-cache", action="store_true", help="evict the LLC before every call")
    args = p.parse_args(argv)

    import dataclasses

    import torch

    from harness.measure import probes
    from harness.measure.device import select
    from harness.measure.sampler import PR_FACTOR, Plan, cache_flusher
    from harness.subjects import resolve_subject

    torch.set_num_threads(args.threads)
    dev = select(args.device)
    dev.prepare()
    plan = Plan(factor=args.factor or PR_FACTOR, cold=args.cold_cache)
    if args.max_seconds:
        plan = dataclasses.replace(plan, max_seconds=args.max_seconds)
    flush, cache = cache_flusher(dev) if args.cold_cache else (None, "warm (no flush)")
    subject = resolve_subject(args.subject)
    by_name = {pr.name: pr for pr in probes.FULL}
    chosen = [by_name[n] for n in args.probes.split(",") if n]
    ks = [1.0] + [float(x) for x in args.slowdowns.split(",") if x]
    print(f"device {dev.description}; torch {torch.__version__}, {torch.get_num_threads()} "
          f"thread(s); subject {args.subject}; cache {cache}; factor {plan.factor:g}, "
          f"alpha {plan.alpha:g}, <= {plan.max_rounds} rounds / {plan.max_seconds:g} s per "
          "verdict", flush=True)
    head = (f"{'condition':<10} {'probe':<20} {'runs':>4} {'regr':>4} {'impr':>4} {'same':>4} "
            f"{'inc':>4} {'rate':>14} {'rounds':>6} {'s/verdict':>9} {'max s':>6} "
            f"{'spread':>6}")
    print(head)
    print("-" * len(head), flush=True)
    failed = False
    for k in ks:
        for probe in chosen:
            runs = args.aa_runs if k == 1.0 else args.runs
            if runs <= 0:
                continue
            kinds, secs, rounds, spreads = run_condition(probe, subject, dev, k, runs, plan,
                                                         flush)
            reg, imp = kinds.get("regression", 0), kinds.get("improvement", 0)
            if k == 1.0:
                rate = f"false {reg + imp}/{runs}"
                failed |= reg > max(1, runs // 100)
            else:
                rate = f"detect {reg / runs:.0%}"
            label = "A/A" if k == 1.0 else f"{k:g}x"
            print(f"{label:<10} {probe.name:<20} {runs:>4} {reg:>4} {imp:>4} "
                  f"{kinds.get('no change', 0):>4} {kinds.get('inconclusive', 0):>4} {rate:>14} "
                  f"{statistics.median(rounds):>6.0f} {statistics.fmean(secs):>9.2f} "
                  f"{max(secs):>6.1f} {statistics.median(spreads):>6.1%}", flush=True)
    if args.pr_tier:
        for k in (1.0, 1.25):
            secs, kinds = pr_verdict_seconds(args.pr_tier, subject, dev, k, plan, flush)
            print(f"PR verdict, tier {args.pr_tier} ({len(kinds)} probes), "
                  f"{'A/A' if k == 1.0 else f'{k:g}x'}: {secs:.1f} s ({', '.join(kinds)})",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
