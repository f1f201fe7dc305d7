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
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from qs.ssvm._problem import Problem
from qs.ssvm.cutting_plane import solve

__all__ = ["LatentProblem", "LatentResult", "bag_argmax", "check_bags", "latent_cutting_plane"]

#: constraints idle for 20 cutting-plane iterations leave the working set every 50 (the
#: released latent AP-SVM's rule)
DROP = (20, 50)


def check_bags(X, offsets):
    """Validated ``(X, offsets)``: box features (n_boxes, d) as float64, dense or CSR, and the
    bag offsets (n_images + 1,), starting at 0, ending at n_boxes, every bag non-empty."""
    offsets = np.asarray(offsets)
    if getattr(X, "ndim", 2) != 2:
        raise ValueError(f"box features must be a 2-D matrix; got shape {np.shape(X)}.")
    if offsets.ndim != 1 or offsets.size < 2 or not np.issubdtype(offsets.dtype, np.integer):
        raise ValueError("offsets must be a 1-D integer array of n_images + 1 bag bounds; got "
                         f"shape {offsets.shape} and dtype {offsets.dtype}.")
    n_boxes = X.shape[0]
    if offsets[0] != 0 or offsets[-1] != n_boxes or (np.diff(offsets) < 1).any():
        raise ValueError(f"offsets must rise strictly from 0 to the {n_boxes} boxes (every "
                         "image holds at least one box).")
    # float64 once: every oracle call scores all boxes, and a float32 matrix times float64
    # weights would be converted on each call
    X = X.tocsr().astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if not np.isfinite(X.data if sp.issparse(X) else X).all():
        raise ValueError("box features hold NaN or infinite values.")
    return X, offsets.astype(np.int64)


def bag_argmax(box_scores, offsets):
    """Index of the best-scoring box of every bag (the first one among equal scores)."""
    starts = offsets[:-1]
    best = np.maximum.reduceat(box_scores, starts)
    at_best = np.flatnonzero(box_scores == np.repeat(best, np.diff(offsets)))
    return at_best[np.searchsorted(at_best, starts)]


class LatentProblem(Problem):
    """The inner structured SVM of one CCCP step: positives at their imputed boxes (rows of
    the box matrix), each negative image at its best box under the weights of every call."""

    def __init__(self, X, offsets, labels, pos_rows, **options):
        super().__init__(X[offsets[:-1]], labels, **options)
        self.boxes, self.offsets = X, offsets
        self.pos_rows = np.asarray(pos_rows, dtype=np.int64)

    def rows(self, box_scores):
        """One box per image: the imputed box of a positive, the best box of a negative."""
        rows = bag_argmax(box_scores, self.offsets)
        rows[self.is_pos] = self.pos_rows
        return rows

    def most_violated(self, w, rows=None):
        box_scores = np.asarray(self.boxes @ w).ravel()
        self.X = self.boxes[self.rows(box_scores)]
        return super().most_violated(w, rows)


@dataclass(frozen=True)
class LatentResult:
    """Outcome of :func:`latent_cutting_plane`.

    w : the weights. pos_boxes : box index (into the bag) of each positive image at ``w``.
    objective : latent objective after each outer step (every image at its best box).
    inner : the :class:`~qs.ssvm.SolverResult` of each outer step's cutting plane.
    lai_times : wall time of every LAI call, inner steps and objective evaluations.
    n_outer, converged : outer steps run; whether the objective settled before the cap.
    """

    w: np.ndarray
    pos_boxes: np.ndarray
    objective: np.ndarray
    inner: tuple
    lai_times: np.ndarray
    n_outer: int
    converged: bool

    @property
    def lai_calls(self):
        return self.lai_times.size

    @property
    def lai_time(self):
        return float(self.lai_times.sum())


def latent_cutting_plane(X, offsets, labels, *, C=100.0, loss="ap", method="auto", tol=1e-3,
                         max_iter=20000, max_outer=400, min_outer=2, init="random",
                         random_state=0, qp_solver="daqp", callback=None):
    """Train the latent structured SVM on bags of boxes by CCCP around the cutting plane.

    Parameters
    ----------
    X : array or sparse matrix (n_boxes, n_features), the boxes of every image in turn.
    offsets : int array (n_images + 1,): image ``i`` holds boxes ``offsets[i]:offsets[i+1]``.
    labels : array (n_images,): 1/True for an image that holds the class, 0/-1/False not.
    C, loss, method, tol, max_iter, qp_solver : as :func:`~qs.ssvm.cutting_plane`
        (defaults of the released latent AP-SVM: C = 100, tol = 0.001, 20000 iterations).
    max_outer, min_outer : bounds on the CCCP steps (released code: 400 and 2).
    init : "random" (a seeded random box of each positive image) or an int array giving
        the box (index within its bag) of each positive image.
    random_state : seed of the random initial boxes.
    callback : called with ``(outer_step, objective)`` after each outer step.

    Returns a :class:`LatentResult`; ``result.inner[k].n_iter`` etc. per outer step.
    """
    X, offsets = check_bags(X, offsets)
    options = {"C": C, "loss": loss, "method": method, "tol": tol, "max_iter": max_iter,
               "callback": None}
    first = LatentProblem(X, offsets, labels, np.zeros(0), **options)  # validates the rest
    is_pos = first.is_pos
    for name, value, low in (("max_outer", max_outer, 1), ("min_outer", min_outer, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
    starts, sizes = offsets[:-1][is_pos], np.diff(offsets)[is_pos]
    pos_rows = starts + _initial_boxes(init, sizes, random_state)
    objective, inner, lai_times = [], [], []
    converged = False
    for step in range(max_outer):
        prob = LatentProblem(X, offsets, labels, pos_rows, **options)
        result = solve(prob, X.shape[1], qp_solver, drop=DROP)
        inner.append(result)
        w = result.w
        pos_rows = bag_argmax(np.asarray(X @ w).ravel(), offsets)[is_pos]  # re-impute
        check = LatentProblem(X, offsets, labels, pos_rows, **options)
        _, _, xi = check.most_violated(w)
        objective.append(check.primal(w, xi))
        lai_times += [*result.lai_times, *check.lai_times]
        if callback is not None:
            callback(step + 1, objective[-1])
        settled = len(objective) >= 2 and objective[-2] - objective[-1] < C * tol
        if step + 1 >= min_outer and settled:
            converged = True
            break
    return LatentResult(w, pos_rows - starts, np.array(objective), tuple(inner),
                        np.array(lai_times), len(objective), converged)


def _initial_boxes(init, sizes, random_state):
    if isinstance(init, str):
        if init != "random":
            raise ValueError(f"init must be 'random' or an array of box indices; got {init!r}.")
        rng = np.random.default_rng(random_state)
        return (rng.random(sizes.size) * sizes).astype(np.int64)
    boxes = np.asarray(init)
    if boxes.shape != sizes.shape or not np.issubdtype(boxes.dtype, np.integer) \
            or (boxes < 0).any() or (boxes >= sizes).any():
        raise ValueError(f"init must give one box index (0 <= index < the image's box count) "
                         f"for each of the {sizes.size} positive images.")
    return boxes.astype(np.int64)
