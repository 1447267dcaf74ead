"""Publishing results where people read them: the sticky PR comment on GitHub.

``body`` holds the pure string side (the hidden marker, GitHub's size limit) that renderers call;
``github`` the REST client that creates or updates the comment.
"""

from harness.publish.body import (DEFAULT_KEY, GITHUB_BODY_LIMIT, MARKER, with_marker, fit_body,
                                  has_marker, marker)

__all__ = ["DEFAULT_KEY", "GITHUB_BODY_LIMIT", "MARKER", "with_marker", "fit_body", "has_marker",
           "marker"]
