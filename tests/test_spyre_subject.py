"""spyre-inference subjects loaded from the generated repository: specs, probing, exact ladders,
isolation between loads, and the errors a user can fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.config import EngineConfig, Overrides
from harness.errors import CapabilityMissing, SubjectError
from harness.evaluate import config_figures
from harness.matrix import Case
from harness.subjects import resolve_subject
from harness.subjects.load.loader import BACKEND_FILE, SourceTree, backend_standin
from harness.subjects.spyre.bucketing import SubjectRejected
from tests.fixtures.spyre_repo import (
    BACKEND,
    BROKEN,
    BROKEN_MISSING,
    BUCKETER,
    GENERATIONS,
    KERNEL_GENERATION,
)

KV_ABOVE = Overrides.from_env({"SPYRE_ATTN_KV_BUCKETS": "128,8192", "SPYRE_BATCHED_DECODE": "1"})
NONE = Overrides()


def cfg(bs=64, mml=2048, mns=32, **kw) -> EngineConfig:
    return EngineConfig(block_size=bs, max_model_len=mml, max_num_seqs=mns, **kw)


@pytest.fixture(scope="module")
def subjects(spyre_repo):
    """One subject per generation, resolved once for the module."""
    return {g: resolve_subject(spyre_repo.spec(g)) for g in GENERATIONS}


# -- specs and probing ------------------------------------------------------------------------

EXPECTED_CAPS = {
    "no-bucketer": {"decode_kernel_a", "forward"},
    "pre-810": {"bucketer", "decode_kernel_a", "forward"},
    "810-topup": {"bucketer", "num_seqs_axis", "decode_kernel_a", "forward"},
    "810-clamp": {"bucketer", "num_seqs_axis", "decode_kernel_a", "forward"},
    # Generation 3 already batches the decode prefix (its builder uses vLLM's
    # split_decodes_and_prefills); chunking is a module-level function of the bucketer module.
    "gen3": {"bucketer", "num_seqs_axis", "batched_decode_variants", "chunking",
             "decode_prefix", "forward"},
    "gen4": {"bucketer", "num_seqs_axis", "batched_decode_variants", "chunking",
             "decode_prefix", "sliding_window", "forward"},
}


@pytest.mark.parametrize("generation", GENERATIONS)
def test_capabilities_are_probed_per_generation(subjects, spyre_repo, generation):
    s = subjects[generation]
    assert set(s.capabilities) == EXPECTED_CAPS[generation]
    assert s.identity == spyre_repo.commits[generation]
    kernel = s.describe()["kernel"]
    if KERNEL_GENERATION[generation] == "forward":
        assert kernel is None  # no kernel of the harness's conventions: measured via forward()
    else:
        assert kernel.endswith(f"({KERNEL_GENERATION[generation]})")
    for cap in {"bucketer", "num_seqs_axis", "chunking", "decode_prefix"} - s.capabilities:
        reason = s.lacks(cap)
        assert reason.startswith(f"{s.spec} (commit {s.identity[:12]}) has no {cap}: ")


def test_any_revision_expression_names_the_same_commit(spyre_repo):
    pre = spyre_repo.commits["pre-810"]
    for rev in ("pre-810", pre, pre[:9], "main~4", f"wip/{BROKEN}~5", "refs/tags/810-topup^"):
        s = resolve_subject(f"git:{spyre_repo.path}@{rev}")
        assert s.identity == pre, rev
        assert s.spec == f"git:{spyre_repo.path}@{rev}"
    for rev in ("", "@main", "@main@{0}", "@HEAD@{0}"):
        assert resolve_subject(f"git:{spyre_repo.path}{rev}").identity == spyre_repo.commits["gen4"]


def test_revisions_are_read_as_committed_whatever_gitattributes_say(spyre_repo):
    rev = spyre_repo.add_commit({".gitattributes": "spyre_inference/** export-ignore\n"
                                                   "*.py export-subst\n"}, "attrs",
                                parent="810-clamp")
    s = resolve_subject(spyre_repo.spec(rev))
    assert s.capabilities == resolve_subject(spyre_repo.spec("810-clamp")).capabilities
    assert s.bucketing(cfg(192), NONE).num_blocks == (2, 3, 6, 11)


def test_a_repo_path_containing_at_signs(spyre_repo, tmp_path):
    odd = tmp_path / "me@host" / "si"
    odd.parent.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(spyre_repo.path), str(odd)], check=True)
    s = resolve_subject(f"git:{odd}@HEAD~1")
    assert s.identity == spyre_repo.commits["gen3"]


# -- exact ladders, computed by the fixture's own code ---------------------------------------

@pytest.mark.parametrize("mml, before, after", [
    (2048, (1, 2, 4, 8, 11), (2, 3, 6, 11)),
    (32768, (1, 2, 4, 8, 16, 32, 64, 128, 171), (2, 3, 6, 11, 22, 43, 86, 171)),
    (256, (1, 2), (2,)),
])
def test_review_point_1_ladders_at_block_size_192(subjects, mml, before, after):
    assert subjects["pre-810"].bucketing(cfg(192, mml), NONE).batched_num_blocks == before
    for g in ("810-topup", "810-clamp", "gen3", "gen4"):
        assert subjects[g].bucketing(cfg(192, mml), NONE).batched_num_blocks == after, g


def test_review_point_2_override_above_the_limit(subjects):
    got = {g: subjects[g].bucketing(cfg(64, 2048), KV_ABOVE).batched_num_blocks
           for g in ("pre-810", "810-topup", "810-clamp")}
    assert got == {"pre-810": (1, 2, 4, 8, 16, 32), "810-topup": (2, 128), "810-clamp": (2, 32)}
    assert subjects["810-topup"].bucketing(cfg(64, 2048), KV_ABOVE).kv == (128, 8192)


def test_generation_4_has_no_num_seqs_ladder_below_four(subjects):
    small = cfg(64, 2048, mns=2)
    assert subjects["810-clamp"].bucketing(small, NONE).num_seqs == (2,)
    assert subjects["gen4"].bucketing(small, NONE).num_seqs == ()
    assert subjects["gen4"].bucketing(small, NONE).decode_prefix_batched is True
    # The generation-3 builder already batches the decode prefix (split_decodes_and_prefills).
    assert subjects["gen3"].bucketing(small, NONE).decode_prefix_batched is True
    assert subjects["810-clamp"].bucketing(small, NONE).decode_prefix_batched is False


def test_batched_grid_and_chunking_come_from_the_subject(subjects):
    b = subjects["gen3"].bucketing(cfg(64, 2048, mns=8), Overrides.from_env(
        {"SPYRE_BATCHED_DECODE": "1"}))
    assert b.batched_variants[:3] == ((8, 32), (4, 32), (8, 16))
    assert len(b.batched_variants) == len(b.num_seqs) * len(b.num_blocks) == 2 * 6
    assert b.chunking(4, 128 // 4) == (8, 4) and b.chunking(8, 2) == (2, 1)
    off = subjects["gen3"].bucketing(cfg(64, 2048, mns=8), NONE)
    assert off.batched_variants == () and off.batched_enabled is False


def test_generation_1_helpers_come_from_the_subjects_backend_source(spyre_repo):
    tree = SourceTree({BACKEND_FILE: spyre_repo.read("pre-810", BACKEND).encode()}, "t")
    mod = backend_standin(tree)
    assert mod._powers_of_two_up_to(2048, start=192) == (256, 512, 1024, 2048)
    assert mod._needs_gather(128, 64) is True  # self-contained: the subject's own rule
    assert mod._use_store_mode(4096) is False  # reads envs (vLLM side): the harmless stand-in
    with pytest.raises(AttributeError):
        mod.__path__  # noqa: B018  (the import system must see a plain module)


def test_generation_1_records_reduce_to_distinct_pairs(subjects):
    b = subjects["pre-810"].bucketing(cfg(64, 8192, max_num_batched_tokens=2048), NONE)
    ref = resolve_subject("reference:pre-810").bucketing(cfg(64, 8192), NONE)
    # nb * bs > 4096 gives two records per pair in the fixture (needs_gather False and True).
    assert any(nb * 64 > 4096 for nb, _ in b.variants)
    assert b.variants == ref.variants and len(set(b.variants)) == len(b.variants)


def test_editing_the_backend_helper_changes_generation_1(spyre_repo):
    rev = spyre_repo.edit(BACKEND, "    out.append(n)\n    return tuple(out)",
                          "    return tuple(out)", parent="pre-810")
    s = resolve_subject(spyre_repo.spec(rev))
    assert s.bucketing(cfg(192, 2048), NONE).kv == (256, 512, 1024)


# -- isolation --------------------------------------------------------------------------------

def test_loads_leave_no_trace_and_never_cross_over(spyre_repo, monkeypatch):
    monkeypatch.setenv("SPYRE_ATTN_KV_BUCKETS", "64,96")  # a shell value must not leak in
    a = resolve_subject(spyre_repo.spec("pre-810"))
    b = resolve_subject(spyre_repo.spec("810-topup"))
    modules, environ, meta_path = dict(sys.modules), dict(os.environ), list(sys.meta_path)
    wide = cfg(64, 2048)
    # Interleaved, overrides on and off: every answer is that commit's, under that env.
    assert b.bucketing(wide, KV_ABOVE).batched_num_blocks == (2, 128)
    assert a.bucketing(cfg(192, 2048), NONE).batched_num_blocks == (1, 2, 4, 8, 11)
    assert b.bucketing(cfg(192, 2048), NONE).batched_num_blocks == (2, 3, 6, 11)
    assert a.bucketing(wide, KV_ABOVE).kv == (128, 8192)
    assert b.bucketing(wide, NONE).kv == (64, 128, 256, 512, 1024, 2048)
    assert a.bucketing(wide, NONE).kv == (64, 128, 256, 512, 1024, 2048)
    assert sys.modules.keys() == modules.keys()
    assert all(sys.modules[k] is v for k, v in modules.items())
    assert dict(os.environ) == environ and sys.meta_path == meta_path
    assert not [m for m in sys.modules if m.split(".")[0] in ("vllm", "spyre_inference")]


def test_bucketer_warnings_become_notes_not_output(subjects, capfd):
    b = subjects["810-clamp"].bucketing(cfg(192, 2048), KV_ABOVE)
    assert any("not a power of two" in n for n in b.notes)
    assert any("dropping [8192] above 2048" in n for n in b.notes)
    out, err = capfd.readouterr()
    assert out == err == ""


def test_torch_is_imported_for_the_real_builder_never_for_the_reference(spyre_repo):
    """The commit's metadata builder runs on CPU torch; the embedded reference stays torch-free."""
    code = ("import sys; from harness.subjects import resolve_subject as r; "
            "from harness.config import EngineConfig as C, Overrides as O; "
            "s = r(sys.argv[1]); s.bucketing(C(), O()); print('torch' in sys.modules)")
    seen = {spec: subprocess.run([sys.executable, "-c", code, spec], capture_output=True,
                                 text=True, check=True).stdout.strip()
            for spec in (spyre_repo.spec("gen3"), "reference:chunked")}
    assert seen == {spyre_repo.spec("gen3"): "True", "reference:chunked": "False"}


# -- configs the subject rejects, capabilities it lacks ---------------------------------------

def test_an_exception_for_one_config_is_a_skip_naming_subject_and_config(spyre_repo):
    rev = spyre_repo.edit(
        BUCKETER, "        max_num_seqs = vllm_config.scheduler_config.max_num_seqs\n",
        "        max_num_seqs = vllm_config.scheduler_config.max_num_seqs\n"
        "        if self._block_size > 128:\n"
        "            raise ValueError('block_size above 128 is not supported')\n",
        parent="810-clamp")
    s = resolve_subject(spyre_repo.spec(rev))
    assert s.bucketing(cfg(64), NONE).num_blocks == (1, 2, 4, 8, 16, 32)
    with pytest.raises(SubjectRejected) as err:
        s.bucketing(cfg(192), NONE)
    msg = str(err.value)
    assert msg.startswith(f"{s.spec} (commit {rev[:12]}): SpyreAttnBucketer rejected bs=192 ")
    assert "ValueError: block_size above 128 is not supported" in msg
    assert f"{BUCKETER}:" in msg
    figures = config_figures(s, Case(cfg(192), NONE, "none"))
    assert figures == {"skipped": msg}


def test_a_config_attribute_the_harness_does_not_model_is_named(spyre_repo):
    line = "        max_model_len = vllm_config.model_config.max_model_len\n"
    rev = spyre_repo.edit(BUCKETER, line, line + "        hf = vllm_config.model_config.hf_config\n",
                          parent="810-clamp")
    with pytest.raises(SubjectRejected, match=r"vllm_config\.model_config\.hf_config is not "
                                              r"provided by spyre-bench"):
        resolve_subject(spyre_repo.spec(rev)).bucketing(cfg(), NONE)


def test_no_bucketer_yet_is_a_capability_skip(subjects):
    s = subjects["no-bucketer"]
    with pytest.raises(CapabilityMissing, match="has no bucketer: .*spyre_attn_bucketer.py is "
                                                "not in it"):
        s.bucketing(cfg(), NONE)
    assert "skipped" in config_figures(s, Case(cfg(), NONE, "none"))


# -- checkouts --------------------------------------------------------------------------------

def test_path_subject_snapshots_a_plain_checkout(spyre_repo, tmp_path):
    checkout = spyre_repo.export("gen3", tmp_path / "si")
    s = resolve_subject(f"path:{checkout}")
    git = resolve_subject(spyre_repo.spec("gen3"))
    assert s.identity.startswith("sha256:") and s.capabilities == git.capabilities
    assert s.bucketing(cfg(192), KV_ABOVE) == git.bucketing(cfg(192), KV_ABOVE)
    bucketer = checkout / BUCKETER
    bucketer.write_text(bucketer.read_text().replace("start=self._block_size", "start=1"))
    assert s.bucketing(cfg(192), NONE).num_blocks == (2, 3, 6, 11)  # the snapshot
    edited = resolve_subject(f"path:{checkout}")
    assert edited.bucketing(cfg(192), NONE).num_blocks == (1, 2, 3, 6, 11)
    assert edited.identity != s.identity


def test_path_subject_in_a_git_checkout_names_its_commit_and_dirt(spyre_repo, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(spyre_repo.path), str(clone)], check=True)
    assert resolve_subject(f"path:{clone}").identity == spyre_repo.commits["gen4"]
    (clone / BUCKETER).write_text((clone / BUCKETER).read_text() + "\n# local edit\n")
    dirty = resolve_subject(f"path:{clone}").identity
    assert dirty.startswith(spyre_repo.commits["gen4"] + "+dirty.")


# -- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("path:/no/such/dir", "path:/no/such/dir: no such directory '/no/such/dir'"),
    ("git:/no/such/repo@HEAD", "git:/no/such/repo@HEAD: no such directory '/no/such/repo'"),
    ("git:", "subject 'git:': expected git:<repo>@<rev>"),
    ("svn:x", "subject 'svn:x': unsupported spec"),
])
def test_bad_specs_fail_in_one_line(spec, expected):
    with pytest.raises(SubjectError) as err:
        resolve_subject(spec)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value)


def test_errors_name_the_subject_the_revision_and_what_is_missing(spyre_repo, tmp_path):
    repo = spyre_repo.path
    cases = {
        f"git:{repo}@no-such-rev": f"revision 'no-such-rev' does not exist in {repo}",
        f"git:{tmp_path}@HEAD": f"{tmp_path} is not a git repository",
        f"path:{tmp_path}": f"not a spyre-inference checkout: {tmp_path}/spyre_inference does "
                            "not exist",
        spyre_repo.spec(BROKEN): (
            f"(commit {spyre_repo.commits[BROKEN][:12]}): {BUCKETER} failed to import: "
            f"ModuleNotFoundError: No module named '{BROKEN_MISSING}' ({BUCKETER}:13: "),
    }
    for spec, expected in cases.items():
        with pytest.raises(SubjectError) as err:
            resolve_subject(spec)
        assert str(err.value).startswith(spec) and expected in str(err.value), str(err.value)
    empty = spyre_repo.add_commit({"README.md": "no package here\n"}, "empty", parent=None)
    with pytest.raises(SubjectError, match=f"commit {empty[:12]}.*has no spyre_inference/"):
        resolve_subject(spyre_repo.spec(empty))


def test_a_syntax_error_points_at_the_line(spyre_repo):
    rev = spyre_repo.edit(BUCKETER, "_QUERY_STEP = 512\n", "_QUERY_STEP = = 512\n",
                          parent="810-clamp")
    with pytest.raises(SubjectError, match=rf"failed to import: SyntaxError: .*\({BUCKETER}:\d+\)"):
        resolve_subject(spyre_repo.spec(rev))


def test_a_module_raising_on_import_is_reported_with_its_message(spyre_repo):
    rev = spyre_repo.edit(BUCKETER, "logger = init_logger(__name__)\n",
                          "logger = init_logger(__name__)\nraise RuntimeError('not on this "
                          "platform')\n", parent="gen3")
    with pytest.raises(SubjectError, match="RuntimeError: not on this platform"):
        resolve_subject(spyre_repo.spec(rev))
    assert not [m for m in sys.modules if m.split(".")[0] in ("vllm", "spyre_inference")]
