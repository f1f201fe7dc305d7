"""The ranking structured SVM over queries trained out of core, from Dask partitions that hold whole queries.

The documents are a Dask array ``X`` chunked by rows (one chunk over the features), read
from zarr, Parquet, ``.npy`` files or any store Dask reads lazily; each row chunk is a
partition and must
hold whole queries: a query whose documents fall in two partitions is refused (one line
naming it), not repartitioned, since moving rows between partitions of a store on disk is a
rewrite of the store. `query_chunks` gives row chunks that cut only between queries.
`npy_partitions` reads partitions kept as ``.npy`` files, each memory-mapped by its task: the
pass then reads the documents straight from the page cache, with no copy into a buffer and
no decoding, and the mapping is closed with the task, so the process holds the pages of the
partitions in flight only.

Each pass runs, partition by partition (one Dask task per partition), the scores ``X_p @ w``,
one `qs.inference.lai_queries` call over the partition's queries and the partition's
share ``X_p^T g_p`` of the joint feature map; the driver sums the shares in partition order,
so the sum does not depend on which worker finished first. Only a partition lives in a
task's memory; the solver's loop stays in the driver. The solvers are the 1-slack ones of
`qs.ssvm.queries.QUERY_SOLVERS` (cutting plane, Frank-Wolfe, subgradient) on this
oracle; block-coordinate Frank-Wolfe is not offered, since each of its steps reads one
query chosen at random from all of them. The model is the in-memory solver's
(`QueryProblem`) to rounding: the per-query LAI is the same call on
the same scores, only the order of the sums over documents differs.

Dask is imported when a `DaskQueryProblem` is made, not with this module: ``import qs``
loads none of it.
"""

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from qs.inference.queries import lai_queries
from qs.ssvm._problem import Problem, check_positive
from qs.ssvm.queries import (
    QUERY_SOLVERS,
    query_counts,
    query_offsets,
    query_scores,
    query_transposed,
)

__all__ = [
    "DASK_SOLVERS",
    "DaskQueryProblem",
    "is_dask_collection",
    "npy_partitions",
    "query_chunks",
    "solve_dask",
]

#: the solvers that take this oracle: every solver over queries but block-coordinate
#: Frank-Wolfe
DASK_SOLVERS = tuple(name for name in QUERY_SOLVERS if name != "block_frank_wolfe")


def is_dask_collection(obj: object) -> bool:
    """Whether `obj` is a Dask collection (array or dataframe), told without importing Dask.

    Parameters
    ----------
    obj : object
        Anything.

    Returns
    -------
    bool
        True for a Dask collection.

    Examples
    --------
    >>> import dask.array as da
    >>> is_dask_collection(da.zeros(3)), is_dask_collection(np.zeros(3))
    (True, False)
    """
    return type(obj).__module__.split(".")[0] == "dask" and hasattr(obj, "__dask_graph__")


def query_chunks(groups: npt.ArrayLike, rows: int) -> tuple[int, ...]:
    """Row chunks of about ``rows`` documents each that cut only between queries.

    Parameters
    ----------
    groups : array-like of shape (n_documents,)
        The query id of each document, each query's documents together.
    rows : int
        Documents per chunk to aim at; a chunk ends at the first query boundary at or after
        it (a query longer than ``rows`` is one chunk).

    Returns
    -------
    tuple of int
        The chunks' lengths, for ``dask.array.from_zarr(..., chunks=(that, n_features))``.

    Raises
    ------
    ValueError
        If `rows` is not a positive integer, or a query's documents are not together.

    Examples
    --------
    >>> from qs.ssvm.out_of_core import query_chunks
    >>> query_chunks([1, 1, 1, 2, 2, 3, 3, 3, 4], 4)
    (5, 4)
    """
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise ValueError(f"rows must be a positive integer; got {rows!r}.")
    order, offsets = query_offsets(groups)
    if order is not None:
        raise ValueError(
            "each query's documents must be together to be cut into chunks; "
            "sort the documents by query first."
        )
    chunks, start = [], 0
    while start < offsets[-1]:
        end = int(offsets[min(np.searchsorted(offsets, start + rows), offsets.size - 1)])
        chunks.append(end - start)
        start = end
    return tuple(chunks)


def _mapped(path):
    """A ``.npy`` file memory-mapped read-only (closed when the last view of it goes)."""
    return np.load(path, mmap_mode="r")


def npy_partitions(paths):
    """A Dask array whose row partitions are ``.npy`` files, each memory-mapped by its task.

    Parameters
    ----------
    paths : sequence of str or os.PathLike
        The partitions in row order: 2-D arrays of one dtype and one number of columns,
        each holding whole queries.

    Returns
    -------
    dask.array.Array
        The rows of the files one after another, one chunk per file.

    Raises
    ------
    ValueError
        On no path, or a file not 2-D or whose dtype or columns differ from the first's.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> from qs.ssvm.out_of_core import npy_partitions
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(folder / "0.npy", np.ones((3, 2), np.float32))
    >>> np.save(folder / "1.npy", np.zeros((2, 2), np.float32))
    >>> X = npy_partitions([folder / "0.npy", folder / "1.npy"])
    >>> X.chunks, X.sum().compute().item()
    (((3, 2), (2,)), 6.0)
    """
    import dask
    import dask.array as da

    paths = [str(path) for path in paths]
    if not paths:
        raise ValueError("npy_partitions needs at least one .npy file.")
    parts = []
    for path in paths:
        header = _mapped(path)  # reads the header only; no page of the data is touched
        shape, dtype = header.shape, header.dtype
        del header
        if len(shape) != 2:
            raise ValueError(f"{path} holds an array of shape {shape}; a partition is 2-D.")
        if parts and (dtype != parts[0][1] or shape[1] != parts[0][0][1]):
            raise ValueError(
                f"{path} holds {dtype} with {shape[1]} columns; the first partition holds "
                f"{parts[0][1]} with {parts[0][0][1]}."
            )
        parts.append((shape, dtype))
    load = dask.delayed(_mapped, pure=True)
    return da.concatenate(
        [
            da.from_delayed(load(path), shape=shape, dtype=dtype)
            for path, (shape, dtype) in zip(paths, parts)
        ]
    )


def _scan(groups, is_pos):
    """One partition's queries: (order or None, offsets, query ids in offsets' order,
    relevant per query, documents per query)."""
    order, offsets = query_offsets(groups)
    ids = np.asarray(groups) if order is None else np.asarray(groups)[order]
    relevant, sizes = query_counts(is_pos if order is None else is_pos[order], offsets)
    return order, offsets, ids[offsets[:-1]], relevant, sizes


def _partition_pass(X, is_pos, order, offsets, w, loss, method):
    """One partition's share of a pass at ``w``: (``X_p^T g_p``, the summed loss, the
    summed hinge, the LAI's seconds), ``g_p`` the hinges' gradients with respect to the
    scores."""
    X = _rows_read(X)
    if order is not None:
        X, is_pos = X[order], is_pos[order]
    scores = _partition_scores(X, w)
    start = time.perf_counter()
    res = lai_queries(scores, is_pos, offsets, loss=loss, method=method, gradient=True, ranks=False)
    seconds = time.perf_counter() - start
    share = query_transposed(X, res.coef)
    return share, float(res.loss.sum()), float(res.hinge.sum()), seconds


def _rows_read(X):
    """A partition as a C-ordered float32 or float64 array (float32 is kept: its products
    are taken in float64 by `qs.ssvm.queries.query_scores` and ``query_transposed``,
    without a float64 copy of the partition)."""
    X = np.asarray(X)
    return np.ascontiguousarray(X, dtype=np.float32 if X.dtype == np.float32 else np.float64)


def _partition_scores(X, w):
    """``X @ w`` in float64, as the in-memory problem's `qs.ssvm.queries.query_scores`
    takes it."""
    return query_scores(_rows_read(X), w)


class DaskQueryProblem(Problem):
    """The structured SVM over queries of `qs.ssvm.queries.QueryProblem`, out of core.

    Its oracle is one pass over the row partitions of a Dask array (see the module's notes).

    Parameters
    ----------
    X : dask.array.Array of shape (n_documents, n_features)
        Chunked by rows only (a chunk over the features is made one), each row chunk
        holding whole queries.
    labels : array_like or dask.array.Array of shape (n_documents,)
        Binary relevance; a Dask array chunked as `X`'s rows.
    groups : array_like or dask.array.Array of shape (n_documents,)
        The query id of each document; a Dask array chunked as `X`'s rows.
    C : float
        The weight of the slack (> 0).
    loss : str
        "ap" or "ndcg".
    method : str
        The LAI method.
    tol : float
        The solver's tolerance (>= 0).
    max_iter : int
        Cap on the solver's iterations.
    callback : callable or None
        Called with the `qs.ssvm.Progress` of each iteration.
    scheduler : str or None, default None
        Passed to ``dask.compute`` (None: the active ``dask.distributed`` client if any,
        else Dask's default).

    Raises
    ------
    ValueError
        On another loss, `X` not 2-D, a bad `C`, `tol`, `max_iter` or `callback`, labels or
        groups not one per document, a query split across partitions (naming it), or no
        query with both a relevant and a non-relevant document.

    Examples
    --------
    >>> import dask.array as da
    >>> X = da.from_array(np.eye(4), chunks=(2, 4))
    >>> prob = DaskQueryProblem(
    ...     X, [1, 0, 0, 1], [7, 7, 8, 8], C=1.0, loss="ap", method="auto", tol=1e-3,
    ...     max_iter=10, callback=None,
    ... )
    >>> prob.n_queries, prob.scores(np.ones(4)).tolist()
    (2, [1.0, 1.0, 1.0, 1.0])
    """

    def __init__(
        self,
        X: Any,
        labels: npt.ArrayLike,
        groups: npt.ArrayLike,
        *,
        C: float,
        loss: str,
        method: str,
        tol: float,
        max_iter: int,
        callback: Callable[..., object] | None,
        scheduler: Any = None,
    ) -> None:
        import dask

        if loss not in ("ap", "ndcg"):
            raise ValueError(f"training over queries takes loss 'ap' or 'ndcg'; got {loss!r}.")
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (documents, features); got shape {X.shape}.")
        if len(X.chunks[1]) != 1:
            X = X.rechunk({1: -1})  # a partition is a block of whole rows
        self.X, self.scheduler, self._dask = X, scheduler, dask
        self.C = check_positive("C", C)
        self.tol = check_positive("tol", tol, allow_zero=True)
        if (
            isinstance(max_iter, bool)
            or not isinstance(max_iter, (int, np.integer))
            or max_iter < 1
        ):
            raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}.")
        if callback is not None and not callable(callback):
            raise ValueError(f"callback must be callable or None; got {callback!r}.")
        self.max_iter, self.loss, self.method, self.callback = int(max_iter), loss, method, callback
        self.lai_times, self.objective, self.gap = [], [], []
        self.lai_compile_time, self.last_scores = 0.0, None
        rows = X.chunks[0]
        bounds = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        label_rows, group_rows = (
            self._rows(a, name, rows) for a, name in ((labels, "labels"), (groups, "groups"))
        )
        self.blocks = X.to_delayed().ravel()
        self.parts = []
        for p in range(len(rows)):
            pos = label_rows[bounds[p] : bounds[p + 1]].astype(bool)
            self.parts.append((pos,) + _scan(group_rows[bounds[p] : bounds[p + 1]], pos))
        self._refuse_split_queries(bounds)
        relevant = np.concatenate([part[4] for part in self.parts])
        sizes = np.concatenate([part[5] for part in self.parts])
        self.n_documents = int(bounds[-1])
        self.n_queries_all = int(sizes.size)
        self.n_queries = int(((relevant > 0) & (relevant < sizes)).sum())
        if self.n_queries == 0:
            raise ValueError(
                "no query has both a relevant and a non-relevant document: nothing to rank."
            )

    @staticmethod
    def _rows(array: Any, name: str, rows: tuple[int, ...]) -> np.ndarray:
        """``array`` (labels or groups) in memory, checked to have one entry per row."""
        if is_dask_collection(array):
            if array.ndim != 1 or array.chunks[0] != rows:
                raise ValueError(
                    f"{name} as a Dask array must be 1-D and chunked as X's rows; "
                    f"got chunks {array.chunks}."
                )
            array = array.compute()
        array = np.asarray(array)
        if array.shape != (sum(rows),):
            raise ValueError(
                f"{name} must hold one entry per document ({sum(rows)}); got shape {array.shape}."
            )
        return array

    def _refuse_split_queries(self, bounds):
        """One line naming a query whose documents lie in two partitions."""
        ids = np.concatenate([part[3] for part in self.parts])
        owner = np.repeat(np.arange(len(self.parts)), [part[3].size for part in self.parts])
        order = np.argsort(ids, kind="stable")
        same = np.flatnonzero(ids[order][1:] == ids[order][:-1])
        if same.size:
            first, second = owner[order[same[0]]], owner[order[same[0] + 1]]
            raise ValueError(
                f"query {ids[order[same[0]]].item()!r} is split across partitions {first} (rows "
                f"{bounds[first]}-{bounds[first + 1] - 1}) and {second} (rows "
                f"{bounds[second]}-{bounds[second + 1] - 1}); partitions must hold whole "
                "queries (chunk the rows by qs.ssvm.out_of_core.query_chunks)."
            )

    def _compute(self, tasks):
        return self._dask.compute(*tasks, scheduler=self.scheduler)

    def most_violated(
        self, w: np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, float, float]:
        """The most violated constraint at `w`, from one pass over the partitions.

        Parameters
        ----------
        w : numpy.ndarray of shape (n_features,)
            The weights.
        rows : None
            Must be None: training over queries takes whole passes.

        Returns
        -------
        tuple of (numpy.ndarray, float, float)
            ``(a, b, xi)`` of the 1-slack problem, as
            `qs.ssvm.queries.QueryProblem.most_violated` gives them.

        Raises
        ------
        ValueError
            If `rows` is given.

        Examples
        --------
        >>> import dask.array as da
        >>> X = da.from_array(np.eye(4), chunks=(2, 4))
        >>> prob = DaskQueryProblem(X, [1, 0, 0, 1], [7, 7, 8, 8], C=1.0, loss="ap",
        ...                         method="auto", tol=1e-3, max_iter=10, callback=None)
        >>> a, b, xi = prob.most_violated(np.zeros(4))  # ties: each relevant one ranked last
        >>> a.shape, b, xi
        ((4,), 0.5, 0.5)
        """
        if rows is not None:
            raise ValueError("training over queries takes whole passes (no batch_size).")
        run = self._dask.delayed(_partition_pass, pure=True)
        shares = self._compute(
            [
                run(block, pos, order, offsets, w, self.loss, self.method)
                for block, (pos, order, offsets, *_) in zip(self.blocks, self.parts)
            ]
        )
        total = np.zeros(self.X.shape[1])
        loss = hinge = seconds = 0.0
        for share, part_loss, part_hinge, part_seconds in shares:  # in partition order
            total += share
            loss += part_loss
            hinge += part_hinge
            seconds += part_seconds
        self.lai_times.append(seconds)
        q = self.n_queries
        return -total / q, loss / q, hinge / q

    def scores(self, w: np.ndarray) -> np.ndarray:
        """``X @ w`` in memory (one float64 per document), partition by partition.

        Parameters
        ----------
        w : numpy.ndarray of shape (n_features,)
            The weights.

        Returns
        -------
        numpy.ndarray of shape (n_documents,)
            The scores.

        Examples
        --------
        >>> import dask.array as da
        >>> X = da.from_array(np.eye(4), chunks=(2, 4))
        >>> prob = DaskQueryProblem(X, [1, 0, 0, 1], [7, 7, 8, 8], C=1.0, loss="ap",
        ...                         method="auto", tol=1e-3, max_iter=10, callback=None)
        >>> prob.scores(np.array([1.0, 2.0, 3.0, 4.0])).tolist()
        [1.0, 2.0, 3.0, 4.0]
        """
        run = self._dask.delayed(_partition_scores, pure=True)
        return np.concatenate(self._compute([run(block, w) for block in self.blocks]))


def solve_dask(
    X: Any,
    labels: npt.ArrayLike,
    groups: npt.ArrayLike,
    *,
    solver: str = "cutting_plane",
    C: float = 1.0,
    loss: str = "ap",
    method: str = "auto",
    tol: float = 1e-3,
    max_iter: int = 1000,
    qp_solver: str = "daqp",
    callback: Callable[..., object] | None = None,
    scheduler: Any = None,
) -> tuple[Any, DaskQueryProblem]:
    """Train the structured SVM over the queries of a Dask array out of core.

    Parameters
    ----------
    X : dask.array.Array of shape (n_documents, n_features)
        Chunked by rows into partitions that hold whole queries.
    labels : array-like or dask.array.Array of shape (n_documents,)
        Binary relevance.
    groups : array-like or dask.array.Array of shape (n_documents,)
        The query id of each document.
    solver : str, default "cutting_plane"
        One of `DASK_SOLVERS`: "cutting_plane", "frank_wolfe" or "subgradient".
    C : float, default 1.0
        The weight of the slack, as `qs.ssvm.queries.solve_queries` takes it.
    loss : str, default "ap"
        "ap" or "ndcg".
    method : str, default "auto"
        The LAI method.
    tol : float, default 1e-3
        The solver's tolerance.
    max_iter : int, default 1000
        Cap on the solver's iterations.
    qp_solver : str, default "daqp"
        ``qpsolvers`` backend of the cutting plane's dual QP.
    callback : callable or None, default None
        Called with the `qs.ssvm.Progress` of each iteration.
    scheduler : str or None, default None
        Passed to ``dask.compute``.

    Returns
    -------
    result : SolverResult
        The weights and the solver's record.
    problem : DaskQueryProblem
        The problem solved (its LAI times, objective and gap per iteration).

    Raises
    ------
    ValueError
        On a query split across partitions (naming it), an unknown solver, labels or
        groups not one per document, or no query to rank.

    Examples
    --------
    >>> import dask.array as da
    >>> rng = np.random.default_rng(0)
    >>> X = da.from_array(rng.normal(size=(8, 3)), chunks=(4, 3))
    >>> result, prob = solve_dask(X, [1, 0, 0, 1, 0, 1, 1, 0], [1, 1, 2, 2, 3, 3, 4, 4])
    >>> result.w.shape, prob.n_queries
    ((3,), 4)
    """
    if solver not in DASK_SOLVERS:
        raise ValueError(
            f"out of core, solver must be one of {list(DASK_SOLVERS)}; got {solver!r}."
        )
    prob = DaskQueryProblem(
        X,
        labels,
        groups,
        C=C,
        loss=loss,
        method=method,
        tol=tol,
        max_iter=max_iter,
        callback=callback,
        scheduler=scheduler,
    )
    return QUERY_SOLVERS[solver](prob, qp_solver, None), prob
