"""ASV plugin: an ``existing`` environment whose name is stable across clones and hosts' paths.

ASV names an ``existing`` environment after the interpreter's absolute path, so the same machine
running from two clones starts two series that never line up. ``spyre-bench run`` selects this
environment (``-E spyre-bench:PYTHON``) instead; its name carries only the Python version and the
device (``SPYRE_BENCH_DEVICE``), e.g. ``spyre-bench-py3.11-cpu``. Loaded by asv.conf.json's
``"plugins": [".harness.asv_plugin"]``.

Under any existing environment (``asv run --python=same``, ``-E existing:PYTHON``) ASV checks
nothing out and hands the benchmark processes none of its ``ASV_*`` variables: the suite then
measures the code at hand (``harness.suite.code_at_hand``), and this plugin tells it where the
configured ``repo`` is (``SPYRE_BENCH_ASV_REPO``, inherited by the benchmark processes).

A timing of one sample (``asv run --quick``, ``spyre-bench run --smoke``) is stored without a
spread: ASV would store its quartiles and interval as the value itself, a spread of ±0 that
nothing measured.

``asv publish`` writes a page that loads its libraries from CDNs: after it, they are copied from
the machine's packages into the site and the page pointed at them
(``harness.runner.asv_assets``), so the page renders with the network off.

``asv run NEW`` measures what is new on the configured branches since the commits measured here or
in the committed history, and a branch's tip when none is (``harness.runner.asv_new``), not the
whole branch.
"""

import functools
import os
from pathlib import Path

from asv import util
from asv.commands.publish import Publish
from asv.commands.run import Run
from asv.console import log
from asv.environment import ExistingEnvironment, get_env_name
from asv.results import Results

from harness.lifeline import hold

# started by spyre-bench run: ASV ends with it, kill -9 included (its benchmark processes hold
# too, through the suite's package, benchmarks/__init__.py)
hold()


@functools.cache
def _python_version(executable: str) -> str:
    return util.check_output(
        [executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).strip()


REPO_ENV = "SPYRE_BENCH_ASV_REPO"


def _remembering_repo(init):
    @functools.wraps(init)
    def __init__(self, conf, *args, **kwargs):
        init(self, conf, *args, **kwargs)
        repo = getattr(conf, "repo", None)
        if repo and os.path.isdir(repo):
            os.environ.setdefault(REPO_ENV, os.path.abspath(repo))
    __init__.spyre_bench = True
    return __init__


if not getattr(ExistingEnvironment.__init__, "spyre_bench", False):
    ExistingEnvironment.__init__ = _remembering_repo(ExistingEnvironment.__init__)


def _no_spread_of_one_sample(add_result):
    @functools.wraps(add_result)
    def wrapped(self, benchmark, *args, **kwargs):
        out = add_result(self, benchmark, *args, **kwargs)
        stats = self._stats.get(benchmark["name"])
        if stats:
            self._stats[benchmark["name"]] = [
                None if isinstance(s, dict) and (s.get("repeat") or 0) < 2 else s
                for s in stats]
            if all(s is None for s in self._stats[benchmark["name"]]):
                self._stats[benchmark["name"]] = None
        return out
    wrapped.spyre_bench = True
    return wrapped


if not getattr(Results.add_result, "spyre_bench", False):
    Results.add_result = _no_spread_of_one_sample(Results.add_result)


def _offline_page(run):
    @functools.wraps(run)
    def wrapped(cls, conf, *args, **kwargs):
        out = run.__func__(cls, conf, *args, **kwargs)
        from harness.runner.asv_assets import localize
        missing = localize(Path(conf.html_dir))
        if missing:
            log.warning("the published page still loads from the network what these packages "
                        f"would serve locally: {', '.join(missing)}")
        return out
    wrapped.spyre_bench = True
    return classmethod(wrapped)


if not getattr(Publish.run, "spyre_bench", False):
    Publish.run = _offline_page(Publish.run)


def _bounded_new(run):
    @functools.wraps(run)
    def wrapped(cls, conf, *args, **kwargs):
        range_spec = kwargs.get("range_spec", args[0] if args else None)
        if range_spec == "NEW":
            from harness.cli.common import HISTORY_DIR
            from harness.runner.asv_new import bounded_new
            commits = bounded_new(conf, HISTORY_DIR)
            if "range_spec" in kwargs:
                kwargs["range_spec"] = commits
            else:
                args = (commits, *args[1:])
        return run.__func__(cls, conf, *args, **kwargs)
    wrapped.spyre_bench = True
    return classmethod(wrapped)


if not getattr(Run.run, "spyre_bench", False):
    Run.run = _bounded_new(Run.run)


class StableExistingEnvironment(ExistingEnvironment):
    tool_name = "spyre-bench"

    @property
    def name(self):
        device = os.environ.get("SPYRE_BENCH_DEVICE", "cpu")
        version = _python_version(self._executable)
        return get_env_name(self.tool_name, f"{version}-{device}", {}, self._tagged_env_vars)
