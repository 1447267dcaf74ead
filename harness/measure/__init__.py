"""Measurement on a device: reference kernels, builder-faithful inputs, the oracle, timing and
compiled-graph counting. Everything here imports torch, except :mod:`harness.measure.settings`
(the options and defaults) and :mod:`harness.measure.probe_set` (the named probes as data);
nothing outside it (and the kernel CLI's run path) may import the rest of this package at module
level.
"""
