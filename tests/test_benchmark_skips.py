"""What a subject cannot be driven through is a skip everywhere in benchmarks/, ``setup_cache``
included: ASV counts anything raised from ``setup_cache`` as a failure of every benchmark of the
class, and only ``NotImplementedError`` from ``setup`` as a skip. Run here the way asv_runner
runs a benchmark (``do_setup_cache``, then ``set_cache`` and ``do_setup`` per combination)."""

import math

import pytest

from harness import suite
from harness.subjects.spyre.drive.errors import NotDrivable


class _Undrivable:
    """A subject whose builder cannot be driven (a constructor argument nobody can supply)."""

    spec = "fake:undrivable"
    capabilities = frozenset({"bucketer", "forward"})

    def lacks(self, what):
        return None

    def _raise(self, *args, **kwargs):
        raise NotDrivable("SpyreAttentionMetadataBuilder(...): argument 'kv_cache_spec_v2' has "
                          "no stand-in")

    decode_kernel = bucketing = prefetch_workloads = workload_costs = _raise


@pytest.fixture
def undrivable(monkeypatch, tmp_path):
    monkeypatch.setenv(suite.TIER_ENV, "tiny")
    monkeypatch.setenv(suite.SKIP_LOG_ENV, str(tmp_path / "skips"))
    monkeypatch.setattr(suite, "subject", lambda: _Undrivable())
    return tmp_path / "skips"


def _asv_benchmarks(module_name):
    import importlib
    import inspect

    from asv_runner.discovery import _get_benchmark
    module = importlib.reload(importlib.import_module(module_name))
    found = []
    for cls in vars(module).values():
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        for name, member in inspect.getmembers(cls, inspect.isfunction):
            b = _get_benchmark(name, module, cls, member)
            if b is not None:
                found.append(b)
    return found


def _run_like_asv(benchmark) -> float:
    cache = benchmark.do_setup_cache()           # raising here: ASV fails the whole class
    benchmark.set_param_idx(0)
    benchmark.set_cache(cache)
    skip = benchmark.do_setup()
    return math.nan if skip else benchmark.do_run()


@pytest.mark.parametrize("module", ["benchmarks.kernel", "benchmarks.exact"])
def test_a_subject_that_cannot_be_driven_is_skipped_never_failed(undrivable, module):
    benchmarks = [b for b in _asv_benchmarks(module) if b.setup_cache_key is not None]
    assert benchmarks
    for b in benchmarks:
        value = _run_like_asv(b)
        assert isinstance(value, float) and math.isnan(value), b.name
    assert "no stand-in" in undrivable.read_text()          # the reason is kept


def test_the_in_process_runner_stores_them_as_skips(undrivable):
    from harness.runner import inprocess
    benchmarks = inprocess.discover("tiny")
    values = inprocess._values(benchmarks, {b.name: None for b in benchmarks})
    for name, (vals, stderr, *_) in values.items():
        assert not stderr, name
        assert all(isinstance(v, float) and math.isnan(v) for v in vals), name
