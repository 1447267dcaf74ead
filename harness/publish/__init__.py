"""Publishing results where people read them: the sticky PR comment on GitHub.

``github`` is the REST client that creates or updates the comment. What the body says, its hidden
marker and its size guard are rendering facts: they live below, in ``harness.report`` (``marker``,
``fit``), and are imported from there.
"""
