"""numba settings in one place.

``jit`` compiles kernels that take plain arrays and numbers; their machine code is cached on
disk. ``jit_generic`` compiles kernels that take a loss's increment kernel as an argument:
numba cannot cache those across processes, so they compile once per process and per loss
(the benchmark reports that compile time apart from warm time). No ``fastmath``: it would
change NaN/inf semantics and the tie-breaking comparisons the methods must share.
"""

import numba

jit = numba.njit(cache=True, nogil=True)
jit_generic = numba.njit(cache=False, nogil=True)
