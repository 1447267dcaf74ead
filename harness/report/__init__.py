"""Rendering for people: terminal tables now; markdown and HTML reports build on the same rows."""
