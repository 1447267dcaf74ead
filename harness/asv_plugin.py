"""ASV plugin: an ``existing`` environment whose name is stable across clones and hosts' paths.

ASV names an ``existing`` environment after the interpreter's absolute path, so the same machine
running from two clones starts two series that never line up. ``spyre-bench run`` selects this
environment (``-E spyre-bench:PYTHON``) instead; its name carries only the Python version and the
device (``SPYRE_BENCH_DEVICE``), e.g. ``spyre-bench-py3.11-cpu``. Loaded by asv.conf.json's
``"plugins": [".harness.asv_plugin"]``.
"""

import functools
import os

from asv import util
from asv.environment import ExistingEnvironment, get_env_name


@functools.cache
def _python_version(executable: str) -> str:
    return util.check_output(
        [executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).strip()


class StableExistingEnvironment(ExistingEnvironment):
    tool_name = "spyre-bench"

    @property
    def name(self):
        device = os.environ.get("SPYRE_BENCH_DEVICE", "cpu")
        version = _python_version(self._executable)
        return get_env_name(self.tool_name, f"{version}-{device}", {}, self._tagged_env_vars)
