"""numba settings in one place.

``jit`` compiles kernels that take plain arrays and numbers; their machine code is cached on
disk. ``jit_generic`` compiles kernels that take a loss's increment kernel as an argument:
numba cannot cache those across processes, so they compile once per process and per loss
(the benchmark reports that compile time apart from warm time). No ``fastmath``: it would
change NaN/inf semantics and the tie-breaking comparisons the methods must share.
"""

import inspect

import numba

jit = numba.njit(cache=True, nogil=True)
jit_generic = numba.njit(cache=False, nogil=True)
# Inlined into its callers at numba's level: the rank evaluation runs once per node of
# every divide and conquer, where a call costs as much as a short scan.
jit_inline = numba.njit(inline="always", nogil=True)

_bound = {}


def bind(kernel, inc):
    """``kernel`` with its first argument fixed to the increment kernel ``inc``.

    Calling a numba function from Python with a function argument costs ~10 us of typing per
    call; the bound version takes only arrays and numbers. It is generated with ``inc`` as a
    global, which numba calls directly (and inlines), unlike a closure variable.
    """
    key = (kernel, inc)
    if key not in _bound:
        names = list(inspect.signature(kernel.py_func).parameters)[1:]
        args = ", ".join(names)
        namespace = {"kernel": kernel, "inc": inc}
        exec(f"def bound({args}):\n    return kernel(inc, {args})\n", namespace)
        _bound[key] = jit_generic(namespace["bound"])
    return _bound[key]
