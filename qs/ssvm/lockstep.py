"""Latent AP-SVM training of every class at once, out of core: one pass over all boxes per round.

The latent structured SVM of `qs.ssvm.latent.latent_cutting_plane` solves, at each
outer (CCCP) step, an inner structured SVM whose negatives take their best box under the
weights of every LAI call: in memory a product of all boxes with ``w`` per call, out of core
a pass over the store per call. Here each class keeps a working set in memory instead: each
image's ``k`` best boxes under the weights of the class's last pass. A round

1. solves every unfinished class's inner problem with its negatives' boxes taken from the
   working set only (the positives at their imputed boxes);
2. makes ONE pass over every box for all those classes' new weights at once
   ([qs.top_boxes.class_top_boxes][]: one product of the box features with the (d,
   classes) weight matrix per image);
3. per class, *confirms* the step when every negative's best box under the new weights
   scores no higher than the working set's best (to rounding): then the inner problem's
   hinge term is the same with and without the working set at those weights, and as it is
   never larger with the working set anywhere, the weights solve the full inner problem
   within the solver's tolerance. The step ends as in memory (positives re-imputed,
   the latent objective from every image's best box) and the working set takes in the new
   top ``k``. Otherwise the working set *grows* by the new top ``k`` and the missing best
   boxes, and the class repeats the step; the repeats of a step end, as each adds a box a
   negative lacked. Within a step a working set only grows; without
   ``restart_working_sets`` it keeps growing across steps (the boxes one step needed serve
   the next), with it a confirmed step's working set restarts from its new top ``k``, and
   the rows no unfinished class's working set names are freed (the memory then follows the
   current steps, not the whole training).

With ``verify="step"`` a repeated step's inner solve starts from the constraints of its
last solve (`qs.ssvm.cutting_plane.Constraints`): each is a constraint of the
repeat's problem too, whose negatives only gain boxes, so the repeat starts at their
solution instead of ``w = 0`` (``verify="path"`` starts at zero, as in memory). They are
part of the state, so a resumed training repeats the step as the uninterrupted one does. The
working sets' features are held once per box for all classes, in the features' own type
(`qs.ssvm._working_sets`), in a file (a class's solve reads its own rows into memory,
the decisions after a pass read what they need from the file): memory holds one class's
working set at a time, not every class's. A pass over a Dask array scores a group of images
at a time and adds the group's new rows before the next (about ``PASS_BYTES`` of them), so
the rows a pass brings and the pool's copies of them are never all held twice.

So a training costs about as many passes as outer steps plus repeats, tens where the
per-call design costs thousands. When the working set holds every box the model is the
in-memory one to the bit; with fewer it is the same optimum of each step to the solver's
tolerance (the cutting plane's path differs). Every LAI call can also be timed with other
exact methods on the same scores (``timed_methods``: their answers are checked equal), so one
training gives the LAI time of each method. The whole state after each round is a
`LockstepState`, which a caller can store (`LockstepState.to_arrays`) and pass
back to resume the training at that round; resuming costs one pass to gather the working
sets' boxes again.
"""

import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from qs.detection import check_padded, dask_scheduler
from qs.inference import lai
from qs.ssvm._lockstep_state import ClassState, LockstepState
from qs.ssvm._working_sets import Resident, RowPool, lacking_boxes
from qs.ssvm.cutting_plane import Constraints, solve
from qs.ssvm.latent import DROP, LatentProblem, initial_boxes
from qs.top_boxes import ClassTopBoxes, class_top_boxes

__all__ = ["ClassState", "LockstepOptions", "LockstepState", "latent_lockstep"]


class _Timed(LatentProblem):
    """The latent problem whose every LAI call is also timed with the exact methods ``timed``
    on the same scores; their answer is checked to be the training method's."""

    def __init__(self, *args, timed=(), **options):
        super().__init__(*args, **options)
        self.timed = {m: [] for m in timed}

    def most_violated(self, w, rows=None):
        a, b, xi = super().most_violated(w, rows)
        self._time_others(xi)
        return a, b, xi

    def latent_objective(self, w, X_best):
        value = super().latent_objective(w, X_best)
        self._time_others((value - 0.5 * (w @ w)) / self.C)
        return value

    def _time_others(self, xi):
        for method, times in self.timed.items():
            if not times:  # loads or compiles the kernels
                lai(self.last_scores, self.is_pos, loss=self.loss, method=method)
            start = time.perf_counter()
            res = lai(self.last_scores, self.is_pos, loss=self.loss, method=method)
            times.append(time.perf_counter() - start)
            other = res.objective - res.ground_truth_F
            if not np.isclose(other, xi, rtol=1e-9, atol=1e-12):
                raise RuntimeError(
                    f"LAI methods {self.method!r} and {method!r} disagree on the "
                    f"same scores: slack {xi!r} against {other!r}."
                )


@dataclass(frozen=True)
class LockstepOptions:
    """The options of `latent_lockstep`'s training: what it solves and how it verifies.

    ``C``, ``loss``, ``method``, ``tol``, ``max_iter``, ``max_outer``, ``min_outer``,
    ``init``, ``random_state`` and ``qp_solver`` are those of
    `qs.ssvm.latent.latent_cutting_plane`, per class; the others say which LAI methods are
    timed and how the working sets are kept and checked (see the module's text).

    Parameters
    ----------
    C : float or array_like of shape (n_classes,), default 100.0
        One value for every class, or one per class.
    loss : str, default "ap"
        As `qs.ssvm.latent.latent_cutting_plane` takes it, per class.
    method : str, default "auto"
        The LAI method of training.
    timed_methods : tuple of str, default ()
        Other LAI methods timed on every LAI call's scores (exact: the same answer).
    tol : float, default 1e-3
        Tolerance of the inner solves and of the latent objective's decrease (in units of
        ``C``).
    max_iter : int, default 20000
        Cap on the cutting-plane iterations of one inner solve.
    max_outer : int, default 400
        Cap on the outer steps of a class.
    min_outer : int, default 2
        Outer steps made before a class's objective may count as settled.
    init : str, list of ndarray or array_like, default "random"
        "random" (a seeded random box per positive image, as
        `qs.ssvm.latent.latent_cutting_plane` draws it with ``random_state``), a list
        of one int array of boxes per class (one per positive image), or weights (d,
        n_classes): each positive image starts at its best box under its class's column
        (the first pass's top box), and the first working sets are the top boxes under them.
    random_state : int, default 0
        Seed of the random initial boxes.
    working_set_size : int, default 5
        ``k``, the boxes per image and class a pass keeps (their features held
        once per box for all classes, in the features' type), plus each image's first box
        with ``verify="path"`` (the best of all at ``w = 0``, where each inner solve starts).
    verify : str, default "path"
        "path": a step is confirmed when the pass finds every negative's best box
        under every weight vector of the inner solve in the working set, or chosen (the
        pass scores all of them): the model is the in-memory one, step by step; "step":
        under the step's final weights only (the same optimum of each step to the solver's
        tolerance, the path of the cutting plane and so the CCCP's may differ; a pass then
        scores one weight vector per class), and a step whose hinge term with every
        negative at its best box exceeds the working set's by at most ``tol`` is confirmed
        too (its weights then solve the full inner problem to within twice the solver's
        tolerance, ``C tol`` each).
    restart_working_sets : bool or None, default None
        True: at a confirmed outer step a working set restarts from the step's top ``k``
        (and the first box with ``verify="path"``): less memory, perhaps more repeats.
        False: a working set keeps every box it took in. None: False with
        ``verify="path"`` (whose passes check every weight vector of a solve from
        ``w = 0``, which earlier steps' boxes serve), True with ``verify="step"`` (whose
        passes check a step's final weights, near the last step's).
    qp_solver : str, default "daqp"
        ``qpsolvers`` backend of the inner solves' dual QP.

    Raises
    ------
    ValueError
        On a bad ``working_set_size``, ``verify``, ``restart_working_sets``, ``max_outer``
        or ``min_outer``.

    Examples
    --------
    >>> from qs.ssvm.lockstep import LockstepOptions
    >>> options = LockstepOptions(C=10.0, verify="step")
    >>> options.verify_path, options.restarts_working_sets
    (False, True)
    """

    C: float | npt.ArrayLike = 100.0
    loss: str = "ap"
    method: str = "auto"
    timed_methods: tuple[str, ...] = ()
    tol: float = 1e-3
    max_iter: int = 20000
    max_outer: int = 400
    min_outer: int = 2
    init: Any = "random"
    random_state: int = 0
    working_set_size: int = 5
    verify: Literal["path", "step"] = "path"
    restart_working_sets: bool | None = None
    qp_solver: str = "daqp"

    def __post_init__(self) -> None:
        for name in ("working_set_size", "max_outer", "min_outer"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1; got {value!r}.")
        if self.verify not in VERIFY:
            raise ValueError(f"verify must be one of {', '.join(VERIFY)}; got {self.verify!r}.")
        if self.restart_working_sets not in (True, False, None):
            raise ValueError(
                f"restart_working_sets must be True, False or None; "
                f"got {self.restart_working_sets!r}."
            )
        object.__setattr__(self, "timed_methods", tuple(self.timed_methods))

    @property
    def verify_path(self) -> bool:
        """Whether passes verify every weight vector of an inner solve (``verify="path"``):
        each image's first box is in every working set, and no step is confirmed within
        ``tol`` only."""
        return self.verify == "path"

    @property
    def restarts_working_sets(self) -> bool:
        """`restart_working_sets`, its default resolved by `verify`."""
        if self.restart_working_sets is None:
            return not self.verify_path
        return self.restart_working_sets

    def problem_options(self) -> dict[str, Any]:
        """The keyword options of each class's inner problem (`LatentProblem`).

        Returns
        -------
        dict
            ``loss``, ``method``, ``tol``, ``max_iter``, ``callback`` (None) and ``timed``.

        Examples
        --------
        >>> LockstepOptions(loss="ndcg").problem_options()["loss"]
        'ndcg'
        """
        return {
            "loss": self.loss,
            "method": self.method,
            "tol": self.tol,
            "max_iter": self.max_iter,
            "callback": None,
            "timed": self.timed_methods,
        }


def latent_lockstep(
    features: Any,
    counts: npt.ArrayLike,
    labels: npt.ArrayLike,
    options: LockstepOptions | None = None,
    *,
    scheduler: Any = None,
    state: LockstepState | None = None,
    callback: Callable[[LockstepState], object] | None = None,
    spill_dir: str | None = None,
) -> LockstepState:
    """Train the latent structured SVM of every class (a column of ``labels``) in lockstep.

    One pass over all boxes per round (see the module's text).

    Parameters
    ----------
    features : ndarray, dask array or zarr array
        The bags as [qs.detection.score_bags][] takes them: padded (n_images, K_max, d), a
        NumPy, Dask or zarr array (a lazy array read or generated block by block on each
        pass), or flat (n_boxes, d) in memory.
    counts : array_like of shape (n_images,)
        Boxes per image.
    labels : array_like of shape (n_images, n_classes)
        1/True where the image holds the class, 0/False not.
    options : LockstepOptions or None, default None
        The training's options (None: `LockstepOptions`'s defaults).
    scheduler : str, distributed.Client or None, default None
        As [qs.detection.score_bags][] takes it, for Dask or zarr features.
    state : LockstepState or None, default None
        A state to resume from (the one a callback received).
    callback : callable or None, default None
        Called with the `LockstepState` after every pass.
    spill_dir : str or None, default None
        The directory of the file that holds the working sets' rows (None: the system's
        temporary directory); best on a disk, not in memory (tmpfs).

    Returns
    -------
    LockstepState
        The final state: ``state.W`` the weights, per class its boxes, objectives, LAI times
        per method, outer steps and repeats.

    Raises
    ------
    ValueError
        On labels not of shape (n_images, n_classes), a bad ``options.init``, or a stored
        state made for other labels or features.
    RuntimeError
        If a timed LAI method disagrees with the training's method.

    Examples
    --------
    Two classes over four images of three boxes each, padded:

    >>> import numpy as np
    >>> from qs.ssvm.lockstep import LockstepOptions, latent_lockstep
    >>> rng = np.random.default_rng(0)
    >>> features = rng.normal(size=(4, 3, 2))
    >>> labels = np.array([[1, 0], [0, 1], [1, 0], [0, 1]])
    >>> options = LockstepOptions(C=10.0, working_set_size=2)
    >>> state = latent_lockstep(features, [3, 3, 3, 3], labels, options)
    >>> state.done, state.W.shape
    (True, (2, 2))
    """
    labels = np.asarray(labels)
    if labels.ndim != 2 or labels.shape[1] < 1 or labels.shape[0] != np.shape(counts)[0]:
        raise ValueError(
            f"labels must be (n_images, n_classes) with one row per image "
            f"({np.shape(counts)[0]}); got shape {labels.shape}."
        )
    opts = LockstepOptions() if options is None else options
    n_classes = labels.shape[1]
    C = np.broadcast_to(np.asarray(opts.C, dtype=np.float64), (n_classes,))
    is_pos = labels == 1
    problem = opts.problem_options()
    if not (isinstance(features, np.ndarray) or hasattr(features, "dask")):
        features, counts = check_padded(features, counts)  # a zarr array: Dask over its chunks
    pool = RowPool(features.shape[-1], features.dtype, spill_dir, SPILL)
    with dask_scheduler(scheduler) as get, closing(pool):  # no spill file left behind
        if state is None:
            state, resident, pos_X = _start(features, counts, is_pos, opts, pool, get)
        else:
            state, resident, pos_X = _resume(features, counts, is_pos, state, pool, get)
        n, d = is_pos.shape[0], pool.d
        images = np.arange(n)[:, None]
        gather = np.zeros((n, int(opts.verify_path)), np.int64)
        _held(state, pool)
        if callback is not None:
            callback(state)
        while not state.done:
            active = [j for j, c in enumerate(state.classes) if not c.done]
            tried, checked = {}, {}
            for j in active:
                c = state.classes[j]
                start = time.perf_counter()
                resident[j].queries = []
                bags = resident[j].loaded()
                prob = _Timed(
                    bags, None, is_pos[:, j], c.pos_boxes, pos_X=pos_X[j], C=float(C[j]), **problem
                )
                if not opts.verify_path and c.constraints is None:  # a step's first solve
                    c.constraints = Constraints(d)
                result = solve(prob, d, opts.qp_solver, drop=DROP, constraints=c.constraints)
                _record(c, prob, result.n_iter)
                tried[j] = result.w
                checked[j] = bags.queries if opts.verify_path else bags.queries[-1:]
                c.seconds += time.perf_counter() - start
            del bags, prob  # the last class's rows in memory: not held through the pass
            queries = [q for j in active for q in checked[j]]
            start = time.perf_counter()
            top = _pass(
                features,
                counts,
                np.stack([tried[j] for j in active], 1),
                opts.working_set_size,
                pool,
                gather,
                (np.stack([w for w, _ in queries], 1), np.stack([at for _, at in queries], 1)),
                get,
            )
            pooled = (top, pool.find(images[:, :, None], top.index), pool.find(images, gather))
            state.passes += 1
            _share(state, active, time.perf_counter() - start)
            at = 0
            for col, j in enumerate(active):
                span = slice(at, at + len(checked[j]))
                at = span.stop
                start = time.perf_counter()
                _finish_step(
                    state,
                    j,
                    col,
                    span,
                    tried[j],
                    pooled,
                    resident,
                    pos_X,
                    is_pos[:, j],
                    float(C[j]),
                    opts,
                )
                state.classes[j].seconds += time.perf_counter() - start
            _compact(pool, resident)
            _held(state, pool)
            if callback is not None:
                callback(state)
    return state


def _pass(features, counts, W, k, pool, gather, check, get):
    """`qs.top_boxes.class_top_boxes` of every image, ``held`` the pool's boxes; over
    a Dask array a group of whole chunks of images at a time, each group's new rows added to
    ``pool`` before the next group is scored. Returns the pass's `ClassTopBoxes`
    (its rows in the pool)."""
    counts = np.asarray(counts)
    n, d = counts.size, features.shape[-1]
    V, chosen = (np.zeros((d, 0)), np.zeros((n, 0), np.int64)) if check is None else check
    held = pool.held_boxes(n)
    bounds = [0, n]
    if hasattr(features, "chunks") and not isinstance(features, np.ndarray):
        per_image = (W.shape[1] * k + gather.shape[1] + V.shape[1]) * d * pool.dtype.itemsize
        edges, bounds = np.cumsum(features.chunks[0]), [0]
        for a, b in zip(edges[:-1], edges[1:]):
            if b - bounds[-1] > max(1, PASS_BYTES // per_image) and a > bounds[-1]:
                bounds.append(int(a))
        bounds.append(n)
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        top = class_top_boxes(
            features[a:b] if b - a < n else features,
            counts[a:b],
            W,
            k,
            gather=gather[a:b],
            check=(V, chosen[a:b]),
            held=held[a:b],
            scheduler=get,
        )
        pool.add_pass(top._replace(image=top.image + a))
        parts.append(top)
    return ClassTopBoxes(*(np.concatenate(f) for f in zip(*(p[:-1] for p in parts))), [])


def _compact(pool, resident):
    """Keep the rows of ``pool`` that a working set of ``resident`` names, packed, and
    renumber the working sets' rows."""
    live = [r for r in resident if r is not None]
    for r, slot in zip(live, pool.compact([r.slot for r in live])):
        r.slot = slot


def _held(state, pool):
    state.rows_held, state.row_bytes = pool.held, pool.nbytes


def _share(state, classes, seconds):
    """A pass's wall time, recorded and shared equally among the ``classes`` it served."""
    state.pass_seconds.append(seconds)
    for j in classes:
        state.classes[j].seconds += seconds / len(classes)


#: bytes of new rows a pass over a Dask array takes in at a time (a group of images)
PASS_BYTES = 256 << 20

#: whether the working sets' rows lie in a file (`RowPool`'s ``spill``), so that
#: memory holds one class's working set at a time (False: every class's, in memory)
SPILL = True

#: how much of an inner solve a pass verifies (see `latent_lockstep`)
VERIFY = ("path", "step")


def _record(c, prob, n_iter):
    """Add a problem's LAI times (its method's and the timed methods') to class state ``c``."""
    for method, times in ((prob.method, prob.lai_times), *prob.timed.items()):
        c.lai_times.setdefault(method, []).extend(times)
    if n_iter is not None:
        c.n_iter.append(n_iter)


def _finish_step(state, j, col, span, w, pooled, resident, pos_X, is_pos, C, opts):
    """Confirm class ``j``'s step at ``w`` by the pass ``pooled`` (the pass, the rows of its
    top boxes and of its gathered boxes; its top-k column ``col``, its checked columns
    ``span``) and end it (its working set restarted from the new top boxes if
    ``opts.restarts_working_sets``), or grow its working set for a repeat."""
    c, bags = state.classes[j], resident[j]
    top, slots, gathered = pooled
    problem = opts.problem_options()
    best = top.best[:, span]
    chosen = np.stack([at for _, at in bags.queries[-best.shape[1] :]], axis=1)
    lacking = (best != chosen) & (chosen >= 0) & ~bags.holds(best)
    here = Resident(top.index[:, col], slots[:, col], bags.pool)
    if gathered.shape[1]:  # the first box of every image (verify="path")
        here = here.grown(np.zeros((best.shape[0], 1), np.int64), gathered)
    if lacking.any() and (
        opts.verify_path
        or not _within_tol(bags, w, top.score[:, col, 0], pos_X[j], is_pos, problem, opts.tol)
    ):
        resident[j] = bags.grown(here.index, here.slot).grown(
            *lacking_boxes(best, lacking, bags.pool)
        )
        c.working = resident[j].index
        c.repeats += 1
        return
    X_best = bags.pool.take(slots[:, col, 0]).astype(np.float64)
    c.pos_boxes, pos_X[j] = top.index[is_pos, col, 0], X_best[is_pos]
    check = _Timed(bags, None, is_pos, c.pos_boxes, pos_X=pos_X[j], C=C, **problem)
    c.objective.append(float(check.latent_objective(w, X_best)))
    _record(c, check, None)
    c.w, c.n_outer = w, c.n_outer + 1
    c.constraints = None  # the next step's inner problem has other positives' boxes
    resident[j] = here if opts.restarts_working_sets else bags.grown(here.index, here.slot)
    c.working = resident[j].index
    settled = len(c.objective) >= 2 and c.objective[-2] - c.objective[-1] < C * opts.tol
    c.converged = c.n_outer >= opts.min_outer and settled
    c.done = c.converged or c.n_outer >= opts.max_outer
    if c.done:  # its working set's rows are freed
        c.passes, resident[j] = state.passes, None


def _within_tol(bags, w, full, pos_X, is_pos, options, tol):
    """Whether the hinge term at ``w`` with every negative at its best box (``full``, the
    pass's best scores) exceeds the working set's by at most ``tol``: then ``w`` solves the
    full inner problem to within ``C tol`` more than the working set's solution does."""
    scores = bags.scores(w).max(axis=1)
    scores[is_pos] = pos_X @ w
    xi = []
    for s in (scores, np.where(is_pos, scores, np.maximum(scores, full))):
        res = lai(s, is_pos, loss=options["loss"], method=options["method"])
        xi.append(res.objective - res.ground_truth_F)
    return xi[1] - xi[0] <= tol


def _start(features, counts, is_pos, opts, pool, get):
    """The first pass: every class's working set under its initial weights (zeros unless
    ``opts.init`` gives weights; with ``opts.verify_path`` each image's first box too) and
    its positives' initial boxes."""
    init = opts.init
    n, n_classes = is_pos.shape
    sizes = np.asarray(counts, dtype=np.int64)
    weights = not isinstance(init, (str, list, tuple))
    d = features.shape[-1]
    W0 = np.zeros((d, n_classes))
    gather = np.full((n, n_classes + 1), -1, np.int64)
    gather[:, -1] = 0 if opts.verify_path else -1
    if weights:
        W0 = np.asarray(init, dtype=np.float64)
        if W0.shape != (d, n_classes):
            raise ValueError(f"init weights must have shape ({d}, {n_classes}); got {W0.shape}.")
    else:
        if not isinstance(init, str) and len(init) != n_classes:
            raise ValueError(
                f"init must give the boxes of each of the {n_classes} classes; got {len(init)}."
            )
        for j in range(n_classes):
            given = init if isinstance(init, str) else init[j]
            gather[is_pos[:, j], j] = initial_boxes(given, sizes[is_pos[:, j]], opts.random_state)
    start = time.perf_counter()
    top = _pass(features, counts, W0, opts.working_set_size, pool, gather, None, get)
    seconds = time.perf_counter() - start
    images = np.arange(n)[:, None]
    slots = pool.find(images[:, :, None], top.index)
    firsts = pool.find(images, gather[:, -1:])
    classes, resident, pos_X = [], [], []
    for j in range(n_classes):
        pos = is_pos[:, j]
        boxes = top.index[pos, j, 0] if weights else gather[pos, j]
        here = Resident(top.index[:, j], slots[:, j], pool)
        if opts.verify_path:
            here = here.grown(gather[:, -1:], firsts)
        resident.append(here)
        pos_X.append(pool.take(pool.find(np.flatnonzero(pos), boxes)).astype(np.float64))
        classes.append(ClassState(None, boxes, here.index, seconds=seconds / n_classes))
    _compact(pool, resident)
    return LockstepState(classes, passes=1, pass_seconds=[seconds]), resident, pos_X


def _resume(features, counts, is_pos, state, pool, get):
    """One pass gathering the working sets' boxes of a stored state's unfinished classes,
    each box's features once, and the positives' boxes a working set lacks: a class's
    random initial boxes until its first confirmed step (afterwards its positives' boxes are
    the top boxes its working set took in)."""
    n, n_classes = is_pos.shape
    d = features.shape[-1]
    if len(state.classes) != n_classes or any(
        c.working.shape[0] != n or c.pos_boxes.shape != (int(is_pos[:, j].sum()),)
        for j, c in enumerate(state.classes)
    ):
        raise ValueError(
            "the stored lockstep state was made for other labels (another "
            "number of images, classes or positive images)."
        )
    if any(c.constraints is not None and c.constraints.A.shape[1] != d for c in state.classes):
        raise ValueError(
            f"the stored lockstep state was made for features of another "
            f"dimension (these have {d})."
        )
    active = [j for j, c in enumerate(state.classes) if not c.done]
    parts = [np.full((n, 0), -1, np.int64)]
    for j in active:
        c, pos = state.classes[j], np.flatnonzero(is_pos[:, j])
        lacking = (c.working[pos] != c.pos_boxes[:, None]).all(axis=1)
        parts.append(c.working)
        if lacking.any():
            parts.append(np.full((n, 1), -1, np.int64))
            parts[-1][pos[lacking], 0] = c.pos_boxes[lacking]
    gather = np.concatenate(parts, axis=1)
    start = time.perf_counter()
    _pass(features, counts, np.zeros((d, 1)), 1, pool, gather, None, get)
    state.passes += 1
    state.resumed += 1
    _share(state, range(n_classes), time.perf_counter() - start)
    resident, pos_X = [None] * n_classes, [None] * n_classes
    for j in active:
        c, pos = state.classes[j], is_pos[:, j]
        resident[j] = Resident(c.working, pool.find(np.arange(n)[:, None], c.working), pool)
        pos_X[j] = pool.take(pool.find(np.flatnonzero(pos), c.pos_boxes)).astype(np.float64)
    _compact(pool, resident)
    return state, resident, pos_X
