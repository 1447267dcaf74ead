"""A local stand-in for the GitHub Actions runner: runs a workflow job's steps as written.

``run:`` steps run in order in ``bash -e`` (``shell: bash`` adds ``-o pipefail``) with the env a
runner gives them (``GITHUB_WORKSPACE``, ``RUNNER_TEMP``, ``GITHUB_OUTPUT``, ``GITHUB_API_URL``,
the workflow's, job's and step's ``env:`` with their ``${{ }}`` expressions evaluated). ``uses:``
steps are replaced by their documented effect:

- ``actions/checkout``: a local clone of the repository (``repository:``, default the event's) at
  ``ref:`` (default the event's commit) into ``path:``, no credentials kept;
- ``actions/setup-python``: ``python`` / ``python3`` on PATH, a Python 3.11 (this interpreter's
  base); its ``python -m venv`` makes a virtual environment without pip's bootstrap whose
  ``pip`` works offline against a package cache, this test environment's site-packages seen
  through a ``.pth`` file (spyre-bench itself left out: the steps install it). It stands for a
  runner image with the wheels cached; pip still resolves and installs what the steps ask for;
- ``actions/upload-artifact`` / ``actions/download-artifact``: a folder per artifact name, hidden
  files left out unless ``include-hidden-files`` (as upload-artifact v4.4+ does); a
  ``pattern:`` download puts each matching artifact in ``path/<name>/``, except that a pattern
  matching one artifact extracts it flat into ``path`` (as download-artifact v4 does), and none is
  no error.

Expressions (``if:``, ``${{ }}``) are evaluated by a small interpreter of the subset GitHub's
expression language these workflows use: contexts, ``== != && || !``, parentheses, string
literals and ``cancelled() always() success() failure() contains() startsWith() fromJSON()``.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# -- expressions -------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>&&|\|\||==|!=|"
                    r"[!().,\[\]])|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot parse expression at {text[pos:]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def _eq(a, b) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()   # GitHub compares strings ignoring case
    return a == b


def _truthy(v) -> bool:
    return v not in (None, False, 0, "")


class _Expr:
    def __init__(self, text: str, contexts: dict, functions: dict):
        self.toks = _tokens(text)
        self.i = 0
        self.contexts, self.functions = contexts, functions

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        value = self.or_()
        if self.i != len(self.toks):
            raise ValueError(f"unexpected {self.peek()[1]!r}")
        return value

    def or_(self):
        value = self.and_()
        while self.peek()[1] == "||":
            self.take()
            right = self.and_()
            value = value if _truthy(value) else right
        return value

    def and_(self):
        value = self.not_()
        while self.peek()[1] == "&&":
            self.take()
            right = self.not_()
            value = right if _truthy(value) else value
        return value

    def not_(self):
        if self.peek()[1] == "!":
            self.take()
            return not _truthy(self.not_())
        return self.cmp()

    def cmp(self):
        value = self.primary()
        while self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            right = self.primary()
            value = _eq(value, right) if op == "==" else not _eq(value, right)
        return value

    def primary(self):
        kind, tok = self.take()
        if tok == "(":
            value = self.or_()
            self.take(")")
            return value
        if kind == "str":
            return tok[1:-1].replace("''", "'")
        if kind == "num":
            return float(tok) if "." in tok else int(tok)
        if tok in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[tok]
        if kind != "name":
            raise ValueError(f"unexpected {tok!r}")
        if self.peek()[1] == "(":
            self.take("(")
            args = []
            while self.peek()[1] != ")":
                args.append(self.or_())
                if self.peek()[1] == ",":
                    self.take(",")
            self.take(")")
            return self.functions[tok](*args)
        value = self.contexts.get(tok)
        while self.peek()[1] in (".", "["):
            if self.take()[1] == ".":
                key = self.take()[1]
            else:
                key = self.or_()
                self.take("]")
            value = value.get(key) if isinstance(value, dict) else None
        return value


def _contains(haystack, needle) -> bool:
    if isinstance(haystack, list):
        return any(_eq(x, needle) for x in haystack)
    return str(needle).lower() in str(haystack or "").lower()


def evaluate(text: str, contexts: dict, status: dict | None = None):
    status = status or {"ok": True}
    functions = {"cancelled": lambda: False, "always": lambda: True,
                 "success": lambda: status["ok"], "failure": lambda: not status["ok"],
                 "contains": _contains, "fromJSON": json.loads,
                 "startsWith": lambda a, b: str(a or "").lower().startswith(str(b or "").lower())}
    return _Expr(text, contexts, functions).parse()


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def interpolate(text, contexts: dict, status: dict | None = None):
    if not isinstance(text, str):
        return text
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: _text(evaluate(m.group(1), contexts, status)), text)


def condition(text, contexts: dict, status: dict) -> bool:
    """A step's or job's ``if:`` (``success()`` unless it names a status function)."""
    if text is None:
        return status["ok"]
    text = str(text).strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    if not re.search(r"\b(always|cancelled|success|failure)\(", text):
        text = f"success() && ({text})"
    return _truthy(evaluate(text, contexts, status))


# -- the runner --------------------------------------------------------------------------------

_PYTHON_SHIM = """#!{base}
# python 3.11 as actions/setup-python leaves it, on a runner whose package cache is {cache}:
# `python -m venv DIR` makes an environment that sees the cache (no pip download, no bootstrap).
import os, sys, venv
args = sys.argv[1:]
if args[:2] == ["-m", "venv"]:
    opts = [a for a in args[2:] if a.startswith("-")]
    [target] = [a for a in args[2:] if not a.startswith("-")]
    venv.EnvBuilder(with_pip=False, symlinks=True, clear="--clear" in opts,
                    system_site_packages="--system-site-packages" in opts).create(target)
    site = os.path.join(target, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    with open(os.path.join(site, "zz-runner-cache.pth"), "w") as f:
        f.write("import site; site.addsitedir({cache!r})\\n")
    pip = os.path.join(target, "bin", "pip")
    with open(pip, "w") as f:
        f.write("#!" + os.path.join(os.path.abspath(target), "bin", "python") + "\\n"
                "import sys\\nfrom pip._internal.cli.main import main\\nsys.exit(main())\\n")
    os.chmod(pip, 0o755)
    sys.exit(0)
os.execv({base!r}, [{base!r}, *args])
"""


def package_cache(dest: Path) -> Path:
    """This environment's site-packages as a runner's package cache, spyre-bench left out."""
    if dest.exists():
        return dest
    dest.mkdir(parents=True)
    purelib = Path(sysconfig.get_paths()["purelib"])
    for entry in purelib.iterdir():
        if entry.name.startswith(("__editable__", "spyre_bench")) or entry.name == "harness":
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


@dataclass
class Runner:
    """One machine's worth of state for running jobs: where repositories and artifacts are."""

    root: Path
    #: "owner/name" -> local repository a checkout clones.
    repositories: dict[str, Path]
    #: Extra environment every step sees (e.g. GITHUB_API_URL of the fake GitHub).
    env: dict[str, str] = field(default_factory=dict)
    artifacts: dict[tuple[str, str], Path] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.root.mkdir(parents=True, exist_ok=True)
        self.cache = package_cache(self.root / "package-cache")
        self.tools = self.root / "tools"
        self.tools.mkdir(exist_ok=True)
        (self.root / "home").mkdir(exist_ok=True)
        base = getattr(sys, "_base_executable", sys.executable)
        shim = self.tools / "python"
        shim.write_text(_PYTHON_SHIM.format(base=base, cache=str(self.cache)))
        shim.chmod(0o755)
        (self.tools / "python3").symlink_to(shim)
        self._jobs = 0

    def run_job(self, workflow: Path, job_id: str, github: dict, *, run_id: str,
                env_overrides: dict | None = None, needs: dict | None = None,
                vars: dict | None = None, inputs: dict | None = None) -> dict:
        """Run one job; returns {"result": success|failure|skipped, "steps": {id: outputs},
        "workspace": Path, "outputs": job outputs}."""
        wf = yaml.safe_load(workflow.read_text())
        job = wf["jobs"][job_id]
        self._jobs += 1
        home = self.root / f"job-{self._jobs}-{job_id}"
        workspace, temp = home / "work", home / "temp"
        workspace.mkdir(parents=True)
        temp.mkdir()
        contexts = {"github": github, "runner": {"temp": str(temp), "os": "Linux"},
                    "env": {}, "steps": {}, "needs": needs or {}, "vars": vars or {},
                    "matrix": {}, "inputs": inputs or {}}
        status = {"ok": True}
        wf_env = {k: interpolate(v, contexts) for k, v in (wf.get("env") or {}).items()}
        wf_env.update(env_overrides or {})
        contexts["env"] = dict(wf_env)
        if not condition(job.get("if"), contexts, status):
            return {"result": "skipped", "steps": {}, "workspace": workspace, "outputs": {}}
        job_env = {**wf_env, **{k: interpolate(v, contexts) for k, v in
                                (job.get("env") or {}).items()}}
        for step in job.get("steps", []):
            contexts["env"] = dict(job_env)
            if not condition(step.get("if"), contexts, status):
                continue
            env = {**job_env, **{k: interpolate(v, contexts, status)
                                 for k, v in (step.get("env") or {}).items()}}
            with_ = {k: interpolate(v, contexts, status) for k, v in (step.get("with") or {}).items()}
            outputs: dict[str, str] = {}
            ok = self._step(step, with_, env, workspace, temp, github, outputs, run_id)
            if step.get("id"):
                contexts["steps"][step["id"]] = {"outputs": outputs,
                                                 "outcome": "success" if ok else "failure"}
            if not ok and not step.get("continue-on-error"):
                status["ok"] = False
        job_outputs = {k: interpolate(v, contexts, status) for k, v in
                       (job.get("outputs") or {}).items()}
        return {"result": "success" if status["ok"] else "failure", "steps": contexts["steps"],
                "workspace": workspace, "outputs": job_outputs}

    # -- one step ------------------------------------------------------------------------------

    def _step(self, step, with_, env, workspace, temp, github, outputs, run_id) -> bool:
        name = step.get("name") or step.get("uses") or step.get("run", "")[:40]
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout@"):
            return self._checkout(with_, workspace, github)
        if uses.startswith("actions/setup-python@"):
            return True   # the shim is on PATH for every step (see _bash)
        if uses.startswith("actions/upload-artifact@"):
            src = workspace / with_["path"]
            hidden = with_.get("include-hidden-files") not in (True, "true")
            skip = shutil.ignore_patterns(".*") if hidden else None   # v4.4+: dotfiles left out
            files = [p for p in src.rglob("*") if p.is_file() and not (
                hidden and any(part.startswith(".") for part in p.relative_to(src).parts))
                     ] if src.exists() else []
            if not files and with_.get("if-no-files-found", "warn") == "error":
                self.log.append(f"{name}: no files")
                return False
            dest = self.root / "artifacts" / run_id / with_["name"]
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest, ignore=skip) if files else dest.mkdir(parents=True)
            self.artifacts[(run_id, with_["name"])] = dest
            return True
        if uses.startswith("actions/cache@"):
            # a miss: this runner keeps HOME (where the cached folders live) between its jobs,
            # which is what a hit would restore
            outputs["cache-hit"] = "false"
            return True
        if uses.startswith("actions/download-artifact@") and "pattern" in with_:
            found = sorted(n for (run, n) in self.artifacts
                           if run == run_id and fnmatch.fnmatchcase(n, with_["pattern"]))
            dest = workspace / (with_.get("path") or ".")
            flat = len(found) == 1 or with_.get("merge-multiple") in (True, "true")
            for n in found:
                shutil.copytree(self.artifacts[(run_id, n)], dest if flat else dest / n,
                                dirs_exist_ok=True)
            return True
        if uses.startswith("actions/download-artifact@"):
            source = self.artifacts.get((str(with_.get("run-id") or run_id), with_["name"]))
            if source is None:
                self.log.append(f"{name}: artifact {with_['name']} not found")
                return False
            shutil.copytree(source, workspace / (with_.get("path") or "."), dirs_exist_ok=True)
            return True
        if uses:
            raise NotImplementedError(f"no stand-in for {uses}")
        return self._bash(step, env, workspace, temp, outputs, name)

    def _checkout(self, with_, workspace, github) -> bool:
        repo = with_.get("repository") or github["repository"]
        ref = with_.get("ref") or github.get("sha")
        dest = workspace / with_.get("path", ".")
        subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout",
                        str(self.repositories[repo]), str(dest)], check=True)
        subprocess.run(["git", "-C", str(dest), "-c", "advice.detachedHead=false", "checkout",
                        "--quiet", "--detach", ref], check=True)
        if with_.get("persist-credentials") is False:
            subprocess.run(["git", "-C", str(dest), "remote", "remove", "origin"], check=True)
        return True

    def _bash(self, step, env, workspace, temp, outputs, name) -> bool:
        output = temp / f"output-{len(self.log)}"
        output.write_text("")
        script = temp / "step.sh"
        script.write_text(step["run"])
        shell = step.get("shell")
        flags = ["--noprofile", "--norc", "-eo", "pipefail"] if shell == "bash" else ["-e"]
        full_env = {"PATH": f"{self.tools}:/usr/local/bin:/usr/bin:/bin",
                    "HOME": str(self.root / "home"), "LANG": "C.UTF-8",
                    "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp),
                    "GITHUB_OUTPUT": str(output), "GITHUB_ACTIONS": "true", "CI": "true",
                    "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1", **self.env,
                    **{k: _text(v) for k, v in env.items()}}
        started = time.monotonic()
        if shell not in (None, "bash"):
            raise NotImplementedError(f"{name}: shell {shell!r}")
        cwd = workspace / step.get("working-directory", ".")
        proc = subprocess.run(["bash", *flags, str(script)], cwd=cwd, env=full_env,
                              capture_output=True, text=True)
        self.log.append(f"--- {name}: exit {proc.returncode} in {time.monotonic() - started:.1f} s"
                        f"\n{proc.stdout}{proc.stderr}")
        for line in output.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                outputs[key] = value
        return proc.returncode == 0

    def transcript(self) -> str:
        return "\n".join(self.log)
