"""numba settings in one place.

``jit`` compiles kernels that take plain arrays and numbers; their machine code is cached on
disk. ``jit_generic`` compiles kernels that take a loss's increment kernel as an argument:
numba cannot cache those across processes, so they compile once per process and per loss
(the benchmark reports that compile time apart from warm time). No ``fastmath``: it would
change NaN/inf semantics and the tie-breaking comparisons the methods must share.
"""

import warnings

import numba
from numba.core.errors import NumbaExperimentalFeatureWarning

jit = numba.njit(cache=True, nogil=True)
jit_generic = numba.njit(cache=False, nogil=True)

_bound = {}


def bind(kernel, inc):
    """``kernel`` with its first argument fixed to the increment kernel ``inc``.

    Calling a numba function from Python with a function argument costs ~10 us of typing per
    call; the bound version takes only arrays and numbers.
    """
    key = (kernel, inc)
    if key not in _bound:

        def bound(*args):
            return kernel(inc, *args)

        _bound[key] = jit_generic(bound)
    return _bound[key]


# Passing a compiled increment kernel as a value is what the generic kernels are built on.
warnings.filterwarnings(
    "ignore", message="First-class function type", category=NumbaExperimentalFeatureWarning
)
