"""numba settings in one place.

``jit`` compiles kernels whose machine code is cached on disk, so that a second process loads
it instead of compiling. A kernel's cache entry is stamped with a hash of every kernel source
file of the package and of its own file (numba's rule is its own file only): a cached kernel
holds the code of the kernels it calls, in other files too, and must not outlive an edit of
them.

Loss-generic kernels take as first argument either a built-in loss's code (an integer, so
that they are cached like the others) or a user's increment kernel (see
`qs.losses.increment`); `qs.losses` registers its built-in kernels' codes here
(`builtin_increment`), so that `bind` needs no import of it. numba cannot cache code
compiled for a function argument: a user's `qs.losses.QSLoss` compiles on its first use in
every process, and those compilations are kept out of the disk cache.

No ``fastmath``: it would change NaN/inf semantics and the tie-breaking comparisons the
methods must share. `ONE` is the unsigned step of the kernels' hot loops.
"""

import functools
import hashlib
import inspect
import warnings
from pathlib import Path

import numba
import numpy as np
from numba.core import caching, cgutils, config, types
from numba.extending import intrinsic

_PACKAGE = Path(__file__).resolve().parent
#: the files whose kernels a cached kernel may hold
KERNEL_SOURCES = ("_numba.py", "losses.py", "inference/*.py")


@functools.cache
def source_stamp(own_file=None):
    """Hash of every kernel source file and of ``own_file`` (a kernel's own file, where it
    lies elsewhere): the freshness stamp of each cached kernel."""
    paths = [path for pattern in KERNEL_SOURCES for path in sorted(_PACKAGE.glob(pattern))]
    if own_file is not None and Path(own_file).resolve() not in paths:
        paths.append(Path(own_file).resolve())
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _stamped(name):
    """numba's locator class ``name``, its freshness stamp replaced by `source_stamp`."""
    base = getattr(caching, name, None) or getattr(caching, "_" + name)
    return type(
        "Stamped" + name, (base,), {"get_source_stamp": lambda self: source_stamp(self._py_file)}
    )


class _CacheImpl(caching.CompileResultCacheImpl):
    # numba's order: NUMBA_CACHE_DIR when set, __pycache__ beside the source, the user's cache
    _locator_classes = [  # noqa: RUF012 (numba declares it so)
        _stamped(n)
        for n in (
            "UserProvidedCacheLocator",
            "InTreeCacheLocator",
            "UserWideCacheLocator",
        )
    ]


class _Cache(caching.FunctionCache):
    """numba's cache, minus the signatures with a function argument: numba would write a new
    entry for them in every process and never load one (the function's identity differs)."""

    _impl_class = _CacheImpl

    def load_overload(self, sig, target_context):
        return None if _takes_function(sig) else super().load_overload(sig, target_context)

    def save_overload(self, sig, data):
        if not _takes_function(sig):
            super().save_overload(sig, data)


def _takes_function(sig):
    args = sig.args if hasattr(sig, "args") else sig
    return any(isinstance(a, numba.types.Dispatcher) for a in args)


_warned: list[str] = []


def _warn_once(message):
    if not _warned:
        _warned.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _with_cache(dispatcher):
    """Give ``dispatcher`` the package-stamped disk cache; where no cache directory is
    writable, or NUMBA_CACHE_DIR is set but not writable, warn once and go on (compiling in
    every process in the first case). Under NUMBA_DISABLE_JIT there is nothing to cache."""
    if config.DISABLE_JIT:
        return dispatcher
    try:
        dispatcher._cache = _Cache(dispatcher.py_func)
    except RuntimeError:  # numba: "no locator available"
        _warn_once(
            "qsrank: no writable numba cache directory (NUMBA_CACHE_DIR, __pycache__ "
            "or the user's cache directory); kernels compile in every process."
        )
        return dispatcher
    if config.CACHE_DIR and not str(dispatcher._cache.cache_path).startswith(
        str(Path(config.CACHE_DIR).resolve())
    ):
        _warn_once(
            f"qsrank: NUMBA_CACHE_DIR={config.CACHE_DIR} is not writable; kernels are "
            f"cached in {dispatcher._cache.cache_path} instead."
        )
    return dispatcher


def _unliteral_calls(dispatcher):
    """Make calls from other kernels compile ``dispatcher`` for the arguments' types, not for
    their constant values: numba types a constant argument (``f(v, 0)``, a module constant)
    as a literal and compiles the callee once per value, and once more when a variable that
    starts at a constant widens (``p = 0`` then ``p += 1``). Most of the batched kernel's
    first compile was such copies."""
    typed = dispatcher.get_call_template

    def get_call_template(args, kws):
        return typed(
            tuple(types.unliteral(a) for a in args), {k: types.unliteral(v) for k, v in kws.items()}
        )

    dispatcher.get_call_template = get_call_template
    return dispatcher


def jit(fn):
    """A kernel compiled once and cached on disk."""
    return _with_cache(_unliteral_calls(numba.njit(cache=False, nogil=True)(fn)))


jit_generic = numba.njit(cache=False, nogil=True)
# Inlined into its callers at numba's level: the rank evaluation, which runs once per node of
# every divide and conquer, where a call costs as much as a short scan; and helpers with one
# caller. A function of its own is compiled, optimised by LLVM and cached apart, then optimised
# again inside each caller, at every level of calls: much of the kernels' compile time.
jit_inline = numba.njit(inline="always", nogil=True)

#: Unsigned one. numba guards every array access by a signed index against negative
#: indices (a compare and a select, and the registers they hold); the hot loops over the
#: input index with unsigned counters (``range(np.uintp(lo), np.uintp(hi))``, ``q += ONE``)
#: instead, which makes them 25-30% faster. Adding a signed number gives a signed result.
ONE = np.uintp(1)


@intrinsic
def unowned(typingctx, arrays):
    """The arrays of the tuple ``arrays`` (inside a kernel) as views without an owner: the
    same data, shapes and strides, no reference counted. numba counts the references of
    every view taken of an array by an atomic add on its owner (and a subtract when the view
    dies): a loop that takes a dozen views of its work arrays per query of a hundred
    documents spends a fifth of its time there. A view without an owner is counted by a
    test of a null pointer. The arrays must outlive every view taken of them: the caller's
    arguments do, for the call."""
    if not isinstance(arrays, types.BaseTuple) or not all(
        isinstance(a, types.Array) for a in arrays
    ):
        return None

    def codegen(context, builder, sig, args):
        out = context.get_constant_undef(sig.return_type)
        for i, ty in enumerate(sig.args[0]):
            ary = context.make_array(ty)(context, builder, value=builder.extract_value(args[0], i))
            ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
            ary.parent = cgutils.get_null_value(ary.parent.type)
            out = builder.insert_value(out, ary._getvalue(), i)
        return out

    return arrays(arrays), codegen


#: increment kernel of a built-in loss -> its code, as `builtin_increment` registers them
BUILTIN_INCREMENTS: dict[object, int] = {}
_bound: dict[object, object] = {}


def builtin_increment(code):
    """Decorator registering a built-in loss's increment kernel under ``code`` (an integer
    the loss-generic kernels branch on), so that `bind` passes the code in its place."""

    def register(kernel):
        BUILTIN_INCREMENTS[kernel] = code
        return kernel

    return register


def bind(kernel, inc):
    """``kernel`` with its first argument fixed to the increment kernel ``inc``: for a
    built-in loss, the cached kernel with the loss's code; for another loss, a version
    compiled in this process.

    Calling a numba function from Python with a function argument costs ~10 us of typing per
    call; the bound version takes only arrays and numbers. It is generated with ``inc`` as a
    global, which numba calls directly (and inlines), unlike a closure variable.
    """
    key = (kernel, inc)
    if key not in _bound:
        if inc in BUILTIN_INCREMENTS:
            _bound[key] = functools.partial(kernel, BUILTIN_INCREMENTS[inc])
        else:
            names = list(inspect.signature(kernel.py_func).parameters)[1:]
            args = ", ".join(names)
            namespace = {"kernel": kernel, "inc": inc}
            exec(f"def bound({args}):\n    return kernel(inc, {args})\n", namespace)
            _bound[key] = jit_generic(namespace["bound"])
    return _bound[key]
