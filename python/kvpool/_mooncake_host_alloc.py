"""``MooncakeHostMemAllocator`` of ``mooncake.store`` on kvpool.

SGLang's ``allocator_type="mooncake"`` host KV pool (and other engines)
allocate their host buffers with it: ``alloc(size)`` returns the address of
a page-aligned, zero-filled shared mapping, ``free(address)`` unmaps it.
Mooncake backs it with a memfd; here it is an anonymous shared ``mmap``,
which is as good for kvpool (the buffer is then passed to
``register_buffer``).
"""

import ctypes
import mmap
import threading

__all__ = ["MooncakeHostMemAllocator"]

# Every allocator instance shares one table, as Mooncake's allocators share
# one ShmHelper singleton: an address allocated by one instance can be freed
# by another.
_lock = threading.Lock()
_mappings = {}  # address -> mmap.mmap


def _address_of(mapping):
    view = ctypes.c_char.from_buffer(mapping)
    try:
        return ctypes.addressof(view)
    finally:
        del view  # releases the buffer export, so that close() works later


class MooncakeHostMemAllocator:
    """Allocates page-aligned, zero-filled shared host memory."""

    def alloc(self, size):
        """Returns the address of ``size`` new bytes. Like Mooncake (whose
        ShmHelper throws when the mapping fails), raises ``RuntimeError``
        when the memory cannot be mapped, including for ``size == 0``, and
        ``TypeError`` for a size that is not a non-negative int."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise TypeError("alloc(): size must be a non-negative int")
        if size == 0:
            raise RuntimeError("Failed to map shared memory: size is 0")
        try:
            mapping = mmap.mmap(-1, size, flags=mmap.MAP_SHARED |
                                mmap.MAP_ANONYMOUS,
                                prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, OverflowError, ValueError) as e:
            raise RuntimeError("Failed to map shared memory: %s" % e) from None
        address = _address_of(mapping)
        with _lock:
            _mappings[address] = mapping
        return address

    def free(self, ptr):
        """Unmaps what ``alloc`` returned: 0 on success, -1 for an address
        that ``alloc`` did not return (or that is already freed), as
        Mooncake's ShmHelper::free does."""
        if isinstance(ptr, bool) or not isinstance(ptr, int):
            return -1
        with _lock:
            mapping = _mappings.pop(ptr, None)
        if mapping is None:
            return -1
        try:
            mapping.close()
        except (BufferError, OSError):
            # Still exported to a Python buffer: keep it mapped and owned.
            with _lock:
                _mappings[ptr] = mapping
            return -1
        return 0
