"""spyre-bench's ASV suite: thin classes over ``harness`` (see harness/suite.py for the knobs)."""
