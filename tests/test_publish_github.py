"""The sticky-comment publisher against a real HTTP server on loopback (tests/fixtures/fake_github).

No mocks of the client: every test makes real HTTP requests. Waits go through an injected sleep
that records them, so the retry tests assert the exact waits and still take milliseconds.
"""

import socket

import pytest

from harness.publish.github import GitHub, PublishError, RetryPolicy
from harness.report.marker import has_marker, marker
from tests.fixtures.fake_github import FakeGitHub

REPO, PR = "torch-spyre/spyre-inference", 810
TOKEN = "ghp_TESTTOKEN0123456789abcdefSECRET"
NOW = 1_800_000_000.0
COMMENTS = r"/issues/810/comments$"


@pytest.fixture
def fake():
    with FakeGitHub() as gh:
        gh.add_account(TOKEN, "spyre-bench-bot", type="Bot")
        gh.add_pull(REPO, PR, head_sha="c" * 40)
        yield gh


class Client:
    """A GitHub client with a recorded sleep, a fixed clock and fixed jitter."""

    def __init__(self, url, token=TOKEN, **policy):
        self.sleeps, self.logs = [], []
        self.gh = GitHub(token, url, policy=RetryPolicy(**policy), sleep=self.sleeps.append,
                         clock=lambda: NOW, rand=lambda: 1.0, log=self.logs.append)

    def post(self, body, **kw):
        return self.gh.upsert_comment(REPO, PR, body, **kw)


def test_posting_twice_updates_one_comment(fake):
    c = Client(fake.url)
    first = c.post("verdict: no change")
    second = c.post("verdict: 1 ladder changed")
    assert (first.action, second.action) == ("created", "updated")
    assert first.comment_id == second.comment_id
    [comment] = fake.comments_on(REPO, PR)
    assert comment["body"] == f"{marker()}\nverdict: 1 ladder changed"
    assert (fake.count("POST"), fake.count("PATCH")) == (1, 1)
    third = c.post("verdict: 1 ladder changed")
    assert third.action == "unchanged" and fake.count("PATCH") == 1
    assert c.sleeps == []


def test_a_502_then_success_posts_once(fake):
    fake.fail("POST", COMMENTS, status=502, message="Bad Gateway")
    c = Client(fake.url)
    out = c.post("body")
    assert out.action == "created"
    assert len(fake.comments_on(REPO, PR)) == 1
    assert fake.count("POST") == 2
    assert c.sleeps == [1.0]  # first backoff, jitter fixed at its top
    # the comments were listed again between the two POSTs
    methods = [m for m, p, _ in fake.requests if p.endswith("/810/comments")]
    assert methods == ["GET", "POST", "GET", "POST"]


@pytest.mark.parametrize("kind", ["after", "drop_after"])
def test_a_failure_after_github_stored_the_comment_does_not_duplicate(fake, kind):
    """502 (or a dropped connection) *after* the comment was created: re-list, find it, stop."""
    fake.fail("POST", COMMENTS, kind=kind, status=502)
    c = Client(fake.url)
    out = c.post("body")
    [comment] = fake.comments_on(REPO, PR)
    assert (out.action, out.comment_id) == ("created", comment["id"])
    assert fake.count("POST") == 1
    assert len(c.sleeps) == 1


def test_a_connection_dropped_before_the_write_is_retried(fake):
    fake.fail("POST", COMMENTS, kind="drop")
    out = Client(fake.url).post("body")
    assert out.action == "created" and len(fake.comments_on(REPO, PR)) == 1
    assert fake.count("POST") == 2


def test_an_existing_comment_beyond_the_first_page_is_found(fake):
    for i in range(150):
        fake.add_comment(REPO, PR, f"review comment {i}", login=f"reviewer{i % 7}")
    ours = fake.add_comment(REPO, PR, f"{marker()}\nold result", login="spyre-bench-bot", type="Bot")
    for i in range(120):
        fake.add_comment(REPO, PR, f"later comment {i}", login="reviewer1")
    out = Client(fake.url).post("new result")
    assert (out.action, out.comment_id) == ("updated", ours)
    assert fake.count("POST") == 0
    assert fake.count("GET", COMMENTS) == 3  # 271 comments, 100 a page, every page read
    assert [c["body"] for c in fake.comments_on(REPO, PR) if c["id"] == ours] == \
        [f"{marker()}\nnew result"]


def test_a_person_quoting_the_marker_is_never_edited(fake):
    human = fake.add_comment(REPO, PR, f"why does it say\n{marker()}\nhere?", login="reviewer")
    quoted = fake.add_comment(REPO, PR, f"> {marker()}\n> old", login="spyre-bench-bot", type="Bot")
    out = Client(fake.url).post("result")
    assert out.action == "created" and out.comment_id not in (human, quoted)
    assert fake.count("PATCH") == 0


def test_installation_token_updates_a_bot_comment_and_skips_humans(fake):
    """GITHUB_TOKEN cannot read /user: then only Bot accounts' marked comments are candidates."""
    fake.add_account("ghs_installation", "github-actions[bot]", type="Bot", installation=True)
    fake.add_comment(REPO, PR, f"{marker()}\npasted by a person", login="reviewer")
    bot = fake.add_comment(REPO, PR, f"{marker()}\nold", login="github-actions[bot]", type="Bot")
    out = Client(fake.url, token="ghs_installation").post("new")
    assert (out.action, out.comment_id) == ("updated", bot)


def test_two_marked_comments_update_the_oldest_and_say_so(fake):
    a = fake.add_comment(REPO, PR, f"{marker()}\na", login="spyre-bench-bot", type="Bot")
    fake.add_comment(REPO, PR, f"{marker()}\nb", login="spyre-bench-bot", type="Bot")
    out = Client(fake.url).post("c")
    assert out.comment_id == a and "2 sticky comments found" in out.notes[0]


def test_keys_keep_separate_comments(fake):
    c = Client(fake.url)
    cpu = c.post("cpu", key="pr-comment")
    hw = c.post("hardware", key="hardware")
    assert cpu.comment_id != hw.comment_id
    assert c.post("cpu 2").comment_id == cpu.comment_id
    bodies = {x["id"]: x["body"] for x in fake.comments_on(REPO, PR)}
    assert has_marker(bodies[hw.comment_id], "hardware") and bodies[hw.comment_id].endswith("hardware")


def test_primary_rate_limit_waits_until_the_reset(fake):
    fake.fail("GET", COMMENTS, status=403, message="API rate limit exceeded for user ID 1.",
              headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 41)})
    c = Client(fake.url)
    assert c.post("body").action == "created"
    assert c.sleeps == [42.0]  # reset - now + 1 s for clock skew
    assert "403 rate limited" in c.logs[0]


@pytest.mark.parametrize("status,headers,message,wait", [
    (403, {"Retry-After": "3"}, "You have exceeded a secondary rate limit.", 3.0),
    (429, {"Retry-After": "2"}, "Too Many Requests", 2.0),
    (403, {}, "You have exceeded a secondary rate limit. Please wait.", 60.0),  # GitHub: a minute
])
def test_secondary_rate_limits_on_create_wait_and_post_once(fake, status, headers, message, wait):
    fake.fail("POST", COMMENTS, status=status, headers=headers, message=message)
    c = Client(fake.url)
    assert c.post("body").action == "created"
    assert c.sleeps == [wait]
    assert len(fake.comments_on(REPO, PR)) == 1 and fake.count("POST") == 2


def test_a_rate_limit_longer_than_the_cap_fails_without_waiting(fake):
    fake.fail("GET", COMMENTS, status=403, message="API rate limit exceeded",
              headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 3600)})
    c = Client(fake.url, max_wait=300)
    with pytest.raises(PublishError, match=r"wait 3601 s, more than the 300 s allowed; try again later"):
        c.post("body")
    assert c.sleeps == [] and fake.count("POST") == 0


def test_5xx_backoff_doubles_to_its_cap_then_gives_up(fake):
    fake.fail("GET", COMMENTS, status=503, times=99)
    c = Client(fake.url, attempts=6, backoff=1.0, max_backoff=5.0)
    with pytest.raises(PublishError, match=r"after 6 attempts \(last: 503"):
        c.post("body")
    assert c.sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert fake.count("GET", COMMENTS) == 6 and fake.count("POST") == 0


def test_jitter_stays_between_half_and_all_of_the_backoff():
    policy = RetryPolicy(backoff=2.0, max_backoff=8.0)
    assert [policy.backoff_for(n, lambda: 0.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 4.0]
    assert [policy.backoff_for(n, lambda: 1.0) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 8.0]


@pytest.mark.parametrize("setup,pattern,status", [
    (lambda f: None, r"GitHub rejected the token \(401: Bad credentials\) for "
                     r"torch-spyre/spyre-inference PR #810", 401),
    (lambda f: f.add_account("ro", "reader", write=False),
     r"refused access \(403: Resource not accessible by integration\) to "
     r"torch-spyre/spyre-inference PR #810", 403),
    (lambda f: f.pulls.clear(), r"not found \(404: Not Found\): torch-spyre/spyre-inference PR "
                                r"#810 does not exist", 404),
])
def test_refusals_are_one_line_name_repo_and_pr_and_are_not_retried(fake, setup, pattern, status):
    setup(fake)
    token = {401: "ghp_WRONGTOKEN_nottheone_SECRET", 403: "ro"}.get(status, TOKEN)
    c = Client(fake.url, token=token)
    with pytest.raises(PublishError, match=pattern) as info:
        c.post("body")
    assert info.value.status == status and "\n" not in str(info.value)
    assert token not in str(info.value) and c.sleeps == []
    assert fake.count("POST") == (1 if status == 403 else 0)


def test_stale_head_is_refused_before_posting(fake):
    with pytest.raises(PublishError, match=r"PR #810 head is c{40}, not d{40}"):
        Client(fake.url).post("body", expect_head_sha="d" * 40)
    assert fake.count("POST") == 0 and fake.count("GET", COMMENTS) == 0
    assert Client(fake.url).post("body", expect_head_sha="c" * 40).action == "created"


def test_next_page_link_to_another_host_is_not_followed(fake):
    for i in range(101):
        fake.add_comment(REPO, PR, f"c{i}", login="reviewer")
    fake.link_base = "http://127.0.0.2:9"
    with pytest.raises(PublishError, match="points to another host; not sending the token there"):
        Client(fake.url).post("body")


def test_unreachable_api_retries_then_fails_without_the_token(fake):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = Client(f"http://127.0.0.1:{port}", attempts=3)
    with pytest.raises(PublishError, match=r"after 3 attempts \(last: no connection\)") as info:
        c.post("body")
    assert len(c.sleeps) == 2
    assert all(TOKEN not in text for text in [str(info.value), *c.logs])


def test_oversized_body_is_refused_before_any_request(fake):
    with pytest.raises(PublishError, match=r"70,000 characters, over GitHub's 65,536"):
        Client(fake.url).post("x" * (70_000 - len(marker()) - 1))
    assert fake.requests == []


def test_an_empty_body_is_refused_before_any_request(fake):
    with pytest.raises(PublishError, match="is empty"):
        Client(fake.url).post(" \n")
    assert fake.requests == []


def test_a_long_rate_limit_on_the_identity_check_is_not_taken_for_an_app_token(fake):
    fake.fail("GET", r"^/user$", status=403, headers={"Retry-After": "900"},
              message="You have exceeded a secondary rate limit.")
    with pytest.raises(PublishError, match="asks to wait 900 s"):
        Client(fake.url).post("body")
    assert fake.count("GET", COMMENTS) == 0
