"""``mooncake.store`` answered by kvpool.mooncake."""

from kvpool.mooncake import *  # noqa: F401,F403
from kvpool.mooncake import __all__  # noqa: F401
