"""Measurement on a device: reference kernels, builder-faithful inputs, the oracle, timing and
compiled-graph counting. Everything here imports torch; nothing outside it (and the kernel CLI's
run path) may import this package at module level.
"""
