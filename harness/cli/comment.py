"""``spyre-bench comment``: print a PR comment's body, or post it as the PR's sticky comment."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from harness.cli.common import HISTORY_DIR
from harness.errors import HarnessError
from harness.report.fit import DEFAULT_POINTER, fit_body
from harness.report.marker import DEFAULT_KEY, marker, with_marker

EPILOG = """\
token (only --post uses one): SPYRE_BENCH_GITHUB_TOKEN, else GITHUB_TOKEN. In GitHub Actions pass
the job's token (env: GITHUB_TOKEN: ${{ github.token }}) with `permissions: pull-requests: write`.
GITHUB_API_URL selects the API (Actions and GitHub Enterprise Server set it; default
https://api.github.com). The token is never printed.

trusted rendering: --comparison-json reads the comparison document that `spyre-bench compare
--json` wrote (in a job that ran PR code), validates it against a strict schema and renders the
comment here; nothing in the file is posted as markdown. --compare-error reads the one error line
compare printed when it stopped before comparing (its first 16 KiB), shown escaped. --body-file
posts markdown as given: use it only for text this job wrote itself.

one comment per PR and key: the hidden marker line (<!-- spyre-bench:KEY v1 -->) is added here
(marker-like text inside the body is removed); --post updates the comment with that marker
written by the token's account (Actions' token, which cannot name its account: by
github-actions[bot]; other apps: --author), else creates it.
GitHub 5xx, rate limits and dropped connections are retried with backoff; a failed create is
re-checked before it is sent again, so it is never duplicated.

exit codes:
  0  body printed; or the comment was created, updated, or was already up to date
  2  bad input (missing body or flags, unreadable file, a document that breaks the schema), or
     GitHub refused (401 bad token, 403 no access, 404 no such repository or PR, head not
     --expect-head-sha / -repo / -branch) or stayed unavailable after the retries

examples:
  spyre-bench comment --comparison-json comparison.json
  spyre-bench comment --compare-error compare-error.txt
  spyre-bench comment --body-file comment.md --post --repo torch-spyre/spyre-inference --pr 810
"""

_URL = re.compile(r"https?://[^\s<>()\[\]]+")
#: Of a --compare-error file, this much is read (the workflows hand over one line of it).
ERROR_BYTES = 16 << 10


def register(sub) -> None:
    p = sub.add_parser(
        "comment", help="print a PR comment body, or create-or-update the sticky PR comment",
        description="Print the markdown body of the spyre-bench PR comment (marker added, cut to "
                    "GitHub's 65,536-character limit), or with --post create or update the one "
                    "sticky comment on a pull request through GitHub's REST API.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("body (one source)")
    src.add_argument("--comparison-json", metavar="FILE",
                     help="a comparison document (spyre-bench compare --json): validated, then "
                          "rendered here (what the privileged PR workflow posts)")
    src.add_argument("--compare-error", metavar="FILE",
                     help="the error line `spyre-bench compare` printed when it stopped before "
                          "comparing (a subject that does not load): rendered here, escaped, as "
                          "the failure the comment leads with")
    src.add_argument("--body-file", metavar="FILE",
                     help="the comment's markdown, UTF-8; '-' reads standard input")
    src.add_argument("commits", nargs="*", metavar="BASE HEAD",
                     help="render the comparison of two commits' stored results instead")
    src.add_argument("--results-dir", type=Path, default=HISTORY_DIR,
                     help="stored results for BASE HEAD (default %(default)s, where `run` "
                          "writes)")
    src.add_argument("--machine", help="machine to compare on, when several measured both")
    src.add_argument("--artifact-url", type=_url, metavar="URL",
                     help="where the full report lives; named in the note when the body is cut")
    post = p.add_argument_group("posting")
    post.add_argument("--post", action="store_true",
                      help="create or update the sticky comment instead of printing the body")
    post.add_argument("--repo", metavar="OWNER/NAME", help="repository of the pull request")
    post.add_argument("--pr", type=_positive_int, metavar="N", help="pull request number")
    post.add_argument("--key", type=_key, default=DEFAULT_KEY,
                      help="which sticky comment: one per key and PR (default %(default)s; the "
                           "hardware run uses its own)")
    post.add_argument("--expect-head-sha", metavar="SHA",
                      help="post only if the PR's head commit is SHA (binds a result computed "
                           "elsewhere to the PR it was computed for)")
    post.add_argument("--expect-head-repo", metavar="OWNER/NAME",
                      help="post only if the PR's head branch lives in this repository")
    post.add_argument("--expect-head-branch", metavar="BRANCH",
                      help="post only if the PR's head branch has this name")
    post.add_argument("--author", metavar="LOGIN",
                      help="account whose marked comment is ours (default: the token's account)")
    from harness.outputs import checked_stdout
    p.set_defaults(run=checked_stdout(run))


def body_source(args) -> str:
    """The comment's markdown, from the one source the arguments name.

    ``--comparison-json`` (the document the PR workflow's untrusted job wrote: validated and
    rendered here), ``--body-file`` (markdown as is), or BASE HEAD: two commits' stored results
    compared and rendered here (what hardware runs post).
    """
    given = [args.comparison_json is not None, args.body_file is not None, bool(args.commits),
             args.compare_error is not None]
    if sum(given) > 1:
        raise HarnessError("give one of --comparison-json, --compare-error, --body-file or "
                           "BASE HEAD")
    from harness.report.markdown import render, render_failure
    if args.compare_error is not None:
        raw = read_bytes(args.compare_error, "--compare-error", limit=ERROR_BYTES)
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            raise HarnessError(f"--compare-error {args.compare_error}: empty")
        return render_failure(text, head_sha=args.expect_head_sha, run_url=args.artifact_url)
    if args.comparison_json is not None:
        from harness.report.schema import MAX_BYTES, load_document
        raw = read_bytes(args.comparison_json, "--comparison-json", limit=MAX_BYTES + 1)
        return render(load_document(raw), artifact_hint=_pointer(args))
    if args.body_file is not None:
        return read_body_file(args.body_file)
    if len(args.commits) == 2:
        from harness.analyze.comparison import as_document
        from harness.analyze.stored import compare_stored
        from harness.cli.common import warn
        from harness.store.history import load_history_quietly
        frame = load_history_quietly(args.results_dir, warn)
        return render(as_document(compare_stored(frame, *args.commits, machine=args.machine)),
                      artifact_hint=_pointer(args))
    if args.commits:
        raise HarnessError(f"expected two commits (BASE HEAD), got {len(args.commits)}")
    raise HarnessError("no comment body: give --comparison-json FILE, --compare-error FILE, "
                       "--body-file FILE (or - for standard input), or BASE HEAD commits with "
                       "stored results")


def _pointer(args) -> str:
    return (f"The comment was cut to fit GitHub's size limit; the full report: {args.artifact_url}"
            if args.artifact_url else DEFAULT_POINTER)


def read_bytes(path: str, flag: str, limit: int = -1) -> bytes:
    """The bytes of a file or of standard input ('-'), at most ``limit`` of them (a FIFO or
    /dev/zero ends there too)."""
    try:
        if path == "-":
            return sys.stdin.buffer.read(limit)
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError as exc:
        raise HarnessError(f"{flag} {path}: {exc.strerror or exc}") from None


def read_body_file(path: str) -> str:
    data = read_bytes(path, "--body-file")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"--body-file {path}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise HarnessError(f"--body-file {path}: empty")
    return text


def run(args) -> int:
    if args.post:
        missing = [flag for flag, value in (("--repo", args.repo), ("--pr", args.pr)) if not value]
        if missing:
            raise HarnessError(f"--post needs {' and '.join(missing)}")
    elif (args.repo or args.pr or args.expect_head_sha or args.author or args.expect_head_repo
          or args.expect_head_branch):
        raise HarnessError("--repo, --pr, --expect-head-* and --author only apply with --post")
    raw = with_marker(body_source(args), args.key)
    body = fit_body(raw, pointer_text=_pointer(args))
    if body != raw:
        print(f"spyre-bench: note: body cut from {len(raw):,} to {len(body):,} characters "
              "(GitHub's limit)", file=sys.stderr)
    if not args.post:
        sys.stdout.write(body if body.endswith("\n") else body + "\n")
        return 0
    from harness.publish.github import GitHub, api_url_from_env, token_from_env
    gh = GitHub(token_from_env(), api_url_from_env())
    outcome = gh.upsert_comment(args.repo, args.pr, body, key=args.key,
                                expect_head_sha=args.expect_head_sha, author=args.author,
                                expect_head_repo=args.expect_head_repo,
                                expect_head_branch=args.expect_head_branch)
    for note in outcome.notes:
        print(f"spyre-bench: note: {note}", file=sys.stderr)
    print(f"{outcome.action} comment {outcome.comment_id} on {args.repo} PR #{args.pr}: "
          f"{outcome.url}")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _key(text: str) -> str:
    try:
        marker(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _url(text: str) -> str:
    if not _URL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected an http(s) URL without spaces, got {text!r}")
    return text
