"""A slot's bytes lent to numpy: the one place where an array of shared memory is made, so that a slot is never
reused under a view (DESIGN: a view's lifetime is the memory's, as torch.multiprocessing and DLPack keep it).

Every array made from a lease (its slices, reshapes, `.view`s, a torch tensor from `torch.from_numpy`) holds the
lease; when the last one is gone, CPython frees the lease at once and its `release` runs, exactly once. The lease
also holds an export of the file's mapping, so the mapping cannot be closed under a view.
"""
from __future__ import annotations

import numpy as np


class _Lease:
    __slots__ = ("__array_interface__", "_hold", "_release")

    def __del__(self):
        try:
            self._release(self._hold)
        except Exception:  # at interpreter exit the endpoint may be gone: nothing to tell
            pass


def lend(hold, address: int, dtype, shape, writable: bool, release) -> np.ndarray:
    """An array of `shape` and `dtype` at `address` (inside the mapping `hold` exports); `release(hold)` runs when
    the last array made from it is gone. A zero-byte array needs no memory: it is an ordinary empty array."""
    dtype = np.dtype(dtype)
    lease = _Lease()
    lease._hold = hold
    lease._release = release
    lease.__array_interface__ = {"data": (address, not writable), "shape": tuple(shape), "typestr": dtype.str,
                                 "version": 3}
    return np.asarray(lease)
