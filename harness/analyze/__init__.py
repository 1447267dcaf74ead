"""Analysis: comparing two subjects or commits, and change points over history."""
