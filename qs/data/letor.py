"""Learning-to-rank data with queries: a seeded generator shaped like MSLR-WEB10K (synthetic),
and statsmodels' travel-mode choices as one query per traveller (real).

Both return `RankingData`: features, graded labels, the query id of each document
(each query's documents consecutive) and a note on where the data came from.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["LETOR_GRADES", "RankingData", "load_modechoice", "make_letor"]

#: the share of each grade 0-4 among the documents of MSLR-WEB10K/30K, as published with the
#: data sets (Qin and Liu 2013), rounded
LETOR_GRADES = (0.514, 0.325, 0.134, 0.019, 0.008)


@dataclass(frozen=True)
class RankingData:
    """Documents of many queries, each query's documents together.

    Parameters
    ----------
    X : ndarray of shape (n_documents, n_features)
        The features.
    y : ndarray of shape (n_documents,), int
        The graded relevance.
    groups : ndarray of shape (n_documents,)
        The query id of each document.
    feature_names : list of str
        The features' names.
    source : str
        A line saying where the data came from.

    Examples
    --------
    >>> data = make_letor(3, docs_per_query=6, n_features=5, informative=3)
    >>> data.X.shape[1], len(data.feature_names), np.unique(data.groups).size
    (5, 5, 3)
    """

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    feature_names: list
    source: str


def make_letor(
    n_queries=10_000,
    *,
    docs_per_query=120,
    n_features=136,
    informative=24,
    grades=LETOR_GRADES,
    seed=0,
    dtype=np.float64,
):
    """Seeded synthetic queries in the shape of MSLR-WEB10K; not real data.

    Each query draws its number of documents from a log-normal of median ``docs_per_query``
    (at least 5, at most ten times the median) and a query-level offset of relevance. A
    document's relevance is latent: a linear score of ``informative`` of its standard normal
    features, one interaction of two of them and a saturating term (so that trees and
    linear models differ), the query's offset and noise. Grades 0-4 cut the latent score at
    the quantiles that give the shares ``grades`` over all documents; the rest of the
    features are noise.

    Parameters
    ----------
    n_queries : int, default 10000
        The number of queries.
    docs_per_query : int, default 120
        Median documents per query.
    n_features : int, default 136
        The number of features.
    informative : int, default 24
        Features the relevance depends on (the first ones), at least 3.
    grades : sequence of float, default LETOR_GRADES
        Share of each grade 0, 1, ... among the documents (sums to 1).
    seed : int, default 0
        Seed of the generator.
    dtype : dtype, default float64
        float64 or float32: the features' dtype.

    Returns
    -------
    RankingData
        Features, graded labels and the query of each document, with the data's source.

    Examples
    --------
    >>> from qs.data.letor import make_letor
    >>> data = make_letor(20, docs_per_query=30, n_features=10, informative=4, seed=1)
    >>> data.X.shape[1], sorted(set(data.y.tolist())) == [0, 1, 2, 3, 4]
    (10, True)
    """
    grades = np.asarray(grades, dtype=np.float64)
    if n_queries < 1 or docs_per_query < 2 or not 3 <= informative <= n_features:
        raise ValueError(
            f"need n_queries >= 1, docs_per_query >= 2 and 3 <= informative <= "
            f"n_features; got {n_queries}, {docs_per_query}, {informative} and "
            f"{n_features}."
        )
    if (
        grades.ndim != 1
        or grades.size < 2
        or np.any(grades < 0)
        or not np.isclose(grades.sum(), 1.0)
    ):
        raise ValueError(
            f"grades must be two or more non-negative shares summing to 1; got {grades.tolist()}."
        )
    rng = np.random.default_rng(seed)
    sizes = np.clip(
        np.rint(docs_per_query * rng.lognormal(0.0, 0.5, n_queries)), 5, 10 * docs_per_query
    ).astype(np.int64)
    n = int(sizes.sum())
    X = rng.standard_normal((n, n_features)).astype(dtype)
    w = rng.normal(size=informative) / np.sqrt(informative)
    head = X[:, :informative].astype(np.float64)
    latent = (
        head @ w
        + 0.5 * head[:, 0] * head[:, 1]
        + 0.5 * np.tanh(2 * head[:, 2])
        + np.repeat(0.5 * rng.standard_normal(n_queries), sizes)
        + 0.5 * rng.standard_normal(n)
    )
    cuts = np.quantile(latent, np.cumsum(grades)[:-1])
    y = np.searchsorted(cuts, latent, side="right").astype(np.int64)
    groups = np.repeat(np.arange(n_queries, dtype=np.int64), sizes)
    source = (
        f"synthetic, shaped like MSLR-WEB10K: {n_queries} queries, {n} documents "
        f"(median {docs_per_query} a query), {n_features} features ({informative} "
        f"informative), grades 0-{grades.size - 1} in shares {grades.tolist()}, seed "
        f"{seed}; not real data"
    )
    return RankingData(X, y, groups, [f"f{k + 1}" for k in range(n_features)], source)


#: the travel modes of statsmodels' modechoice data, in its coding 1-4
MODES = ("air", "train", "bus", "car")


def load_modechoice() -> RankingData:
    """statsmodels' travel-mode choice data (Greene and Hensher 1997) as ranking queries:
    each of the 210 travellers between Sydney and Melbourne is a query of the 4 modes (air,
    train, bus, car), the mode chosen relevant (grade 1), the others not.

    Features, as a conditional logit reads them: the modes' terminal waiting time
    (``ttme``), in-vehicle cost (``invc``) and time (``invt``) and generalised cost (``gc``);
    a constant per mode; household income (``hinc``) and party size (``psize``) times each
    mode's constant (a traveller's own features, the same for the four modes, rank the
    modes only through these).

    Returns
    -------
    RankingData
        The travellers' choices as queries, the chosen mode relevant.

    Raises
    ------
    ImportError
        Without statsmodels (the ``ltr`` extra).

    Examples
    --------
    >>> import statsmodels  # the ltr extra
    >>> data = load_modechoice()
    >>> data.X.shape, data.feature_names[:4], data.y[:4].tolist()
    ((840, 16), ['ttme', 'invc', 'invt', 'gc'], [0, 0, 0, 1])
    """
    try:
        from statsmodels.datasets import modechoice
    except ImportError as err:
        raise ImportError(
            "the modechoice data ships with statsmodels: install the ltr extra "
            "(pip install 'qsrank[ltr]')."
        ) from err
    frame = modechoice.load_pandas().data.sort_values(["individual", "mode"], kind="stable")
    mode = frame["mode"].to_numpy().astype(np.int64)
    dummies = (mode[:, None] == np.arange(1, 5)[None, :]).astype(np.float64)
    columns = [frame[c].to_numpy() for c in ("ttme", "invc", "invt", "gc")]
    names = ["ttme", "invc", "invt", "gc"]
    for k, m in enumerate(MODES):
        columns += [
            dummies[:, k],
            dummies[:, k] * frame["hinc"].to_numpy(),
            dummies[:, k] * frame["psize"].to_numpy(),
        ]
        names += [m, f"hinc_{m}", f"psize_{m}"]
    X = np.column_stack(columns).astype(np.float64)
    y = frame["choice"].to_numpy().astype(np.int64)
    groups = frame["individual"].to_numpy().astype(np.int64)
    source = (
        "statsmodels modechoice (Greene and Hensher 1997; real data): 210 travellers x 4 "
        "modes, the chosen mode relevant, one query per traveller"
    )
    return RankingData(X, y, groups, names, source)
