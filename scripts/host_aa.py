"""Does the host-time verdict stay calm on A/A, and catch a planted build() slowdown?

    python scripts/host_aa.py                          # fixture gen4 against itself, 20 runs
    python scripts/host_aa.py --runs 5 --head planted  # and against its 1.5x build() slowdown
    python scripts/host_aa.py --base git:/work/scratch/real/si@up-19461caa --runs 20

Each run opens both sides in fresh subject workers (as ``compare --timings`` does) and times
every host probe of the quick tier (harness.measure.host_run.time_host: every workload at the
tier's host config, on every path the commit takes, build() then forward()), then prints one
line: the verdicts, the seconds the run took and the most cores other processes used while it
timed. At the end: how many runs were calm (no regression, no improvement: an A/A's every
"change" is a false alarm), and, for a planted head, how many probes of the batched path's
build() were regressions. Without --base it builds the fixture repository
(tests.fixtures.spyre_repo) in a temporary folder; ``--head planted`` is its
``plant_build_slowdown`` on gen4.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="subject spec (default: the fixture repository's gen4)")
    p.add_argument("--head", help="subject spec, or 'planted' (default: the base: A/A)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--tier", default="quick")
    p.add_argument("--workload", action="append", default=[],
                   help="a named mix (default: every mix, as the tier's compare)")
    args = p.parse_args(argv)

    from harness.matrix import TIERS, tier_cases
    from harness.measure.host_run import time_host
    from harness.worker import open_subject
    from harness.workloads import specs

    with tempfile.TemporaryDirectory(prefix="host-aa-") as tmp:
        base, head = _specs(args, Path(tmp))
        cases = tier_cases(args.tier)
        wanted = specs(args.workload or None, steps=TIERS[args.tier].steps)
        calm, detected, seconds = 0, [], []
        for run in range(1, args.runs + 1):
            t0 = time.perf_counter()
            sides = open_subject(base), open_subject(head)
            try:
                found = time_host(*sides, cases, wanted)
            finally:
                for side in sides:
                    side.close()
            seconds.append(time.perf_counter() - t0)
            kinds = Counter(t[5].kind for t in found.timings)
            changed = kinds["regression"] + kinds["improvement"]
            calm += not changed
            batched = [t[5] for t in found.timings
                       if t[0].endswith("time_build") and t[1]["path"] == "batched"]
            detected.append(sum(v.kind == "regression" for v in batched))
            worst = max(found.timings, key=lambda t: abs(t[5].ratio - 1), default=None)
            print(f"run {run:2d}: {dict(kinds)}; {seconds[-1]:.0f} s; others used up to "
                  f"{found.busiest_cores:.2f} cores"
                  + (f"; farthest ratio {worst[5].ratio:.3f} ({_name(worst)})" if worst else "")
                  + (f"; skipped {len(found.skipped)}" if found.skipped else ""), flush=True)
            for t in found.timings:
                if t[5].kind != "no change":
                    print(f"    {t[5].kind}: {_name(t)} {t[5].ratio:.3f}x after {t[5].rounds} "
                          f"rounds, {t[5].seconds:.1f} s ({t[5].stopped})", flush=True)
        print(f"\n{base} vs {head}: {calm} of {args.runs} runs calm (no regression, no "
              f"improvement); {statistics.median(seconds):.0f} s per run (median)")
        if head != base:
            print(f"batched build() probes found regressions: {detected} per run")
    return 0


def _name(timing) -> str:
    return f"{timing[0].split('.')[1]} {timing[1]['workload']} {timing[1]['path']}"


def _specs(args, tmp: Path) -> tuple[str, str]:
    """(base, head) specs; the fixture repository built in ``tmp`` when no --base is given."""
    if args.base is not None:
        if args.head == "planted":
            raise SystemExit("--head planted plants into the fixture repository: give no --base")
        return args.base, args.head or args.base
    from tests.fixtures.spyre_repo import build_repo, plant_build_slowdown
    repo = build_repo(tmp / "spyre-inference")
    head = repo.spec(plant_build_slowdown(repo, "gen4")) if args.head == "planted" else None
    return repo.spec("gen4"), head or args.head or repo.spec("gen4")


if __name__ == "__main__":
    sys.exit(main())
