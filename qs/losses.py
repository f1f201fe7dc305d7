"""Rank-based losses and the QS-suitable loss protocol.

A ranking of P positives and N negatives is summarised, as far as AP and NDCG care, by its
*interleaving*: how many negatives stand above each positive. For the k-th positive (in
ranking order) ``n_above[k-1]`` is that count, a non-decreasing vector with values in 0..N.

A loss is QS-suitable (Mohapatra et al., CVPR 2018, Section 3.1) when it decomposes over negatives,
``Delta = sum_j delta_j(rank_j)`` with ``j`` the negative's place among the negatives and
``rank_j`` its interleaving rank (1 + positives above it), and when the greedy choice per
negative is monotone in ``j``. The quicksort-flavoured inference needs from such a loss only
the increment ``delta_j(i+1) - delta_j(i)``; each loss below gives it twice: vectorised in
numpy (for tests and readers) and as a numba kernel (for the inference methods).
"""

import functools
from typing import Any

import numba
import numpy as np
import numpy.typing as npt
from numba import types
from numba.extending import overload

from qs._numba import builtin_increment, jit, jit_inline

__all__ = [
    "LOSSES",
    "APLoss",
    "NDCGLoss",
    "QSLoss",
    "get_loss",
    "loss_value",
    "ndcg_increments_into",
]


def _scalar(x):
    return float(x) if np.ndim(x) == 0 else x


@functools.lru_cache(maxsize=8)
def _places(n_pos):
    """1, 2, ..., P as floats (read-only, shared)."""
    k = np.arange(1.0, n_pos + 1.0)
    k.flags.writeable = False
    return k


# read-only like NDCG's table, so that both built-in losses share the kernels' compiled code
_NO_PARAMS = np.zeros(0)
_NO_PARAMS.flags.writeable = False


class QSLoss:
    """Protocol of a QS-suitable loss.

    Subclasses set `name`, implement `prepare`, `increment` and `value`, and provide
    `kernel`: a numba-compiled function ``kernel(j, i, n_pos, params)`` returning the
    increment for 1-based ``j`` and ``i`` (``1 <= i <= n_pos``), ``params`` being what
    `prepare` returns. Every exact method of [lai][qs.inference.lai] then takes the loss.

    Examples
    --------
    >>> from qs.losses import APLoss
    >>> loss = APLoss()
    >>> round(loss.value(np.array([0, 1])), 4)  # one negative above the second positive
    0.1667
    >>> np.round(loss.increment([1, 2], [1, 1], 2, 2), 4).tolist()
    [-0.25, -0.0833]
    """

    name = ""
    kernel: Any = None

    def prepare(self, n_pos: int, n_neg: int) -> np.ndarray:
        """Quantities the increment needs, precomputed once per call.

        Parameters
        ----------
        n_pos, n_neg : int
            The numbers of positives and negatives.

        Returns
        -------
        ndarray of float64
            The ``params`` argument of `kernel` (empty when the increment needs none).

        Examples
        --------
        >>> APLoss().prepare(2, 2).size  # AP's increment needs no table
        0
        """
        return _NO_PARAMS

    def increment(self, j: npt.ArrayLike, i: npt.ArrayLike, n_pos: int, n_neg: int) -> np.ndarray:
        """The increment ``delta_j(i+1) - delta_j(i)`` of the loss, vectorised.

        Parameters
        ----------
        j : array_like of int
            1-based places of negatives among the negatives.
        i : array_like of int
            1-based interleaving ranks (1 + positives above), ``1 <= i <= n_pos``.
        n_pos, n_neg : int
            The numbers of positives and negatives.

        Returns
        -------
        ndarray of float64
            The increment at each ``(j, i)``.

        Examples
        --------
        >>> np.round(APLoss().increment([1, 2], [1, 1], 2, 2), 4).tolist()
        [-0.25, -0.0833]
        """
        raise NotImplementedError

    def value(self, n_above: npt.ArrayLike) -> float | np.ndarray:
        """The loss of a ranking given the negatives above each positive.

        Parameters
        ----------
        n_above : array_like of int, shape (..., P)
            Negatives above each positive, the positives in ranking order on the last axis.

        Returns
        -------
        float or ndarray
            A float for one ranking, an array of the leading shape for a stack.

        Examples
        --------
        >>> APLoss().value([[0, 0], [2, 2]]).tolist()  # a perfect ranking, then the worst
        [0.0, 0.5833333333333333]
        """
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


#: The codes of the built-in increment kernels. The inference kernels take a code in place of
#: the increment kernel for the built-in losses: an integer argument, where a function argument
#: would keep numba from caching them on disk (see ``qs._numba``).
AP_CODE, NDCG_CODE = 0, 1


@builtin_increment(AP_CODE)
@jit_inline
def ap_increment(j, i, n_pos, params):
    """AP's loss increment ``delta_j(i+1) - delta_j(i)`` (``params`` unused), compiled: the
    expression every exact method evaluates."""
    return -i / ((j + i - 1.0) * (j + i) * n_pos)


@jit
def _ap_loss(n_above):
    """1 - AP of one ranking (a 1-D array, of the inference kernels' int64), summed as
    `_ap_losses` sums each row."""
    n_pos = n_above.size
    total = 0.0
    for k in range(n_pos):
        n = n_above[k]
        total += n / (k + 1.0 + n)
    return total / n_pos


@jit
def _ap_losses(n_above):
    """1 - AP of each row of a 2-D array (a loop: at the sizes training calls LAI with, the
    temporaries of the numpy expression cost more than the sum itself)."""
    n_pos = n_above.shape[1]
    out = np.empty(n_above.shape[0])
    for r in range(n_above.shape[0]):
        total = 0.0
        for k in range(n_pos):
            n = n_above[r, k]
            total += n / (k + 1.0 + n)
        out[r] = total / n_pos
    return out


class APLoss(QSLoss):
    """1 - average precision, as a QS-suitable loss.

    Notes
    -----
    ``AP = (1/P) sum_k k / (k + n_k)`` where ``n_k`` negatives stand above the k-th positive;
    telescoping ``n/(k+n)`` over the negatives gives
    ``delta_j(i+1) - delta_j(i) = ((j-1)/(j+i-1) - j/(j+i)) / P = -i / (P (j+i-1)(j+i))``
    (always < 0; the kernel uses the second form, one division).

    Examples
    --------
    >>> loss = APLoss()
    >>> loss.value([0, 1])  # one negative above the second positive: AP = (1 + 2/3) / 2
    0.16666666666666666
    """

    name = "ap"
    kernel = staticmethod(ap_increment)

    def increment(self, j, i, n_pos, n_neg):
        """AP's increment ``-i / (P (j+i-1)(j+i))``, vectorised (`QSLoss.increment`).

        Parameters
        ----------
        j : array_like of int
            1-based places of negatives among the negatives.
        i : array_like of int
            1-based interleaving ranks, ``1 <= i <= n_pos``.
        n_pos : int
            The number of positives.
        n_neg : int
            The number of negatives (unused: AP's increment does not depend on it).

        Returns
        -------
        ndarray of float64
            The increment at each ``(j, i)``.

        Examples
        --------
        >>> APLoss().increment([1, 1], [1, 2], 2, 5).tolist()
        [-0.25, -0.16666666666666666]
        """
        j = np.asarray(j, dtype=np.float64)
        i = np.asarray(i, dtype=np.float64)
        return -i / ((j + i - 1.0) * (j + i) * n_pos)

    def value(self, n_above):
        """1 - AP of a ranking given the negatives above each positive (`QSLoss.value`).

        Parameters
        ----------
        n_above : array_like of int, shape (..., P)
            Negatives above each positive, the positives in ranking order on the last axis.

        Returns
        -------
        float or ndarray
            A float for one ranking, an array of the leading shape for a stack.

        Examples
        --------
        >>> APLoss().value([0, 1])
        0.16666666666666666
        """
        if type(n_above) is np.ndarray and n_above.ndim == 1 and n_above.dtype == np.int64:
            return _ap_loss(n_above)  # inference's own call: one kernel call, no conversion
        n = np.asarray(n_above, dtype=np.float64)
        losses = _ap_losses(n.reshape(-1, n.shape[-1]))
        return float(losses[0]) if n.ndim == 1 else losses.reshape(n.shape[:-1])


@builtin_increment(NDCG_CODE)
@jit_inline
def _ndcg_increment(j, i, n_pos, params):
    # unsigned (i, j >= 1): the rank evaluations' loop reads the table without numba's
    # negative-index check (2% of the qs divide and conquer)
    return params[np.uintp(i + j - 1)]


@jit
def _ndcg_loss(n_above, ideal):
    """1 - NDCG of one ranking (a 1-D array, of the inference kernels' int64), summed as
    `_ndcg_losses` sums each row."""
    total = 0.0
    for k in range(n_above.size):
        total += 1.0 / np.log2(2.0 + k + n_above[k])
    return 1.0 - total / ideal


@jit
def _ndcg_losses(n_above, ideal):
    """1 - NDCG of each row of a 2-D array, with the discount of `discount` (a loop, as
    `_ap_losses`: LAI calls it once per call)."""
    out = np.empty(n_above.shape[0])
    for r in range(n_above.shape[0]):
        total = 0.0
        for k in range(n_above.shape[1]):
            total += 1.0 / np.log2(2.0 + k + n_above[r, k])
        out[r] = 1.0 - total / ideal
    return out


@jit
def ndcg_increments_into(d, ideal, out):
    """NDCG's increments ``(D(t+1) - D(t)) / C`` at ``t = 1 .. d.size - 1`` (0 at ``t = 0``)
    from the discount ``d = D(1 .. d.size)`` and ``C = ideal``, written in ``out``: the table
    of `NDCGLoss.prepare`, and of each query of `qs.inference.batch.lai_batch`."""
    out[0] = 0.0
    for t in range(1, d.size):
        out[t] = (d[t] - d[t - 1]) / ideal
    return out[: d.size]


def discount(positions: npt.ArrayLike) -> np.ndarray:
    """NDCG's discount ``D(k) = 1 / log2(1 + k)`` of 1-based positions (convex, decreasing).

    Parameters
    ----------
    positions : array_like of int
        1-based places in the ranking.

    Returns
    -------
    ndarray of float64
        ``D`` at each place.

    Examples
    --------
    >>> from qs.losses import discount
    >>> np.round(discount([1, 2, 3]), 4).tolist()
    [1.0, 0.6309, 0.5]
    """
    return 1.0 / np.log2(1.0 + np.asarray(positions, dtype=np.float64))


class NDCGLoss(QSLoss):
    """1 - NDCG with binary gains and ``D(k) = 1/log2(1+k)``, as a QS-suitable loss.

    The gains and discount are those of scikit-learn's ``ndcg_score``.

    Notes
    -----
    ``Delta = (1/C) sum_k [D(k) - D(k + n_k)]`` with ``C = sum_{k<=P} D(k)``, so that
    ``delta_j(i+1) - delta_j(i) = (D(i+j) - D(i+j-1)) / C``: a function of ``i+j`` alone,
    precomputed once as a table. Convexity of ``D`` is what makes the greedy exact; the
    discount of Chakrabarti et al. (``D = 1`` for the first two places) is not convex.

    Examples
    --------
    >>> loss = NDCGLoss()
    >>> round(loss.value([0, 1]), 4)  # one negative above the second positive
    0.0803
    """

    name = "ndcg"
    kernel = staticmethod(_ndcg_increment)

    def discount(self, positions: npt.ArrayLike) -> np.ndarray:
        """The discount D at 1-based positions; a subclass may change it (convex only).

        Parameters
        ----------
        positions : array_like of int
            1-based places in the ranking.

        Returns
        -------
        ndarray of float64
            ``D`` at each place.

        Examples
        --------
        >>> np.round(NDCGLoss().discount([1, 2, 3]), 4).tolist()
        [1.0, 0.6309, 0.5]
        """
        return discount(positions)

    def prepare(self, n_pos, n_neg):
        """The table of increments by ``i + j``, kept for the last few sizes.

        Parameters
        ----------
        n_pos : int
            The number of positives.
        n_neg : int
            The number of negatives.

        Returns
        -------
        ndarray of shape (n_pos + n_neg + 1,), float64
            ``(D(t+1) - D(t)) / C`` at ``t = i + j - 1`` (0 at ``t = 0``), read only.

        Examples
        --------
        >>> np.round(NDCGLoss().prepare(2, 2), 4).tolist()
        [0.0, -0.2263, -0.0803, -0.0425, -0.0269]
        """
        # depends on the sizes only: computed once per (P, N), as training repeats them
        return self._table(n_pos, n_neg)

    @functools.lru_cache(maxsize=8)  # noqa: B019 (the losses are module-level singletons)
    def _ideal(self, n_pos):
        """C = sum_{k<=P} D(k), the DCG of a perfect ranking."""
        return float(self.discount(np.arange(1, n_pos + 1)).sum())

    @functools.lru_cache(maxsize=8)  # noqa: B019 (as above)
    def _table(self, n_pos, n_neg):
        d = self.discount(np.arange(1, n_pos + n_neg + 2))
        table = ndcg_increments_into(d, self._ideal(n_pos), np.empty(n_pos + n_neg + 1))
        table.flags.writeable = False
        return table

    def increment(self, j, i, n_pos, n_neg):
        """NDCG's increment ``(D(i+j) - D(i+j-1)) / C``, read from the table of `prepare`.

        Parameters
        ----------
        j : array_like of int
            1-based places of negatives among the negatives.
        i : array_like of int
            1-based interleaving ranks, ``1 <= i <= n_pos``.
        n_pos : int
            The number of positives.
        n_neg : int
            The number of negatives.

        Returns
        -------
        ndarray of float64
            The increment at each ``(j, i)``.

        Examples
        --------
        >>> np.round(NDCGLoss().increment([1, 2], [1, 1], 2, 2), 4).tolist()
        [-0.2263, -0.0803]
        """
        return self.prepare(n_pos, n_neg)[np.asarray(i) + np.asarray(j) - 1]

    def value(self, n_above):
        """1 - NDCG of a ranking given the negatives above each positive (`QSLoss.value`).

        Parameters
        ----------
        n_above : array_like of int, shape (..., P)
            Negatives above each positive, the positives in ranking order on the last axis.

        Returns
        -------
        float or ndarray
            A float for one ranking, an array of the leading shape for a stack.

        Examples
        --------
        >>> np.round(NDCGLoss().value([[0, 0], [0, 1]]), 4).tolist()
        [0.0, 0.0803]
        """
        own = type(self).discount is not NDCGLoss.discount  # a subclass's own discount
        if (
            not own
            and type(n_above) is np.ndarray
            and n_above.ndim == 1
            and n_above.dtype == np.int64
        ):
            return _ndcg_loss(n_above, self._ideal(n_above.size))  # inference's own call
        n = np.asarray(n_above, dtype=np.float64)
        n_pos = n.shape[-1]
        if own:
            return _scalar(
                1.0 - self.discount(_places(n_pos) + n).sum(axis=-1) / self._ideal(n_pos)
            )
        losses = _ndcg_losses(n.reshape(-1, n_pos), self._ideal(n_pos))
        return float(losses[0]) if n.ndim == 1 else losses.reshape(n.shape[:-1])


LOSSES = {"ap": APLoss(), "ndcg": NDCGLoss()}


@jit
def loss_value(inc, n_above, ideal):
    """The loss of the built-in code ``inc`` from ``n_above`` (int64), as `APLoss.value`
    and `NDCGLoss.value` compute it for inference; ``ideal`` is NDCG's ``C`` (unused
    for AP)."""
    if inc == AP_CODE:
        return _ap_loss(n_above)
    return _ndcg_loss(n_above, ideal)


def increment(inc, j, i, n_pos, params):
    """The loss increment inside the inference kernels: ``inc`` is a built-in loss's code
    (the branch on it is the same at every call of one inference, so predicted) or a loss's
    increment kernel."""
    if not isinstance(inc, int):
        return inc(j, i, n_pos, params)
    if inc == AP_CODE:
        return ap_increment(j, i, n_pos, params)
    return _ndcg_increment(j, i, n_pos, params)


@overload(increment, inline="always")
def _increment_numba(inc, j, i, n_pos, params):
    if isinstance(inc, types.Integer):

        def by_code(inc, j, i, n_pos, params):
            if inc == AP_CODE:
                return ap_increment(j, i, n_pos, params)
            return _ndcg_increment(j, i, n_pos, params)

        return by_code
    return lambda inc, j, i, n_pos, params: inc(j, i, n_pos, params)


def get_loss(loss: "str | QSLoss") -> QSLoss:
    """A QS-suitable loss from its name or as given.

    Parameters
    ----------
    loss : str or QSLoss
        "ap", "ndcg", or a [QSLoss][qs.losses.QSLoss] instance (checked to have a kernel and
        a value).

    Returns
    -------
    QSLoss
        The loss object inference runs.

    Raises
    ------
    ValueError
        On an unknown name, or a QSLoss without an increment kernel or a `value`.

    Examples
    --------
    >>> from qs.losses import get_loss
    >>> get_loss("ndcg")
    NDCGLoss()
    """
    if isinstance(loss, QSLoss):
        return _checked(loss)
    try:
        return LOSSES[loss]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown loss {loss!r}; expected one of {sorted(LOSSES) + ['01']} "
            "or a QSLoss instance."
        ) from None


def _checked(loss):
    """A QSLoss instance once it has what inference calls: a numba increment kernel and its
    own ``value`` (a bare ``QSLoss()`` has neither)."""
    if not isinstance(loss.kernel, numba.core.dispatcher.Dispatcher):
        raise ValueError(
            f"loss {loss!r} has no increment kernel: a QSLoss subclass must set kernel to a "
            f"numba-compiled function kernel(j, i, n_pos, params); got {loss.kernel!r}."
        )
    if type(loss).value is QSLoss.value:
        raise ValueError(
            f"loss {loss!r} does not define value(n_above), the loss of a ranking; "
            "a QSLoss subclass must implement it."
        )
    return loss
