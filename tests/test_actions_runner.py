"""The runner stand-in's expression interpreter (tests/actions_runner.py) reads the workflows'
``if:`` and ``${{ }}`` as GitHub does, so the workflow run tests take the paths GitHub would."""

import pytest

from tests.actions_runner import condition, evaluate, interpolate

CTX = {"github": {"event_name": "workflow_run", "repository": "torch-spyre/spyre-inference",
                  "event": {"workflow_run": {"event": "pull_request", "conclusion": "failure",
                                             "id": 7}}},
       "steps": {"compare": {"outputs": {"exit-code": "1"}}}, "env": {"A": "x"},
       "needs": {"gate": {"result": "success"}}}


@pytest.mark.parametrize("text,value", [
    ("github.event_name == 'workflow_run'", True),
    ("github.event_name == 'WORKFLOW_RUN'", True),                 # strings compare ignoring case
    ("github.event.workflow_run.conclusion == 'success' || "
     "github.event.workflow_run.conclusion == 'failure'", True),
    ("github.repository == 'x/y' && (true || false)", False),
    ("!cancelled()", True),
    ("steps.compare.outputs.exit-code != '0'", True),
    ("github.event.missing.deeper", None),
    ("contains(fromJSON('[\"OWNER\", \"MEMBER\"]'), 'member')", True),
    ("startsWith('/spyre-bench abc', '/spyre-bench ')", True),
    ("'it''s'", "it's"),
])
def test_expressions(text, value):
    assert evaluate(text, CTX) == value


def test_interpolation_and_conditions():
    assert interpolate("${{ env.A }}/b-${{ github.event.workflow_run.id }}", CTX) == "x/b-7"
    assert interpolate("${{ github.event.nothing }}", CTX) == ""
    ok, failed = {"ok": True}, {"ok": False}
    assert condition(None, CTX, ok) and not condition(None, CTX, failed)
    assert not condition("github.event_name == 'workflow_run'", CTX, failed)   # implicit success()
    assert condition("${{ !cancelled() }}", CTX, failed)
    assert condition("always() && needs.gate.result == 'success'", CTX, failed)
    with pytest.raises(ValueError):
        evaluate("github.event_name === 'x'", CTX)
