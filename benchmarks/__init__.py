"""spyre-bench's ASV suite: thin classes over ``harness`` (see harness/suite.py for the knobs)."""

from harness.lifeline import hold

hold()   # an ASV benchmark process of spyre-bench run ends with its parent (harness.lifeline)
