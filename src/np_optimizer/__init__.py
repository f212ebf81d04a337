"""np: a local model optimizer and profiler for Arm edge devices.

The public API is the functions of `np_optimizer.api` (one per `np` command), the records they return and the
errors they raise, all re-exported here.
"""

__version__ = "0.1.0"

from np_optimizer.api import *  # noqa: E402,F403
from np_optimizer.api import __all__ as _api_all  # noqa: E402
from np_optimizer.errors import *  # noqa: E402,F403
from np_optimizer.errors import __all__ as _errors_all  # noqa: E402
from np_optimizer.records import *  # noqa: E402,F403
from np_optimizer.records import __all__ as _records_all  # noqa: E402

__all__ = ["__version__", *_api_all, *_errors_all, *_records_all]
