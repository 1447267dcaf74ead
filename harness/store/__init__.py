"""History: ASV's results format as the store, read into one tidy pandas frame."""
