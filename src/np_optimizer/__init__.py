"""np: a local model optimizer and profiler for Arm edge devices.

The public API is the functions of `np_optimizer.api` (one per `np` command), the records they return and the
errors they raise, all re-exported here. The functions and records are imported on first use (PEP 562), so
`import np_optimizer` (and every `np` command) starts without importing what it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from np_optimizer.api import __all__ as _api_all  # names only: both packages import lazily
from np_optimizer.errors import *  # noqa: F403
from np_optimizer.errors import __all__ as _errors_all
from np_optimizer.records import __all__ as _records_all
from np_optimizer.registry import plug_later
from np_optimizer.versions import NP_VERSION as __version__

if TYPE_CHECKING:
    from np_optimizer.api import *  # noqa: F403
    from np_optimizer.records import *  # noqa: F403

# The steps (floor 9) fill configuration's step registry (floor 4); the top package plugs one into the other, so that
# configuration never names the pipeline. Python runs this file before any np_optimizer submodule is imported; the
# registry takes the plug when first read, so a command that reads no step imports no configuration.
# Each step's module is named after its kind: a run imports the modules of its own steps only.
plug_later("step", "np_optimizer.pipeline.steps", module_of=lambda kind: kind)

__all__ = ["__version__", *_api_all, *_errors_all, *_records_all]


def __getattr__(name: str) -> Any:
    if name in _api_all:
        value = getattr(importlib.import_module("np_optimizer.api"), name)
    elif name in _records_all:
        value = getattr(importlib.import_module("np_optimizer.records"), name)
    else:
        raise AttributeError(f"module 'np_optimizer' has no attribute '{name}'")
    globals()[name] = value
    return value
