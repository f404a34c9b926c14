"""A ``mooncake`` package that is kvpool: put <checkout>/python/shim on
PYTHONPATH (with kvpool importable) and ``from mooncake.store import
MooncakeDistributedStore`` gives kvpool's drop-in. See docs/python.md."""
