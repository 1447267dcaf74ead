"""The Dynamo settings a commit's platform module makes at import (it raises the recompile limits),
read by importing it once in a window and putting back everything it changed: the graph counts
follow the commit's own settings."""

from __future__ import annotations

import importlib

from harness.errors import HarnessError, SubjectError
from harness.subjects.load.loader import CaptureHandler, SourceTree, isolated, vllm_standins, where
from harness.subjects.timeout import bounded

PLATFORM_MODULE = "spyre_inference.platform"
PLATFORM_FILE = "spyre_inference/platform.py"


def load_compile_settings(tree: SourceTree, origin: str) -> dict:
    """What the commit's platform module changes in ``torch._dynamo.config`` at import (a
    SubjectError where it cannot be loaded); {} when the commit has none."""
    import torch._dynamo

    if not tree.has(PLATFORM_FILE):
        return {}
    config = torch._dynamo.config
    before = config.get_config_copy()
    # a platform module may patch torch process-wide at import (spyre-inference's turns
    # torch.accelerator's empty_cache/synchronize into no-ops): put back what it replaced
    accelerator = dict(vars(torch.accelerator))
    try:
        with bounded(f"{origin}: loading {PLATFORM_FILE}"), \
                isolated({}, tree, vllm_standins(CaptureHandler())):
            importlib.import_module(PLATFORM_MODULE)
        after = config.get_config_copy()
    except HarnessError:
        raise
    except Exception as exc:
        raise SubjectError(f"{origin}: {PLATFORM_FILE} (whose Dynamo settings the "
                           f"graph counts follow) cannot be loaded: {type(exc).__name__}: "
                           f"{exc}{where(exc, tree)}") from None
    finally:
        for key, value in before.items():
            if config.get_config_copy().get(key) != value:
                setattr(config, key, value)
        for name, value in accelerator.items():
            if getattr(torch.accelerator, name, None) is not value:
                setattr(torch.accelerator, name, value)
    return {k: v for k, v in after.items() if before.get(k) != v}

