"""A spyre-inference version as a subject: located, probed, its bucketer and builder run."""
