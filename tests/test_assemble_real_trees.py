"""scripts/assemble_real_trees.py: the git repository of real trees, rebuilt from downloaded files.

Each test runs the script as a subprocess on a recipe and files written here (no real
spyre-inference file is in this project), and reads the repository it builds with git.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "assemble_real_trees.py"
RECIPE = Path(__file__).resolve().parent / "real" / "trees.json"
UP, FORK = "owner/si", "fork/si"
C1, C2, C3 = "1" * 40, "2" * 40, "3" * 40
#: Non-ASCII on purpose: lengths are characters, not bytes.
FILES = {
    (UP, C1, "spyre_inference/envs.py"): "LAYOUT = 'token_major'  # — old\n",
    (UP, C1, "spyre_inference/v1/attention/spyre_attn_bucketer.py"): "BUCKETS = [1, 2]\n",
    (UP, C2, "spyre_inference/envs.py"): "LAYOUT = 'head_major'\n",
    (FORK, C3, "spyre_inference/v1/attention/spyre_attn_bucketer.py"): "BUCKETS = [1, 4]\n",
    (UP, None, "spyre_inference/custom_ops/utils.py"): "def convert(t): return t\n",
}


def _entry(repo, commit, path, fid, why=None):
    entry = {"path": path, "repository": repo, "commit": commit, "id": fid,
             "chars": len(FILES[(repo, commit, path)])}
    return {**entry, "why": why} if why else entry


def _recipe(tmp_path: Path) -> Path:
    bucketer, envs = "spyre_inference/v1/attention/spyre_attn_bucketer.py", "spyre_inference/envs.py"
    utils = "spyre_inference/custom_ops/utils.py"
    trees = [
        {"name": "up-old", "repository": UP, "commit": C1, "branch": "main", "about": "old",
         "files": [_entry(UP, C1, envs, "11"), _entry(UP, C1, bucketer, "12"),
                   _entry(UP, None, utils, "99", "known by id only")]},
        {"name": "up-new", "repository": UP, "commit": C2, "branch": "main", "about": "new",
         "files": [_entry(UP, C2, envs, "21"), _entry(UP, C1, bucketer, "12", "not at C2")]},
        {"name": "fork", "repository": FORK, "commit": C3, "branch": "fork", "about": "fork",
         "files": [_entry(UP, C2, envs, "21", "deduped"), _entry(FORK, C3, bucketer, "31")]},
    ]
    path = tmp_path / "trees.json"
    path.write_text(json.dumps({"format": 1, "trees": trees}))
    return path


def _files(tmp_path: Path, skip=(), override=None) -> Path:
    root = tmp_path / "files"
    ids = {(UP, None, "spyre_inference/custom_ops/utils.py"): "99"}
    for key, text in FILES.items():
        if key in skip:
            continue
        repo, commit, path = key
        folder = commit or f"id-{ids[key]}"
        target = root / repo.replace("/", "+") / folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((override or {}).get(key, text), encoding="utf-8")
    return root


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def test_each_tree_is_one_tagged_commit_holding_exactly_its_files(tmp_path):
    out = tmp_path / "si"
    done = _run("--recipe", str(_recipe(tmp_path)), "--files", str(_files(tmp_path)),
                "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "built 3 trees" in done.stdout
    assert _git(out, "ls-tree", "-r", "--name-only", "up-new").split() == [
        "spyre_inference/envs.py", "spyre_inference/v1/attention/spyre_attn_bucketer.py"]
    assert _git(out, "show", "up-new:spyre_inference/envs.py") == "LAYOUT = 'head_major'\n"
    assert _git(out, "show", "up-old:spyre_inference/custom_ops/utils.py").startswith("def")
    assert _git(out, "show", "fork:spyre_inference/v1/attention/spyre_attn_bucketer.py") == \
        "BUCKETS = [1, 4]\n"
    # upstream in commit order on main, the fork on a branch of its own with no upstream parent
    assert _git(out, "rev-list", "--reverse", "main").split() == [
        _git(out, "rev-parse", t).strip() for t in ("up-old", "up-new")]
    assert _git(out, "rev-list", "fork").split() == [_git(out, "rev-parse", "fork").strip()]
    assert _git(out, "status", "--porcelain") == ""


def test_a_rebuild_from_the_same_files_gives_the_same_commits(tmp_path):
    recipe, files = _recipe(tmp_path), _files(tmp_path)
    first, second = (_run("--recipe", str(recipe), "--files", str(files),
                          "--out", str(tmp_path / name)) for name in ("a", "b"))
    assert first.returncode == second.returncode == 0
    assert first.stdout.replace(str(tmp_path / "a"), "") == \
        second.stdout.replace(str(tmp_path / "b"), "")


def test_files_are_read_from_a_clone_at_their_commit(tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    _git(clone, "init", "--quiet")
    path = "spyre_inference/envs.py"
    (clone / "spyre_inference").mkdir()
    (clone / path).write_text(FILES[(UP, C2, path)])
    _git(clone, "add", ".")
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "--quiet", "-m", "x"], check=True)
    sha = _git(clone, "rev-parse", "HEAD").strip()
    recipe = {"format": 1, "trees": [{
        "name": "up", "repository": UP, "commit": sha, "branch": "main", "about": "",
        "files": [{"path": path, "repository": UP, "commit": sha, "id": "1",
                   "chars": len(FILES[(UP, C2, path)])}]}]}
    (tmp_path / "r.json").write_text(json.dumps(recipe))
    done = _run("--recipe", str(tmp_path / "r.json"), "--clone", f"owner+si={clone}",
                "--out", str(tmp_path / "si"))
    assert done.returncode == 0, done.stderr
    assert _git(tmp_path / "si", "show", f"up:{path}") == FILES[(UP, C2, path)]


def test_a_missing_file_is_one_line_exit_2_and_nothing_built(tmp_path):
    missing = (FORK, C3, "spyre_inference/v1/attention/spyre_attn_bucketer.py")
    out = tmp_path / "si"
    done = _run("--recipe", str(_recipe(tmp_path)), "--files",
                str(_files(tmp_path, skip={missing})), "--out", str(out))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "fork: missing spyre_inference/v1/attention/spyre_attn_bucketer.py" \
        " (id 31)" in lines[0], done.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["files", "trees.json"]


def test_a_wrong_length_file_is_one_line_exit_2(tmp_path):
    key = (UP, C1, "spyre_inference/envs.py")
    done = _run("--recipe", str(_recipe(tmp_path)), "--files",
                str(_files(tmp_path, override={key: FILES[key] + "# edited\n"})),
                "--out", str(tmp_path / "si"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"up-old: spyre_inference/envs.py (id 11) has {len(FILES[key]) + 9} characters, " \
        f"the recipe says {len(FILES[key])}" in lines[0]
    assert not (tmp_path / "si").exists()


def test_a_non_empty_output_folder_is_refused(tmp_path):
    out = tmp_path / "si"
    out.mkdir()
    (out / "keep").write_text("mine")
    done = _run("--recipe", str(_recipe(tmp_path)), "--files", str(_files(tmp_path)),
                "--out", str(out))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_help_says_where_the_files_come_from():
    done = _run("--help")
    assert done.returncode == 0
    assert "<owner>+<repo>/<40-hex commit>/<path>" in done.stdout
    assert "git show <commit>:<path>" in done.stdout


def test_the_committed_recipe_names_every_file_and_says_why_it_was_borrowed():
    doc = json.loads(RECIPE.read_text(encoding="utf-8"))
    assert doc["trees"]
    for tree in doc["trees"]:
        assert tree["branch"] and len(tree["commit"]) == 40
        paths = [e["path"] for e in tree["files"]]
        assert len(paths) == len(set(paths)), tree["name"]
        for entry in tree["files"]:
            assert entry["chars"] > 0 and entry["id"].isdigit()
            assert entry["commit"] is None or len(entry["commit"]) == 40
            own = (entry["repository"], entry["commit"]) == (tree["repository"], tree["commit"])
            assert own or entry.get("why"), (tree["name"], entry["path"])
