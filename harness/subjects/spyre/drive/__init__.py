"""A commit's own metadata builder and attention impl, driven on CPU torch."""
