"""glibc's allocator settings (``mallopt``), one place for every process that sets them.

By default glibc serves a large allocation with a fresh ``mmap`` whose pages fault in zeroed one by
one and are unmapped on free, and trims freed heap back to the kernel: a process that allocates
the same large temporaries over and over (a kernel's gathered pages, a builder's masks) pays those
faults every time. Elsewhere (musl, macOS) nothing is set.
"""

from __future__ import annotations

import ctypes

#: ``mallopt`` parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -2, -3, -4
#: glibc's largest mmap threshold on 64-bit systems, and its largest trim threshold.
MAX_MMAP_THRESHOLD, NO_TRIM = 32 << 20, (1 << 31) - 1


def mallopt(settings: dict[int, int]) -> bool:
    """Apply ``{parameter: value}`` in order; True when glibc took every one."""
    try:
        # the process's own symbols, libc's among them: no library search (ctypes.util runs
        # ldconfig or a compiler for that) in each process that calls this
        call = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all([call(param, value) for param, value in settings.items()])
