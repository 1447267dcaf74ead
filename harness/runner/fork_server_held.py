"""The fork server's first import (:data:`harness.runner.exact_process.PRELOAD`): it ends when
``run`` does, and so does each commit's exact tier it forks (:mod:`harness.lifeline`); without
this a killed ``run`` left the server waiting on its children and them on nothing."""

from harness.lifeline import hold

hold()
