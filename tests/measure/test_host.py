"""Host probes (harness.measure.host) on a real fixture commit, in this process, and where the
host time goes (harness.measure.host_profile): what is timed, in what order, charged to whom.
Nothing here is timed against a bound: the figures asserted are counts and names."""

from __future__ import annotations

import cProfile
import pstats
import sys

import pytest

from harness.config import EngineConfig
from harness.errors import CapabilityMissing
from harness.measure.device import select
from harness.measure.host import LATER_LAYERS, HostProbe, HostSide, host_config
from harness.measure.host_profile import charge, profile_calls
from harness.subjects import resolve_subject
from harness.workloads import generate

CONFIG = EngineConfig(block_size=64, max_model_len=512)


@pytest.fixture(scope="module")
def gen4(spyre_repo):
    return resolve_subject(spyre_repo.spec("gen4"))


def _side(subject, kind, path="batched", mix="bimodal"):
    return HostSide(subject, HostProbe(kind, path, generate(mix, CONFIG, steps=4), CONFIG),
                    select("cpu"))


def test_a_build_probe_calls_the_commits_build_on_each_step_in_turn(gen4):
    side = _side(gen4, "build")
    try:
        seen = []
        real = side.session.builder.build
        side.session.builder.build = lambda **kw: seen.append(
            int(kw["common_attn_metadata"].num_reqs)) or real(**kw)
        side.sample(6)
        steps = [len(s) for s in generate("bimodal", CONFIG, steps=4).steps]
        assert seen == [*steps, *steps[:2]]          # steps in turn, wrapping round
        side.sample(2)
        assert seen[6:] == steps[2:4]                 # the next sample goes on from there
        # the transfer log's counting is off the commit's convert while the probe lives
        log = side.session.transfers
        holders = {n: m.convert for n, m in sys.modules.items()
                   if n.startswith("spyre_inference") and hasattr(m, "convert")}
        assert holders and all(c is log.convert for c in holders.values()), holders
    finally:
        side.close()


def test_a_forward_probe_times_later_layers_on_metadata_made_for_its_call(gen4):
    side = _side(gen4, "forward")
    try:
        assert {p.mode for p in side.session.proxies} == {"replay"}
        built, layers = [], []
        real_build, real_forward = side._build, side._forward
        side._build = lambda cm: built.append(cm) or real_build(cm)
        side._forward = lambda m, *rest: layers.append(m) or real_forward(m, *rest)
        assert side.sample(3) > 0
        # per call: its own build() and first layer (untimed), then LATER_LAYERS timed layers
        # on the same, fresh metadata; no kernel ran and nothing was recorded
        per_call = 1 + LATER_LAYERS
        assert len(built) == 3 and len(layers) == 3 * per_call
        calls = [layers[i:i + per_call] for i in range(0, len(layers), per_call)]
        assert all(len({id(m) for m in call}) == 1 for call in calls)
        assert len({id(call[0]) for call in calls}) == 3
        assert all(not p.calls for p in side.session.proxies)
    finally:
        side.close()


def test_a_path_the_commit_does_not_know_is_a_capability_skip_naming_its_knob(gen4):
    with pytest.raises(CapabilityMissing, match="SPYRE_JAGGED_ATTENTION"):
        _side(gen4, "build", path="jagged")


def test_the_profile_names_the_commits_own_functions(gen4):
    side = _side(gen4, "build")
    try:
        found = side.profile(5)
    finally:
        side.close()
    names = [f["name"] for f in found["functions"]]
    assert "_build_batched" in names and found["passes"] >= 1 and found["seconds"] > 0
    assert all(f["where"].startswith("spyre_inference/") for f in found["functions"])
    shares = [f["share"] for f in found["functions"]]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1.0 + 1e-9


def test_time_outside_the_commit_is_charged_to_the_commits_caller():
    ours = {"commit.py": "spyre_inference/commit.py"}

    def helper():     # stands for torch's Python layer: not the commit's code
        return sum(i * i for i in range(20000))

    def caller():
        return helper()

    caller.__code__ = caller.__code__.replace(co_filename="commit.py")
    profiler = cProfile.Profile(builtins=False)
    profiler.enable()
    caller()
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    charged = charge(stats, lambda f: f[0] in ours)
    (owner, seconds), = charged.items()
    assert owner[2] == "caller"
    helper_time = sum(v[2] for k, v in stats.items() if k[2] in ("helper", "<genexpr>"))
    assert seconds >= helper_time > 0
    found = profile_calls([caller], ours, top=3)
    assert [f["name"] for f in found["functions"]] == ["caller"]
    assert found["functions"][0]["share"] > 0.5


def test_host_time_is_measured_at_the_config_nearest_the_engine_default():
    configs = [EngineConfig(block_size=b, max_model_len=m) for b in (64, 128, 192, 256)
               for m in (256, 2048, 8192, 32768)]
    assert host_config(configs) == EngineConfig(block_size=64, max_model_len=2048)
    assert host_config([CONFIG]) == CONFIG


#: A batched decode that stores into the layer's output when it has the padded batch's rows
#: (as real trees do, R3hankhan123@32e22ec4): the call the kernel gets depends on which output
#: buffer forward() is handed, the step's own or the layer's staging buffer.
_STORE_WHEN_ROOM = (
    "            result = self._run_batched_decode(\n"
    "                query_dev, m.rep_row_ids_dev, k_pages, v_pages, m.chunk_page_ids_dev,\n"
    "                m.mask_by_chunk_dev, b_seqs, m.blocks_per_chunk, m.block_size, None)\n"
    "            output[:m.num_decode_seqs].copy_(\n"
    "                result.reshape(b_seqs, self.num_heads, self.head_size)"
    "[:m.num_decode_seqs])\n",
    "            room = output.shape[0] >= b_seqs\n"
    "            result = self._run_batched_decode(\n"
    "                query_dev, m.rep_row_ids_dev, k_pages, v_pages, m.chunk_page_ids_dev,\n"
    "                m.mask_by_chunk_dev, b_seqs, m.blocks_per_chunk, m.block_size,\n"
    "                output if room else None)\n"
    "            if not room:\n"
    "                output[:m.num_decode_seqs].copy_(\n"
    "                    result.reshape(b_seqs, self.num_heads, self.head_size)"
    "[:m.num_decode_seqs])\n")


def test_a_forward_probe_calls_forward_as_the_commits_layer_does(spyre_repo):
    """The timed layers hand forward() what the commit's attn_layer hands it (its staging
    buffers), as the recorded first layer did: else the kernel calls differ from the recorded
    ones, the replies do not fit, and the commit is said to raise (every forward probe but
    four-3-block-decodes on the R3 trees)."""
    from tests.fixtures.spyre_sources import BACKEND
    stores = spyre_repo.edit(BACKEND, *_STORE_WHEN_ROOM, parent="today",
                             message="batched decode stores into the output when it has room")
    side = _side(resolve_subject(spyre_repo.spec(stores)), "forward", mix="below-minimum")
    try:
        assert side.sample(3) > 0
    finally:
        side.close()
