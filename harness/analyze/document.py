"""The comparison document's format name (pure: the posting path imports it without numpy)."""

#: Bumped when a field of ``harness.analyze.comparison.as_document`` changes meaning.
DOCUMENT_SCHEMA = "spyre-bench.comparison/1"
