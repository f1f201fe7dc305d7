"""Latent structured SVM for bags of boxes (the latent AP-SVM of Behl, Jawahar, Kumar, CVPR 2014).

Each image is a bag of candidate boxes whose box is latent; an image is positive for the
class when it holds an object of it. The joint feature of a ranking of the images is that of
the ranking SVM over one box per image. CCCP (an outer loop around the cutting plane):

1. impute each positive image's box as its best-scoring one under the current weights (at
   the start: a seeded random box, or boxes given by the caller);
2. solve the structured SVM with those boxes fixed, where each negative image takes its
   best-scoring box inside every loss-augmented inference call, and the same choice enters
   both the true and the most violated ranking's joint feature (a negative's coefficient in
   ``Psi(R) - Psi(R*)`` is never negative, so its best box is the exact maximiser);
3. stop when the latent objective falls by less than ``C * tol`` (after ``min_outer`` steps).

The latent objective ``1/2 |w|^2 + C xi(w)``, with every image at its best box, never
increases from one outer step to the next beyond the inner solver's tolerance: step 2 starts
from an upper bound that is tight at the previous weights.

Bags come in one of two layouts. Flat: the box matrix ``X`` (n_boxes, d), dense or sparse,
image after image, with ``offsets`` (n_images + 1,). Padded: ``features`` (n_images, K_max, d)
with ``counts`` (n_images,) valid boxes per image, a NumPy array in memory or a Dask or zarr
array scored block by block (`qs.detection.score_bags`, on the threaded scheduler or a
``dask.distributed`` cluster). Both give the same model. The cost out of core: every LAI call
is one pass over all boxes (the negatives' best boxes move with the weights), and each outer
step adds one pass that re-imputes the positives and evaluates the objective together; a
class trained for ``T`` cutting-plane iterations in all reads the store ``T`` + (outer steps)
times, and 20 classes 20 times that.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from qs.detection import bag_argmax, check_padded, dask_scheduler, score_bags
from qs.ssvm._problem import Problem
from qs.ssvm.cutting_plane import solve
from qs.top_boxes import top_boxes

__all__ = [
    "Bags",
    "LatentProblem",
    "LatentResult",
    "as_bags",
    "bag_argmax",
    "check_bags",
    "initial_boxes",
    "latent_cutting_plane",
]

#: constraints idle for 20 cutting-plane iterations leave the working set every 50 (the
#: released latent AP-SVM's rule)
DROP = (20, 50)


def check_bags(X: Any, offsets: npt.ArrayLike) -> tuple[Any, np.ndarray]:
    """Flat bags of boxes checked: the box features as float64 and the offsets as int64.

    Parameters
    ----------
    X : array_like or scipy.sparse matrix of shape (n_boxes, d)
        The box features, the boxes of every image in turn.
    offsets : array_like of int, shape (n_images + 1,)
        The bag bounds: image ``i`` holds boxes ``offsets[i]:offsets[i + 1]``.

    Returns
    -------
    X : numpy.ndarray or scipy.sparse.csr_matrix of shape (n_boxes, d)
        The features as float64 (dense, or CSR when sparse).
    offsets : numpy.ndarray of shape (n_images + 1,)
        The bounds as int64.

    Raises
    ------
    ValueError
        If `X` is not 2-D or holds NaN or infinite values, or if `offsets` is not a 1-D
        integer array rising strictly from 0 to n_boxes (every image at least one box).

    Examples
    --------
    >>> X, offsets = check_bags(np.ones((3, 2), dtype=np.float32), [0, 1, 3])
    >>> X.dtype, offsets.tolist()
    (dtype('float64'), [0, 1, 3])
    """
    offsets = np.asarray(offsets)
    if getattr(X, "ndim", 2) != 2:
        raise ValueError(f"box features must be a 2-D matrix; got shape {np.shape(X)}.")
    if offsets.ndim != 1 or offsets.size < 2 or not np.issubdtype(offsets.dtype, np.integer):
        raise ValueError(
            "offsets must be a 1-D integer array of n_images + 1 bag bounds; got "
            f"shape {offsets.shape} and dtype {offsets.dtype}."
        )
    n_boxes = X.shape[0]
    if offsets[0] != 0 or offsets[-1] != n_boxes or (np.diff(offsets) < 1).any():
        raise ValueError(
            f"offsets must rise strictly from 0 to the {n_boxes} boxes (every "
            "image holds at least one box)."
        )
    # float64 once: every oracle call scores all boxes, and a float32 matrix times float64
    # weights would be converted on each call
    X = X.tocsr().astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if not np.isfinite(X.data if sp.issparse(X) else X).all():
        raise ValueError("box features hold NaN or infinite values.")
    return X, offsets.astype(np.int64)


def as_bags(
    X: Any, bounds: npt.ArrayLike | None, scheduler: Any = None, working_set: int | None = None
) -> "Bags":
    """The `Bags` the latent solvers see, checked, from flat or padded box features.

    Parameters
    ----------
    X : array_like, scipy.sparse matrix, dask array, zarr array or Bags
        Flat box features (n_boxes, d), or padded ones (n_images, K_max, d); bags already
        made pass through unchanged.
    bounds : array_like of int or None
        Flat: the offsets (n_images + 1,); padded: the valid boxes per image (n_images,);
        None for bags already made.
    scheduler : str, distributed.Client or None, default None
        Where padded Dask or zarr bags are scored, as `qs.detection.score_bags` takes it.
    working_set : int or None, default None
        None, or the boxes per image kept in memory between passes (see
        `latent_cutting_plane`).

    Returns
    -------
    Bags
        The bags.

    Raises
    ------
    ValueError
        On bad or missing bounds or bad features (see `check_bags` and
        `qs.detection.check_padded`), a `working_set` that is not None or an integer >= 1,
        or a working set asked of sparse features.

    Examples
    --------
    >>> bags = as_bags(np.ones((3, 2)), np.array([0, 1, 3]))
    >>> bags.sizes.tolist(), bags.shape
    ([1, 2], (2, 2))
    """
    if isinstance(X, Bags):
        return X
    if bounds is None:
        raise ValueError("box features need their bounds: the offsets (flat) or counts (padded).")
    if working_set is not None and (
        isinstance(working_set, bool)
        or not isinstance(working_set, (int, np.integer))
        or working_set < 1
    ):
        raise ValueError(f"working_set must be None or an integer >= 1; got {working_set!r}.")
    bags: Bags
    if getattr(X, "ndim", 2) == 3:
        bags = _PaddedBags(*check_padded(X, bounds), scheduler)
    else:
        X, offsets = check_bags(X, bounds)
        if working_set is not None and sp.issparse(X):
            raise ValueError("working_set needs dense box features; got a sparse matrix.")
        bags = _FlatBags(X, offsets)
    return bags if working_set is None else _WorkingSet(bags, int(working_set))


class Bags:
    """The base of the bags of boxes the latent solvers see (`as_bags` makes them).

    A box is named by its row in the box matrix (flat: a row of ``X``; padded:
    ``image * K_max + box``). A subclass gives ``best(w)``, each image's best row and the
    features of those rows (n_images, d); ``take(rows)``, the features of rows;
    ``chosen(w, is_pos, pos_rows, pos_X)``, the features of the positives' given boxes and
    of the negatives' best boxes under ``w``; ``starts`` and ``sizes``, the first row and the
    box count of each image; ``passes``, the passes over every box so far (images scored in
    full over all images: a pass over a few images counts as that fraction of one). The
    working sets of `qs.ssvm.lockstep` subclass it too, so that `as_bags` passes them
    through.

    Examples
    --------
    >>> bags = as_bags(np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), np.array([0, 2, 3]))
    >>> isinstance(bags, Bags), bags.starts.tolist(), bags.sizes.tolist()
    (True, [0, 2], [2, 1])
    """

    starts: np.ndarray
    sizes: np.ndarray
    shape: tuple[int, int]
    passes: float = 0

    def best(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each image's best row under ``w``, and the features of those rows.

        Parameters
        ----------
        w : numpy.ndarray of shape (d,)
            The weights.

        Returns
        -------
        rows : numpy.ndarray of shape (n_images,), int
            Each image's best row.
        features : numpy.ndarray of shape (n_images, d)
            Their features.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.1]])
        >>> bags = as_bags(X, np.array([0, 2, 4]))  # 2 images of 2 boxes
        >>> rows, features = bags.best(np.array([1.0, 0.0]))
        >>> rows.tolist(), features.tolist(), bags.passes
        ([0, 2], [[1.0, 0.0], [0.5, 0.5]], 1)
        """
        raise NotImplementedError

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The features of some rows.

        Parameters
        ----------
        rows : numpy.ndarray of int
            Rows of the box matrix.

        Returns
        -------
        numpy.ndarray of shape (len(rows), d)
            Their features.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.1]])
        >>> bags = as_bags(X, np.array([0, 2, 4]))  # 2 images of 2 boxes
        >>> bags.take(np.array([1, 3])).tolist()
        [[0.0, 1.0], [0.2, 0.1]]
        """
        raise NotImplementedError

    def chosen(
        self, w: np.ndarray, is_pos: np.ndarray, pos_rows: np.ndarray, pos_X: np.ndarray
    ) -> np.ndarray:
        """The positives' given features, and each negative's best box's under ``w``.

        Parameters
        ----------
        w : numpy.ndarray of shape (d,)
            The weights.
        is_pos : numpy.ndarray of shape (n_images,), bool
            True at the positive images.
        pos_rows : numpy.ndarray of int
            The positives' given rows.
        pos_X : numpy.ndarray of shape (n_positives, d)
            Their features.

        Returns
        -------
        numpy.ndarray of shape (n_images, d)
            One box's features per image.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.1]])
        >>> bags = as_bags(X, np.array([0, 2, 4]))  # 2 images of 2 boxes
        >>> is_pos = np.array([True, False])
        >>> bags.chosen(np.array([1.0, 0.0]), is_pos, np.array([1]), X[[1]]).tolist()
        [[0.0, 1.0], [0.5, 0.5]]
        """
        raise NotImplementedError


class _FlatBags(Bags):
    def __init__(self, X, offsets):
        self.X, self.offsets = X, offsets
        self.starts, self.sizes = offsets[:-1], np.diff(offsets)
        self.shape = (self.sizes.size, X.shape[1])

    def best(self, w):
        self.passes += 1
        rows = bag_argmax(np.asarray(self.X @ w).ravel(), self.offsets)
        return rows, self.X[rows]

    def take(self, rows):
        return self.X[rows]

    def chosen(self, w, is_pos, pos_rows, pos_X):
        self.passes += 1
        rows = bag_argmax(np.asarray(self.X @ w).ravel(), self.offsets)
        rows[is_pos] = pos_rows
        return self.X[rows]

    def top(self, w, k, images=None):
        if images is None:
            self.passes += 1
            return top_boxes(self.X, self.sizes, w, k)
        self.passes += images.size / self.sizes.size
        rows = np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in images])
        return top_boxes(self.X[rows], self.sizes[images], w, k)


class _PaddedBags(Bags):
    def __init__(self, features, counts, scheduler):
        self.features, self.sizes, self.scheduler = features, counts, scheduler
        n, self.k_max, d = features.shape
        self.starts = np.arange(n, dtype=np.int64) * self.k_max
        self.shape = (n, d)

    def best(self, w):
        self.passes += 1
        res = score_bags(self.features, self.sizes, w[:, None], rows=True, scheduler=self.scheduler)
        return self.starts + res.best[:, 0], res.rows[:, 0]

    def top(self, w, k, images=None):
        if images is None:
            self.passes += 1
            return top_boxes(self.features, self.sizes, w, k, scheduler=self.scheduler)
        self.passes += images.size / self.sizes.size
        return top_boxes(self.features[images], self.sizes[images], w, k, scheduler=self.scheduler)

    def take(self, rows):
        images, boxes = np.divmod(rows, self.k_max)
        if isinstance(self.features, np.ndarray):
            return self.features[images, boxes]
        if rows.size == 0:
            return np.zeros((0, self.shape[1]))
        with dask_scheduler(self.scheduler) as get:
            return self.features.vindex[images, boxes].compute(scheduler=get).astype(np.float64)

    def chosen(self, w, is_pos, pos_rows, pos_X):
        _, X = self.best(w)
        X[is_pos] = pos_X
        return X


class _WorkingSet(Bags):
    """Bags whose negatives' best boxes come from a working set held in memory: each image's
    ``k`` best boxes under the weights ``w0`` (its anchor) of the last time its boxes were all
    scored. A box left out scores at most ``next_score + mean . (w - w0) + spread *
    |w - w0|`` under ``w`` (`top_boxes`), so when a negative's best box in
    the working set scores above that bound, it is the image's best box (the first among
    equal scores, as a pass would choose); the negatives where it does not are scored again
    in full at ``w``, which renews their working set. Every answer is that of a full pass."""

    #: relative margin of the bound for the rounding of scores (a closer call scores again)
    SLACK = 1e-9

    def __init__(self, bags, k):
        self.bags, self.k = bags, k
        self.starts, self.sizes, self.shape = bags.starts, bags.sizes, bags.shape
        self._top = None
        self._anchors, self._anchor = [], None  # weights of the renewals; each image's

    @property
    def passes(self):
        return self.bags.passes

    def _renew(self, w, images=None):
        """Score every box of ``images`` (all: None) at ``w``; their working sets renewed."""
        top = self.bags.top(w, self.k, images)
        if images is None:
            self._top, self._anchors = top, [np.array(w, dtype=np.float64)]
            self._anchor = np.zeros(self.shape[0], dtype=np.int64)
            self._mean_at_anchor = top.mean @ w
            return
        for old, new in zip(self._top, top):
            old[images] = new
        self._mean_at_anchor[images] = top.mean @ w
        self._anchors.append(np.array(w, dtype=np.float64))
        self._anchor[images] = len(self._anchors) - 1
        used = np.unique(self._anchor)  # anchors no image refers to any more go
        self._anchors = [self._anchors[i] for i in used]
        self._anchor = np.searchsorted(used, self._anchor)

    def best(self, w):
        self._renew(w)
        return self.starts + self._top.index[:, 0], self._top.rows[:, 0].copy()

    def take(self, rows):
        return self.bags.take(rows)

    def chosen(self, w, is_pos, pos_rows, pos_X):
        renewed = self._top is None
        if renewed:
            self._renew(w)
        scores = self._scores(w)
        if not renewed:
            unsure = np.flatnonzero(~is_pos & ~self._proven(w, scores.max(axis=1)))
            if unsure.size:
                self._renew(w, unsure)
                scores[unsure] = self._scores(w, unsure)
        top = self._top
        high = scores.max(axis=1)
        # the first box among the working set's equal best scores
        at = np.where(scores == high[:, None], top.index, np.iinfo(np.int64).max)
        X = top.rows[np.arange(scores.shape[0]), at.argmin(axis=1)]
        X[is_pos] = pos_X
        return X

    def _scores(self, w, images=slice(None)):
        """The working set's scores under ``w`` (of ``images``), -inf where a bag has fewer
        boxes than the set holds."""
        top = self._top
        return np.where(top.index[images] >= 0, np.matmul(top.rows[images], w), -np.inf)

    def _proven(self, w, high):
        """Per image: whether its best box under ``w`` is in its working set (by the bound),
        ``high`` the working set's best score under ``w``."""
        top = self._top
        moved = np.array([np.linalg.norm(w - a) for a in self._anchors])[self._anchor]
        bound = top.next_score + top.mean @ w - self._mean_at_anchor + top.spread * moved
        finite = np.where(np.isfinite(bound), bound, 0.0)
        return high > bound + self.SLACK * (1.0 + np.abs(high) + np.abs(finite))


class LatentProblem(Problem):
    """The inner structured SVM of one CCCP step of `latent_cutting_plane`.

    The positives sit at their imputed boxes; each negative image takes its best box under
    the weights of every call.

    Parameters
    ----------
    X : array_like, scipy.sparse matrix, dask array, zarr array or Bags
        The bags, as `as_bags` takes them.
    bounds : array_like of int or None
        Their offsets or counts (None for bags already made).
    labels : array_like of shape (n_images,)
        1/True for an image that holds the class, 0/-1/False not.
    pos_rows : array_like of int
        The imputed box of each positive image, as a row of the box matrix (see `Bags`).
    pos_X : numpy.ndarray or None, default None
        The features of those rows, when known (else read from the bags).
    scheduler : str, distributed.Client or None, default None
        As `as_bags` takes it.
    **options : Any
        ``C``, ``loss``, ``method``, ``tol``, ``max_iter``, ``callback`` and
        ``lai_callback``, as the structured SVM's problem takes them.

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.1]])
    >>> prob = LatentProblem(
    ...     X, np.array([0, 2, 4]), [1, 0], [0], C=1.0, loss="ap", method="auto",
    ...     tol=1e-3, max_iter=10, callback=None,
    ... )
    >>> a, b, xi = prob.most_violated(np.array([1.0, 0.0]))
    >>> float(xi)
    0.0
    """

    def __init__(
        self,
        X: Any,
        bounds: npt.ArrayLike | None,
        labels: npt.ArrayLike,
        pos_rows: npt.ArrayLike,
        *,
        pos_X: np.ndarray | None = None,
        scheduler: Any = None,
        **options: Any,
    ) -> None:
        self.bags = as_bags(X, bounds, scheduler)
        super().__init__(np.zeros(self.bags.shape), labels, **options)
        self.pos_rows = np.asarray(pos_rows, dtype=np.int64)
        self.pos_X = self.bags.take(self.pos_rows) if pos_X is None else pos_X

    def most_violated(
        self, w: np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, float, float]:
        """The most violated constraint at `w`, each negative at its best box under `w`.

        Parameters
        ----------
        w : numpy.ndarray of shape (d,)
            The weights.
        rows : numpy.ndarray of int or None, default None
            The images of a stochastic step, or None for all.

        Returns
        -------
        tuple of (numpy.ndarray, float, float)
            ``(a, b, xi)``: the constraint ``w . a >= b - xi`` and its slack at `w`.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.1]])
        >>> prob = LatentProblem(X, np.array([0, 2, 4]), [1, 0], [0], C=1.0, loss="ap",
        ...                      method="auto", tol=1e-3, max_iter=10, callback=None)
        >>> a, b, xi = prob.most_violated(np.array([0.0, 1.0]))  # the negative ranks first
        >>> a.tolist(), b, xi
        ([1.0, -1.0], 0.5, 1.5)
        """
        self.X = self.bags.chosen(w, self.is_pos, self.pos_rows, self.pos_X)
        return super().most_violated(w, rows)

    def latent_objective(self, w: np.ndarray, X_best: np.ndarray) -> float:
        """The latent objective at `w`, every image at its best box there.

        Parameters
        ----------
        w : numpy.ndarray of shape (d,)
            The weights.
        X_best : numpy.ndarray of shape (n_images, d)
            The features of every image's best box at `w` (the positives re-imputed: one
            scoring pass serves both).

        Returns
        -------
        float
            ``1/2 |w|^2 + C xi(w)``.

        Examples
        --------
        >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.1]])
        >>> prob = LatentProblem(X, np.array([0, 2, 4]), [1, 0], [0], C=1.0, loss="ap",
        ...                      method="auto", tol=1e-3, max_iter=10, callback=None)
        >>> float(prob.latent_objective(np.array([1.0, 0.0]), X[[0, 2]]))  # no slack: |w|^2 / 2
        0.5
        """
        self.X = X_best
        _, _, xi = super().most_violated(w)
        return self.primal(w, xi)


@dataclass(frozen=True)
class LatentResult:
    """Outcome of `latent_cutting_plane`.

    Parameters
    ----------
    w : numpy.ndarray of shape (d,)
        The weights.
    pos_boxes : numpy.ndarray of int
        The box index (into its bag) of each positive image at `w`.
    objective : numpy.ndarray
        The latent objective after each outer step (every image at its best box).
    inner : tuple of SolverResult
        The cutting plane's result of each outer step.
    lai_times : numpy.ndarray
        The wall time of every LAI call, inner steps and objective evaluations.
    n_outer : int
        The outer steps run.
    converged : bool
        Whether the objective settled before the cap on outer steps.
    passes : float
        Passes over every box (the reads of the whole store when it is on disk), a pass
        over some images counting as that fraction of one.

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.1]])
    >>> result = latent_cutting_plane(X, np.array([0, 2, 4]), [1, 0], C=1.0)
    >>> result.pos_boxes.tolist(), result.converged, result.w.shape
    ([1], True, (2,))
    """

    w: np.ndarray
    pos_boxes: np.ndarray
    objective: np.ndarray
    inner: tuple
    lai_times: np.ndarray
    n_outer: int
    converged: bool
    passes: float

    @property
    def lai_calls(self) -> int:
        """The number of LAI calls."""
        return self.lai_times.size

    @property
    def lai_time(self) -> float:
        """The total wall time of the LAI calls, in seconds."""
        return float(self.lai_times.sum())


def latent_cutting_plane(
    X: Any,
    bounds: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    C: float = 100.0,
    loss: str = "ap",
    method: str = "auto",
    tol: float = 1e-3,
    max_iter: int = 20000,
    max_outer: int = 400,
    min_outer: int = 2,
    init: str | npt.ArrayLike = "random",
    random_state: int = 0,
    qp_solver: str = "daqp",
    scheduler: Any = None,
    working_set: int | None = None,
    callback: Callable[[int, float, float], object] | None = None,
    lai_callback: Callable[[np.ndarray, np.ndarray], object] | None = None,
) -> LatentResult:
    """Train the latent structured SVM on bags of boxes by CCCP around the cutting plane.

    Parameters
    ----------
    X : array_like, scipy.sparse matrix, dask array or zarr array
        The bags, flat or padded. Flat: an array or sparse matrix (n_boxes, n_features),
        the boxes of every image in turn. Padded: (n_images, K_max, n_features), a NumPy,
        Dask or zarr array.
    bounds : array_like of int
        Flat: the offsets (n_images + 1,), image ``i`` holding boxes
        ``offsets[i]:offsets[i+1]``; padded: the counts (n_images,) of valid boxes per image.
    labels : array_like of shape (n_images,)
        1/True for an image that holds the class, 0/-1/False not.
    C : float, default 100.0
        The weight of the slack, as `qs.ssvm.cutting_plane.cutting_plane` takes it (the
        released latent AP-SVM's default).
    loss : str, default "ap"
        The rank-based loss, as `qs.ssvm.cutting_plane.cutting_plane` takes it.
    method : str, default "auto"
        The LAI method.
    tol : float, default 1e-3
        Tolerance of the inner solves and of the latent objective's decrease (in units of
        `C`).
    max_iter : int, default 20000
        Cap on the cutting-plane iterations of one inner solve.
    max_outer : int, default 400
        Cap on the CCCP steps.
    min_outer : int, default 2
        CCCP steps made before the objective may count as settled.
    init : str or array_like of int, default "random"
        "random" (a seeded random box of each positive image) or the box (index within its
        bag) of each positive image.
    random_state : int, default 0
        Seed of the random initial boxes.
    qp_solver : str, default "daqp"
        ``qpsolvers`` backend of the inner solves' dual QP.
    scheduler : str, distributed.Client or None, default None
        Where padded Dask or zarr bags are scored (see `qs.detection.score_bags`): the
        threaded scheduler by default, or the address of a ``dask.distributed`` scheduler.
    working_set : int or None, default None
        None (every LAI call scores every box), or ``k``: each image's ``k`` best boxes
        under the weights of the last pass over every box are kept in memory (n_images x k x
        n_features float64), and an LAI call takes its negatives' best boxes from them when
        a bound on the boxes left out proves them best, else it makes a pass that renews
        them; each outer step ends with a pass (re-imputing the positives). The same model
        as without (exact), in far fewer passes when the data are on disk.
    callback : callable or None, default None
        Called with ``(outer_step, objective, passes)`` after each outer step (``passes``:
        over every box so far).
    lai_callback : callable or None, default None
        As `qs.ssvm.cutting_plane.cutting_plane` takes it: called with the inputs of every
        LAI call (inner steps and objective evaluations alike).

    Returns
    -------
    LatentResult
        The weights, the positives' boxes, the objective per outer step and the inner
        solves' results (``result.inner[k].n_iter`` ...).

    Raises
    ------
    ValueError
        On bad bags or labels, a `max_outer` or `min_outer` that is not an integer >= 1, a
        bad `init` or `working_set`, or a bad option of the inner problem (`C`, `tol`,
        `loss`, `method`).

    Examples
    --------
    Four images of three boxes each, two of them positive:

    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(12, 3))
    >>> result = latent_cutting_plane(X, np.arange(0, 13, 3), [1, 0, 1, 0], C=10.0)
    >>> result.w.shape, result.pos_boxes.shape, result.converged
    ((3,), (2,), True)
    """
    options: dict[str, Any] = {
        "C": C,
        "loss": loss,
        "method": method,
        "tol": tol,
        "max_iter": max_iter,
        "callback": None,
        "lai_callback": lai_callback,
    }
    for name, value, low in (("max_outer", max_outer, 1), ("min_outer", min_outer, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
    with dask_scheduler(scheduler) as get:  # one client for the whole run
        bags = as_bags(X, bounds, get, working_set)
        first = LatentProblem(bags, None, labels, np.zeros(0), **options)  # validates the rest
        is_pos = first.is_pos
        starts = bags.starts[is_pos]
        pos_rows = starts + initial_boxes(init, bags.sizes[is_pos], random_state)
        pos_X = bags.take(pos_rows)
        objective, inner, lai_times = [], [], []
        converged = False
        for step in range(max_outer):
            prob = LatentProblem(bags, None, labels, pos_rows, pos_X=pos_X, **options)
            result = solve(prob, bags.shape[1], qp_solver, drop=DROP)
            inner.append(result)
            w = result.w
            best_rows, X_best = bags.best(w)  # re-impute
            pos_rows, pos_X = best_rows[is_pos], X_best[is_pos]
            check = LatentProblem(bags, None, labels, pos_rows, pos_X=pos_X, **options)
            objective.append(check.latent_objective(w, X_best))
            lai_times += [*result.lai_times, *check.lai_times]
            if callback is not None:
                callback(step + 1, objective[-1], bags.passes)
            settled = len(objective) >= 2 and objective[-2] - objective[-1] < C * tol
            if step + 1 >= min_outer and settled:
                converged = True
                break
    return LatentResult(
        w,
        pos_rows - starts,
        np.array(objective),
        tuple(inner),
        np.array(lai_times),
        len(objective),
        converged,
        bags.passes,
    )


def initial_boxes(init: str | npt.ArrayLike, sizes: np.ndarray, random_state: int) -> np.ndarray:
    """The initial box of each positive image: seeded at random, or as given.

    Parameters
    ----------
    init : str or array_like of int
        "random", or one box index per image (0 <= index < the image's box count).
    sizes : numpy.ndarray of shape (n_images,)
        The box count of each image.
    random_state : int
        Seed of the random boxes.

    Returns
    -------
    numpy.ndarray of shape (n_images,)
        The box index (int64) of each image, within the image.

    Raises
    ------
    ValueError
        If `init` is another string, or not one valid box index per image.

    Examples
    --------
    >>> import numpy as np
    >>> initial_boxes(np.array([0, 2]), np.array([3, 3]), random_state=0).tolist()
    [0, 2]
    >>> boxes = initial_boxes("random", np.array([3, 1]), random_state=0)
    >>> bool(((boxes >= 0) & (boxes < [3, 1])).all())
    True
    """
    if isinstance(init, str):
        if init != "random":
            raise ValueError(f"init must be 'random' or an array of box indices; got {init!r}.")
        rng = np.random.default_rng(random_state)
        return (rng.random(sizes.size) * sizes).astype(np.int64)
    boxes = np.asarray(init)
    if (
        boxes.shape != sizes.shape
        or not np.issubdtype(boxes.dtype, np.integer)
        or (boxes < 0).any()
        or (boxes >= sizes).any()
    ):
        raise ValueError(
            f"init must give one box index (0 <= index < the image's box count) "
            f"for each of the {sizes.size} positive images."
        )
    return boxes.astype(np.int64)
