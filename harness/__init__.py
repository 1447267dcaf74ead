"""spyre-bench: benchmarks and regression tracking for spyre-inference's attention path.

The pipeline is visible in the sub-packages: ``subjects`` (what code), ``matrix``/``workloads``
(which configs and batches), ``model`` (exact dispatch and cost), ``report`` (tables), ``cli``.
"""

__version__ = "0.1.0"
