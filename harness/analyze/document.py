"""The comparison document's format name (pure: the posting path imports it without numpy)."""

#: Bumped when a field of ``harness.analyze.compare.as_document`` changes meaning.
DOCUMENT_SCHEMA = "spyre-bench.comparison/1"
