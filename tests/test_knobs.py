"""The knobs a commit declares (issue 32, part 2) and what its code says (part 6): read from its own
``envs.py`` registry, never from a list in the harness; a changed default is said first by
``compare``; the commit's warnings stand beside the ladder they concern."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.subjects.source.knobs import ENVS_FILE, Knob, declared
from tests.fixtures.spyre_backend import backend
from tests.fixtures.spyre_repo import BUCKETER

HEAD_MAJOR_BACKEND = "spyre_inference/v1/attention/backends/spyre_head_major_attn.py"

ENVS = '''\
import os
from typing import Any, Callable

environment_variables: dict[str, Callable[[], Any]] = {
    "SPYRE_A_LIST": lambda: os.getenv("SPYRE_A_LIST"),
    "SPYRE_A_LAYOUT": lambda: os.getenv("SPYRE_A_LAYOUT") or "head_major",
    "SPYRE_A_FLAG": lambda: bool(int(os.getenv("SPYRE_A_FLAG", "1"))),
    "SPYRE_A_COUNT": lambda: int(os.environ.get("SPYRE_A_COUNT", "64")),
    "SPYRE_A_SWITCH": lambda: os.getenv("SPYRE_A_SWITCH", "0") == "1",
}
'''
#: The knob a commit of the fixture gains (its default the edit's): the gen4 registry's last line.
LAST_ENTRY = '    "SPYRE_BATCHED_DECODE": lambda: int(os.getenv("SPYRE_BATCHED_DECODE", "0")),\n'
#: A bucketer that reads it, and says so (a warning naming the layout it was built for).
READS_LAYOUT = ('        logger.info("attention buckets: kv up to',
                '        logger.warning("layout %s", envs_spyre.SPYRE_ATTN_KV_LAYOUT)\n'
                '        logger.info("attention buckets: kv up to')


#: A verify query bucket of 1 + the drafts (today's bucketers), so a comparison has a ladder that
#: changes at a config where the code also warns.
VERIFY_BUCKET = ('        logger.info("attention buckets: kv up to',
                 '        spec = vllm_config.speculative_config\n'
                 '        if spec is not None:\n'
                 '            self._query_buckets = sorted({*self._query_buckets,\n'
                 '                                          1 + spec.num_speculative_tokens})\n'
                 '        logger.info("attention buckets: kv up to')


def spyre_bench(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250", **env})


def test_the_registry_is_read_from_the_syntax_alone():
    found = declared({ENVS_FILE: ENVS.encode()})
    assert found == {
        "SPYRE_A_LIST": Knob("SPYRE_A_LIST", None, "text"),
        "SPYRE_A_LAYOUT": Knob("SPYRE_A_LAYOUT", "head_major", "text"),
        "SPYRE_A_FLAG": Knob("SPYRE_A_FLAG", "1", "flag"),
        "SPYRE_A_COUNT": Knob("SPYRE_A_COUNT", "64", "int"),
        "SPYRE_A_SWITCH": Knob("SPYRE_A_SWITCH", "0", "flag")}
    assert declared({}) is None
    assert declared({ENVS_FILE: b"import os\nKNOBS = {}\n"}) is None
    assert found["SPYRE_A_COUNT"].check("x") and found["SPYRE_A_COUNT"].check("32") is None


@pytest.fixture(scope="module")
def layouts(spyre_repo) -> dict[str, str]:
    """gen4 with a layout knob defaulting to token-major, then a child defaulting to head-major,
    each read by its bucketer."""
    reads = spyre_repo.edit(BUCKETER, *READS_LAYOUT, parent="gen4")
    entry = '    "SPYRE_ATTN_KV_LAYOUT": lambda: os.getenv("SPYRE_ATTN_KV_LAYOUT") or "%s",\n'
    token = spyre_repo.edit(ENVS_FILE, LAST_ENTRY, LAST_ENTRY + entry % "token_major",
                            parent=reads)
    envs = spyre_repo.read(token, ENVS_FILE).replace(entry % "token_major", entry % "head_major")
    # the backend a head-major default selects: its own module, as today's trees have it
    hm = backend("gen4", head_major=True).replace("class SpyreAttentionBackend(",
                                                   "class SpyreHeadMajorAttentionBackend(")
    head = spyre_repo.add_commit({ENVS_FILE: envs, HEAD_MAJOR_BACKEND: hm},
                                 "default: head-major", parent=token)
    return {"token_major": spyre_repo.spec(token), "head_major": spyre_repo.spec(head)}


def test_compare_says_first_that_the_default_changed(layouts, tmp_path):
    md = tmp_path / "comment.md"
    done = spyre_bench("compare", "--base", layouts["token_major"], "--head",
                       layouts["head_major"], "--block-size", "64", "--max-model-len", "2048",
                       "--workload", "four-3-block-decodes", "--markdown", str(md))
    assert done.returncode in (0, 1), done.stderr
    first = done.stdout.splitlines()[:5]
    assert "⚙ default changed: SPYRE_ATTN_KV_LAYOUT token_major → head_major" in first, first
    top = md.read_text().splitlines()[:10]
    assert ("- ⚙️ default changed\\: SPYRE\\_ATTN\\_KV\\_LAYOUT token\\_major → head\\_major"
            in top), top
    # each side measured on its own default: the bucketer says which it was built for
    assert "layout token_major" in done.stdout and "layout head_major" in done.stdout


def test_a_knob_no_subject_declares_is_one_line_and_exit_2(layouts):
    for env, said in (("SPYRE_JAGGED_ATTENTION_PARALLEL_ENTRIES=32",
                       "unknown knob SPYRE_JAGGED_ATTENTION_PARALLEL_ENTRIES: no subject given "
                       "declares it"),
                      ("SPYRE_NOPE=1", "unknown knob SPYRE_NOPE")):
        done = spyre_bench("ladders", "--subject", layouts["head_major"], "--env", env)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout


def test_a_commit_without_a_knob_skips_naming_it(spyre_repo, layouts):
    done = spyre_bench("ladders", "--base", spyre_repo.spec("gen4"), "--head",
                       layouts["head_major"], "--block-size", "64", "--env",
                       "SPYRE_ATTN_KV_LAYOUT=token_major", "--json")
    assert done.returncode == 0, done.stderr
    assert "has no knob SPYRE_ATTN_KV_LAYOUT (its spyre_inference/envs.py does not declare " \
           "it)" in done.stdout
    assert "layout token_major" in done.stdout   # the head measured what it was asked


def test_the_shells_setting_never_decides_a_commits_default(layouts):
    done = spyre_bench("ladders", "--subject", layouts["head_major"], "--block-size", "64",
                       "--json", SPYRE_ATTN_KV_LAYOUT="token_major", SPYRE_BENCH_MEMO="0")
    assert done.returncode == 0, done.stderr
    assert "layout head_major" in done.stdout and "layout token_major" not in done.stdout


def test_the_codes_warnings_stand_beside_the_ladder(spyre_repo, layouts, tmp_path):
    """In the ladders table (a column) and in the comment's ladder table, once per config."""
    done = spyre_bench("ladders", "--subject", layouts["head_major"], "--block-size", "64,192",
                       "--max-model-len", "2048", "--axes", "kv")
    assert done.returncode == 0, done.stderr
    table = done.stdout
    assert "the code said" in table and table.count("block_size 192 is not a power of") == 1
    verify = spyre_repo.spec(spyre_repo.edit(BUCKETER, *VERIFY_BUCKET, parent="gen4"))
    md = tmp_path / "comment.md"
    done = spyre_bench("compare", "--base", spyre_repo.spec("gen4"), "--head", verify,
                       "--block-size", "192", "--max-model-len", "2048", "--spec-tokens", "3",
                       "--workload", "four-3-block-decodes", "--markdown", str(md))
    assert done.returncode in (0, 1), done.stderr
    rows = [line for line in md.read_text().splitlines() if line.startswith("| query | [")]
    assert len(rows) == 1 and "block\\_size 192 is not a power of two" in rows[0], rows


def test_a_ladder_row_of_several_envs_says_which_env_warned_what(spyre_repo, tmp_path):
    """One ladder change under two envs is one row: a warning both configs said stands once, one
    only the kv-above-limit config said names that env (the row stands for both)."""
    verify = spyre_repo.spec(spyre_repo.edit(BUCKETER, *VERIFY_BUCKET, parent="gen4"))
    md = tmp_path / "comment.md"
    done = spyre_bench("compare", "--base", spyre_repo.spec("gen4"), "--head", verify,
                       "--block-size", "192", "--max-model-len", "2048", "--spec-tokens", "3",
                       "--overrides", "batched,kv-above-limit", "--workload",
                       "four-3-block-decodes", "--markdown", str(md))
    assert done.returncode in (0, 1), done.stderr
    (row,) = [line for line in md.read_text().splitlines() if line.startswith("| query | [")]
    assert "env batched, kv\\-above\\-limit" in row
    said = row.removesuffix(" |").rsplit(" | ", 1)[1]
    warnings = said.split(" · ")
    assert sum("block\\_size 192 is not a power of two" in w for w in warnings) == 1
    only_kv = [w for w in warnings if "SPYRE\\_ATTN\\_KV\\_BUCKETS" in w]
    assert only_kv and all(w.startswith("kv\\-above\\-limit\\: ") for w in only_kv), warnings
