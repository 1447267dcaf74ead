"""Create or update ONE sticky comment on a GitHub pull request, through GitHub's REST API.

Why plain REST over urllib3 rather than PyGithub: we call five endpoints, and the part that matters
is the retry policy, which has to be ours either way. A POST that fails ambiguously (a 502 or a
dropped connection after GitHub may already have stored the comment) must not simply be re-sent:
we re-list the comments and only post again when ours is not there. PyGithub's retries (a urllib3
``Retry`` subclass) cannot re-list between attempts, sleep with ``time.sleep`` (tests would wait for
real) and it brings PyJWT, PyNaCl and cryptography along. urllib3 is the well-kept HTTP client
underneath requests and PyGithub alike; we use it with its own retries off and one explicit loop:

- 5xx, connection errors, timeouts: exponential backoff with jitter, bounded attempts and waits;
- 403/429 rate limits (primary: ``X-RateLimit-Remaining: 0``; secondary: a rate-limit message or
  ``Retry-After``): wait what GitHub asks (``Retry-After``, ``X-RateLimit-Reset``) within a cap,
  else a minute as GitHub advises, and give up with a clear message past the cap;
- 401, other 403s, 404, 422: no retry, one line naming the repository and the PR (``PublishError``,
  a HarnessError: the CLI prints it and exits 2). The token never appears in a message or a log.

Which comment is ours: a comment with our marker line (see ``harness.report.marker``) whose author
is the token's own account (``GET /user``). Installation tokens cannot read ``/user``; then the
author must be ``github-actions[bot]`` (the Actions ``GITHUB_TOKEN``'s account) and a Bot, unless
``author=`` names the account (a GitHub App's ``<slug>[bot]``). Another bot's marked comment, or
a person's quoting the marker, is never edited.

Which PR: the caller can bind the post to the PR's head repository, branch and commit
(``expect_head_*``): a result computed elsewhere (an untrusted workflow) names its PR only by
number, and two PRs can share a head commit.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from urllib.parse import urlencode, urlsplit

import urllib3

from harness import __version__
from harness.errors import HarnessError
from harness.report.fit import GITHUB_BODY_LIMIT
from harness.report.marker import DEFAULT_KEY, has_marker, with_marker

TOKEN_VARS = ("SPYRE_BENCH_GITHUB_TOKEN", "GITHUB_TOKEN")
API_URL_VAR = "GITHUB_API_URL"
DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
PER_PAGE = 100

_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: The account behind Actions' GITHUB_TOKEN (an installation token cannot read /user).
ACTIONS_LOGIN = "github-actions[bot]"
_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="([^"]*)"')


class PublishError(HarnessError):
    """GitHub refused or could not be reached; ``status`` is the HTTP status of a refusal."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def token_from_env(environ=os.environ) -> str:
    """The first non-empty of SPYRE_BENCH_GITHUB_TOKEN, GITHUB_TOKEN (the specific one wins)."""
    for name in TOKEN_VARS:
        token = environ.get(name, "").strip()
        if token:
            if not all(33 <= ord(c) < 127 for c in token):
                raise PublishError(f"{name} holds characters an HTTP header cannot carry")
            return token
    raise PublishError(f"no GitHub token: set {' or '.join(TOKEN_VARS)}")


def api_url_from_env(environ=os.environ) -> str:
    """GITHUB_API_URL (set by Actions, and on GitHub Enterprise Server) or api.github.com."""
    return environ.get(API_URL_VAR, "").strip() or DEFAULT_API_URL


def check_repo(repo: str) -> str:
    if not _REPO.fullmatch(repo) or repo.split("/")[1] in (".", ".."):
        raise PublishError(f"repository {repo!r}: expected OWNER/NAME")
    return repo


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying one request: bounded attempts, bounded single waits.

    Backoff doubles from ``backoff`` up to ``max_backoff`` with "equal jitter" (between half and all
    of it), so concurrent clients spread out but never retry early. A server-advised wait longer
    than ``max_wait`` is not waited for: the call fails with a message saying when to try again.
    """

    attempts: int = 6
    backoff: float = 1.0
    max_backoff: float = 30.0
    max_wait: float = 300.0
    secondary_wait: float = 60.0

    def backoff_for(self, attempt: int, rand: Callable[[], float]) -> float:
        full = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        return full / 2 + rand() * full / 2


@dataclass(frozen=True)
class Outcome:
    """What ``upsert_comment`` did: ``created``, ``updated`` or ``unchanged``."""

    action: str
    comment_id: int
    url: str
    notes: list[str] = field(default_factory=list)


class _Retry(Exception):
    """One attempt failed in a way worth retrying after ``delay`` seconds."""

    def __init__(self, reason: str, delay: float):
        super().__init__(reason)
        self.reason, self.delay = reason, delay


def _log_stderr(message: str) -> None:
    print(f"spyre-bench: {message}", file=sys.stderr, flush=True)


class GitHub:
    """A small REST client for one GitHub (github.com or an Enterprise Server API base URL)."""

    def __init__(self, token: str, api_url: str = DEFAULT_API_URL, *,
                 policy: RetryPolicy = RetryPolicy(), sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time, rand: Callable[[], float] = random.random,
                 log: Callable[[str], None] = _log_stderr, timeout: float = 30.0):
        parts = urlsplit(api_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise PublishError(f"{API_URL_VAR} {api_url!r}: expected an http(s) URL such as "
                               f"{DEFAULT_API_URL}")
        self._origin = (parts.scheme, parts.netloc.lower())
        self._base = f"{parts.scheme}://{parts.netloc}{parts.path}"
        self._token = token
        self.policy, self._sleep, self._clock, self._rand, self._log = policy, sleep, clock, rand, log
        self._http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=min(10.0, timeout), read=timeout),
            headers={"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
                     "User-Agent": f"spyre-bench/{__version__}"})

    # -- one request ---------------------------------------------------------------------------

    def _once(self, method: str, url: str, payload: dict | None, what: str, attempt: int = 1):
        """One HTTP exchange: (data, headers) on 2xx; _Retry when worth retrying; else PublishError."""
        url = url if "://" in url else self._base + url
        headers = {"Authorization": f"Bearer {self._token}"}
        body = None
        if payload is not None:
            body = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json; charset=utf-8"
        try:
            resp = self._http.request(method, url, body=body, headers=headers, retries=False,
                                      redirect=False, preload_content=True)
        except urllib3.exceptions.LocationParseError:
            raise PublishError(f"bad GitHub API URL for {what}") from None
        except urllib3.exceptions.HTTPError as exc:  # refused, reset, timed out, TLS...
            raise _Retry(_connection_problem(exc), self.policy.backoff_for(attempt, self._rand)) from None
        status = resp.status
        if 200 <= status < 300:
            return _json(resp.data, what), resp.headers
        message = _message(resp.data, self._token)
        wait = self._rate_limit_wait(status, resp.headers, message, attempt, what)
        if wait is not None:
            raise _Retry(f"{status} rate limited", wait)
        if status >= 500 and status != 501:
            raise _Retry(f"{status} {resp.reason or ''}".strip(),
                         self.policy.backoff_for(attempt, self._rand))
        raise _refusal(status, message, what)

    def _rate_limit_wait(self, status, headers, message, attempt, what) -> float | None:
        if status not in (403, 429):
            return None
        if headers.get("retry-after"):
            wait = _retry_after(headers["retry-after"], self._clock())
        elif headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
            try:
                wait = float(headers["x-ratelimit-reset"]) - self._clock() + 1.0
            except ValueError:
                wait = self.policy.secondary_wait
        elif status == 429 or "rate limit" in message.lower():
            wait = max(self.policy.secondary_wait, self.policy.backoff_for(attempt, self._rand))
        else:
            return None
        wait = max(wait, 0.0)
        if wait > self.policy.max_wait:
            raise PublishError(f"GitHub rate limit reached for {what}: it asks to wait {wait:.0f} s, "
                               f"more than the {self.policy.max_wait:.0f} s allowed; try again later")
        return wait

    def _call(self, method: str, url: str, payload: dict | None = None, *, what: str):
        """A request that is safe to repeat (GET, PATCH), retried under the policy."""
        for attempt in range(1, self.policy.attempts + 1):
            try:
                return self._once(method, url, payload, what, attempt)
            except _Retry as r:
                self._wait(r, attempt, f"{method} for {what}")

    def _wait(self, r: _Retry, attempt: int, doing: str) -> None:
        if attempt >= self.policy.attempts:
            raise PublishError(f"GitHub did not complete {doing} after {attempt} attempts "
                               f"(last: {r.reason})")
        self._log(f"GitHub: {r.reason} on {doing}; retrying in {r.delay:.1f} s "
                  f"(attempt {attempt + 1} of {self.policy.attempts})")
        self._sleep(r.delay)

    def _pages(self, path: str, what: str) -> Iterator[dict]:
        """Every item of a paginated list, following ``Link: rel="next"`` on the API's own host."""
        url: str | None = f"{self._base}{path}?{urlencode({'per_page': PER_PAGE})}"
        seen: set[str] = set()
        while url:
            if url in seen:
                raise PublishError(f"GitHub's pagination loops while listing {what}")
            seen.add(url)
            items, headers = self._call("GET", url, what=what)
            if not isinstance(items, list):
                raise PublishError(f"GitHub answered a list request for {what} with something else")
            yield from items
            url = _next_link(headers.get("link", ""))
            if url and (urlsplit(url).scheme, urlsplit(url).netloc.lower()) != self._origin:
                raise PublishError(f"GitHub's next-page link for {what} points to another host; "
                                   "not sending the token there")

    # -- the operations --------------------------------------------------------------------------

    def login(self, what: str) -> str | None:
        """The token's own login, or None for installation tokens (they cannot read /user)."""
        try:
            user, _ = self._call("GET", "/user", what=what)
        except PublishError as exc:
            if exc.status == 403:
                return None
            raise
        return user.get("login")

    def pull_request(self, repo: str, number: int) -> dict:
        what = f"{check_repo(repo)} PR #{number}"
        pr, _ = self._call("GET", f"/repos/{repo}/pulls/{number}", what=what)
        return pr

    def comments(self, repo: str, number: int) -> Iterator[dict]:
        return self._pages(f"/repos/{check_repo(repo)}/issues/{number}/comments",
                           f"{repo} PR #{number}")

    def upsert_comment(self, repo: str, number: int, body: str, *, key: str = DEFAULT_KEY,
                       expect_head_sha: str | None = None, author: str | None = None,
                       expect_head_repo: str | None = None,
                       expect_head_branch: str | None = None) -> Outcome:
        """Create this key's sticky comment on the PR, or update it in place; never a second one.

        ``expect_head_sha``/``_repo``/``_branch``: refuse unless the PR's head is that commit of
        that repository's branch (binds a result computed elsewhere, e.g. in an untrusted
        workflow, to the one PR it was computed for).
        """
        check_repo(repo)
        if not isinstance(number, int) or number < 1:
            raise PublishError(f"PR number {number!r}: expected a positive integer")
        what = f"{repo} PR #{number}"
        if expect_head_sha is not None and not _SHA.fullmatch(expect_head_sha):
            raise PublishError(f"expected head {expect_head_sha!r} is not a full commit SHA")
        if not body.strip():
            raise PublishError(f"comment for {what} is empty")
        body = with_marker(body, key)
        if len(body) > GITHUB_BODY_LIMIT:
            raise PublishError(f"comment for {what} is {len(body):,} characters, over GitHub's "
                               f"{GITHUB_BODY_LIMIT:,}; cut it with fit_body()")
        pr = self.pull_request(repo, number)
        head = pr.get("head") or {}
        if expect_head_sha is not None and head.get("sha") != expect_head_sha:
            raise PublishError(f"{what} head is {head.get('sha')}, not {expect_head_sha}: the "
                               "result is for another commit (stale, or not this PR's); not posting")
        head_repo = ((head.get("repo") or {}).get("full_name") or "")
        if expect_head_repo is not None and head_repo.lower() != expect_head_repo.lower():
            raise PublishError(f"{what} comes from {head_repo or 'a deleted repository'}, not "
                               f"{expect_head_repo}: the result is not this PR's; not posting")
        if expect_head_branch is not None and head.get("ref") != expect_head_branch:
            raise PublishError(f"{what} head branch is not the branch the result was computed "
                               "for; not posting")
        login = author or self.login(what)
        if login:
            ours = lambda u: (u.get("login") or "").lower() == login.lower()  # noqa: E731
        else:
            ours = lambda u: u.get("login") == ACTIONS_LOGIN and u.get("type") == "Bot"  # noqa: E731
        notes: list[str] = []
        posted = False  # a POST whose outcome we could not see
        for attempt in range(1, self.policy.attempts + 1):
            found = [c for c in self.comments(repo, number)
                     if ours(c.get("user") or {}) and has_marker(c.get("body") or "", key)]
            if found:
                target = min(found, key=lambda c: c["id"])
                if len(found) > 1:
                    notes.append(f"{len(found)} sticky comments found; updated the oldest "
                                 f"({target['id']})")
                if target.get("body") == body:
                    return Outcome("created" if posted else "unchanged", target["id"],
                                   target.get("html_url", ""), notes)
                try:
                    data, _ = self._call("PATCH", f"/repos/{repo}/issues/comments/{target['id']}",
                                         {"body": body}, what=what)
                except PublishError as exc:
                    if exc.status != 404:
                        raise
                    notes.append(f"comment {target['id']} vanished before the update; re-listing")
                    continue  # deleted since we listed it: list again, then create
                return Outcome("updated", data["id"], data.get("html_url", ""), notes)
            try:
                data, _ = self._once("POST", f"/repos/{repo}/issues/{number}/comments",
                                     {"body": body}, what, attempt)
            except _Retry as r:
                # GitHub may have stored it anyway (a 502 after the write): list before posting again.
                posted = True
                self._wait(r, attempt, f"creating the comment on {what} (re-listing before any retry)")
                continue
            return Outcome("created", data["id"], data.get("html_url", ""), notes)
        raise PublishError(f"could not create the comment on {what}")  # pragma: no cover (loop bound)


# -- helpers ---------------------------------------------------------------------------------------

def _scrub(text: str, token: str) -> str:
    """One short line, with the token (should GitHub ever echo it) removed."""
    text = " ".join(str(text).split())
    if token:
        text = text.replace(token, "***")
    return text[:200]


def _connection_problem(exc: Exception) -> str:
    """A name for what went wrong on the wire (never the exception text: it can carry the URL)."""
    e = urllib3.exceptions
    for kind, words in ((e.NewConnectionError, "no connection"), (e.ConnectTimeoutError, "connect timeout"),
                        (e.ReadTimeoutError, "read timeout"), (e.SSLError, "TLS error"),
                        (e.ProtocolError, "connection dropped")):
        if isinstance(exc, kind):
            return words
    return f"connection error ({type(exc).__name__})"


def _message(data: bytes, token: str) -> str:
    try:
        doc = json.loads(data or b"{}")
        text = str(doc.get("message", "")) if isinstance(doc, dict) else ""
        details = [str(e["message"]) for e in (doc.get("errors") or []) if isinstance(e, dict)
                   and e.get("message")] if isinstance(doc, dict) else []
        text = ": ".join([text] + details) if details else text
    except (ValueError, UnicodeDecodeError):
        text = data[:200].decode("utf-8", "replace") if data else ""
    return _scrub(text, token)


def _json(data: bytes, what: str):
    if not data:
        return {}
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise PublishError(f"GitHub answered a request for {what} with something that is not JSON") from None


def _refusal(status: int, message: str, what: str) -> PublishError:
    said = f": {message}" if message else ""
    if status == 401:
        text = (f"GitHub rejected the token (401{said}) for {what}; set "
                f"{' or '.join(TOKEN_VARS)} to a valid token")
    elif status == 403:
        text = (f"GitHub refused access (403{said}) to {what}; the token needs write access to pull "
                "requests (Actions: permissions: pull-requests: write)")
    elif status == 404:
        text = f"not found (404{said}): {what} does not exist or the token cannot see it"
    elif status == 422:
        text = f"GitHub refused the comment on {what} (422{said})"
    elif 300 <= status < 400:
        text = f"GitHub answered {status}{said} for {what} (moved? use the repository's current name)"
    else:
        text = f"GitHub answered {status}{said} for {what}"
    return PublishError(text, status)


def _retry_after(value: str, now: float) -> float:
    """Retry-After is seconds or an HTTP date."""
    try:
        return float(value)
    except ValueError:
        try:
            return parsedate_to_datetime(value).timestamp() - now
        except (TypeError, ValueError):
            return 60.0


def _next_link(header: str) -> str | None:
    for url, rel in _LINK.findall(header):
        if "next" in rel.split():
            return url
    return None
