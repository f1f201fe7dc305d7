"""Learning-to-rank metrics of qs.metrics (MAP, NDCG@k, P@k over queries) against trec_eval
(pytrec-eval-terrier), and each difference of convention (docs/ltr_metrics.md) on its own
case: ties, queries without a relevant document, the gain, k beyond a query, the threshold."""

import doctest
import itertools

import numpy as np
import pytest

import qs.metrics
from qs.metrics import QueryMetric, mean_average_precision, ndcg_at_k, precision_at_k

pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier (the [dev] extra)")


def trec(labels, scores, groups, measures, *, docnos=None, relevance_level=1):
    """trec_eval's per-query values {query: {measure: value}} of one run. ``docnos``: each
    document's name, which trec_eval's tie break (descending docno) reads; by default the
    names make trec_eval's order among ties the pessimistic one (lower labels first)."""
    labels, scores, groups = np.asarray(labels), np.asarray(scores), np.asarray(groups)
    if docnos is None:
        order = np.lexsort((labels, -scores))  # ranking order among all documents
        docnos = np.empty(labels.size, dtype=object)
        docnos[order] = [f"d{labels.size - r:07d}" for r in range(labels.size)]
    qrels, run = {}, {}
    for label, score, query, doc in zip(labels, scores, groups, docnos):
        qrels.setdefault(str(query), {})[doc] = int(label)
        run.setdefault(str(query), {})[doc] = float(score)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, set(measures), relevance_level=relevance_level
    )
    return evaluator.evaluate(run)


def column(result, key):
    """One measure of `trec`'s result, per query in sorted order of the query ids."""
    return np.array([result[q][key] for q in sorted(result, key=int)])


def sample(seed, n_queries=12, tie_values=None):
    """Graded labels 0..4 (a few queries without a relevant document), scores (rounded to
    ``tie_values`` levels to force ties), query ids shuffled over the rows."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 15, n_queries)
    groups = np.repeat(np.arange(n_queries) * 7 + 3, sizes)
    labels = rng.choice(5, size=groups.size, p=[0.5, 0.2, 0.15, 0.1, 0.05])
    labels[groups == groups[0]] = 0  # the first query: no relevant document
    scores = rng.normal(size=groups.size)
    if tie_values is not None:
        scores = np.round(scores * tie_values / 4)
    perm = rng.permutation(groups.size)  # a query's documents need not be contiguous
    return labels[perm], scores[perm], groups[perm]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [None, 3])
def test_against_trec_eval(seed, ties):
    labels, scores, groups = sample(seed, tie_values=ties)
    cuts = (1, 3, 5, 50)  # 50: beyond every query
    ours = {
        "map": mean_average_precision(labels, scores, groups, per_query=True),
        "ndcg": ndcg_at_k(labels, scores, groups, gain="linear", per_query=True),
    }
    for k in cuts:
        ours[f"P_{k}"] = precision_at_k(labels, scores, groups, k=k, per_query=True)
        ours[f"ndcg_cut_{k}"] = ndcg_at_k(
            labels, scores, groups, k=k, gain="linear", per_query=True
        )
    theirs = trec(
        labels,
        scores,
        groups,
        ["map", "ndcg", f"P.{','.join(map(str, cuts))}", f"ndcg_cut.{','.join(map(str, cuts))}"],
    )
    for key, got in ours.items():
        np.testing.assert_allclose(
            got.values, column(theirs, key), rtol=1e-12, atol=1e-15, err_msg=key
        )
        assert got.mean == pytest.approx(column(theirs, key).mean(), rel=1e-12)
        np.testing.assert_array_equal(got.query_ids, np.unique(groups))


# ---------------------------------------------------------------- differences of convention


def test_ties_pessimistic_is_trec_eval_at_its_worst_docnos():
    """trec_eval breaks ties by descending docno; ours rank lower labels first. Ours is the
    least of trec_eval's values over every naming of the documents (every tie order)."""
    labels = np.array([0, 2, 1, 0, 3, 1])
    scores = np.array([1.0, 1.0, 0.5, 0.5, 0.5, 0.0])
    groups = np.zeros(6, dtype=int)
    measures = {
        "map": lambda: mean_average_precision(labels, scores, groups),
        "ndcg_cut_3": lambda: ndcg_at_k(labels, scores, groups, k=3, gain="linear"),
        "P_3": lambda: precision_at_k(labels, scores, groups, k=3),
    }
    worst = dict.fromkeys(measures, np.inf)
    best = dict.fromkeys(measures, -np.inf)
    for names in itertools.permutations([f"d{i}" for i in range(6)]):
        result = trec(labels, scores, groups, ["map", "ndcg_cut.3", "P.3"], docnos=list(names))["0"]
        for key in measures:
            worst[key] = min(worst[key], result[key])
            best[key] = max(best[key], result[key])
    for key, ours in measures.items():
        assert ours() == pytest.approx(worst[key], rel=1e-12)
        assert ours() < best[key]  # so the tie order matters here: the case can fail
    in_input_order = trec(labels, scores, groups, ["map"], docnos=[f"d{9 - i}" for i in range(6)])[
        "0"
    ]["map"]
    assert in_input_order > mean_average_precision(labels, scores, groups)


def test_query_without_relevant_document():
    """trec_eval gives such a query 0 in every measure and counts it in the mean; so do we
    by default. "exclude" leaves it out; 1.0 is LightGBM's NDCG convention."""
    labels = np.array([0, 0, 0, 1, 0, 2])
    scores = np.array([0.3, 0.2, 0.1, 0.1, 0.9, 0.5])
    groups = np.array([1, 1, 1, 2, 2, 2])
    theirs = trec(labels, scores, groups, ["map", "ndcg", "P.2"])
    assert theirs["1"] == {"map": 0.0, "ndcg": 0.0, "P_2": 0.0}
    for metric, key, kwargs in (
        (mean_average_precision, "map", {}),
        (ndcg_at_k, "ndcg", {"gain": "linear"}),
        (precision_at_k, "P_2", {"k": 2}),
    ):
        default = metric(labels, scores, groups, **kwargs, per_query=True)
        np.testing.assert_allclose(default.values, column(theirs, key), rtol=1e-12)
        excluded = metric(labels, scores, groups, **kwargs, no_relevant="exclude", per_query=True)
        assert np.isnan(excluded.values[0]) and excluded.values[1] == default.values[1]
        assert excluded.mean == pytest.approx(theirs["2"][key], rel=1e-12)
        one = metric(labels, scores, groups, **kwargs, no_relevant=1.0, per_query=True)
        assert one.values[0] == 1.0 and one.mean == pytest.approx((1 + theirs["2"][key]) / 2)


@pytest.mark.parametrize("seed", range(3))
def test_exponential_gain_is_trec_eval_on_gains_as_labels(seed):
    """trec_eval's NDCG gain is the label; our default 2**label - 1 is trec_eval's NDCG of
    the labels replaced by their gains. The two differ on graded labels, not on binary."""
    labels, scores, groups = sample(10 + seed, tie_values=4)
    theirs = trec(2**labels - 1, scores, groups, ["ndcg", "ndcg_cut.3"])
    for k, key in ((None, "ndcg"), (3, "ndcg_cut_3")):
        got = ndcg_at_k(labels, scores, groups, k=k, per_query=True)
        np.testing.assert_allclose(got.values, column(theirs, key), rtol=1e-12)
        assert got.mean != pytest.approx(ndcg_at_k(labels, scores, groups, k=k, gain="linear"))
    binary = (labels > 1).astype(int)
    assert ndcg_at_k(binary, scores, groups) == ndcg_at_k(binary, scores, groups, gain="linear")


def test_k_beyond_a_query():
    """P@k divides by k even when the query has fewer documents (trec_eval's P_k); NDCG@k
    counts every document then, as without a cutoff."""
    labels, scores, groups = np.array([1, 0, 1]), np.array([0.9, 0.5, 0.1]), np.zeros(3, int)
    assert precision_at_k(labels, scores, groups, k=10) == pytest.approx(2 / 10)
    assert trec(labels, scores, groups, ["P.10"])["0"]["P_10"] == pytest.approx(2 / 10)
    assert ndcg_at_k(labels, scores, groups, k=10) == ndcg_at_k(labels, scores, groups)


@pytest.mark.parametrize("threshold", [0, 1, 2.5])
def test_threshold_is_trec_eval_relevance_level(threshold):
    """Relevant: label > threshold; trec_eval: label >= relevance_level. For integer labels,
    threshold t is relevance_level floor(t) + 1."""
    labels, scores, groups = sample(20, tie_values=3)
    theirs = trec(
        labels, scores, groups, ["map", "P.5"], relevance_level=int(np.floor(threshold)) + 1
    )
    got = mean_average_precision(labels, scores, groups, threshold=threshold, per_query=True)
    np.testing.assert_allclose(got.values, column(theirs, "map"), rtol=1e-12)
    got = precision_at_k(labels, scores, groups, k=5, threshold=threshold, per_query=True)
    np.testing.assert_allclose(got.values, column(theirs, "P_5"), rtol=1e-12)


# ---------------------------------------------------------------------------- invariants


def test_query_ids_of_any_type_and_row_order():
    labels, scores, groups = sample(30)
    named = np.array([f"query-{g}" for g in groups])
    perm = np.random.default_rng(0).permutation(labels.size)
    for metric in (mean_average_precision, ndcg_at_k, lambda *a: precision_at_k(*a, k=3)):
        value = metric(labels, scores, groups)
        assert metric(labels, scores, named) == pytest.approx(value, rel=1e-12)
        assert metric(labels[perm], scores[perm], groups[perm]) == pytest.approx(value, rel=1e-12)
        assert metric(labels, scores, list(groups)) == pytest.approx(value, rel=1e-12)


def test_ideal_ranking_and_scale_invariance():
    labels, _, groups = sample(31)
    ideal = labels + 0.1 * np.random.default_rng(1).random(labels.size)  # no ties
    assert ndcg_at_k(labels, ideal, groups, no_relevant=1.0) == pytest.approx(1.0)
    assert mean_average_precision(labels, ideal, groups, no_relevant="exclude") == 1.0
    _, scores, _ = sample(31)
    assert ndcg_at_k(labels, 3 * scores + 7, groups, k=4) == ndcg_at_k(labels, scores, groups, k=4)


def test_per_query_result():
    got = mean_average_precision(
        [1, 0, 0, 1], [0.9, 0.8, 0.7, 0.6], ["b", "b", "a", "a"], per_query=True
    )
    assert isinstance(got, QueryMetric)
    assert got.query_ids.tolist() == ["a", "b"] and got.values.tolist() == [0.5, 1.0]
    assert got.mean == 0.75


def test_docstring_examples_run():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for fn in (mean_average_precision, ndcg_at_k, precision_at_k):
        for test in finder.find(fn, globs=vars(qs.metrics)):
            runner.run(test)
    assert runner.failures == 0 and runner.tries >= 7


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: mean_average_precision([1, 0], [0.5], [1, 1]),
            "one entry per document; got lengths 2, 1 and 2",
        ),
        (lambda: mean_average_precision([], [], []), "no documents"),
        (lambda: mean_average_precision([[1, 0]], [[0.5, 0.1]], [[1, 1]]), "1-D"),
        (lambda: mean_average_precision(["a", "b"], [0.5, 0.1], [1, 1]), "numeric labels"),
        (
            lambda: mean_average_precision([1, np.nan], [0.5, 0.1], [1, 1]),
            "y_true must be finite; got nan at index 1",
        ),
        (lambda: mean_average_precision([1, 0], [0.5, np.inf], [1, 1]), "scores must be finite"),
        (lambda: mean_average_precision([1, 0], [0.5, 0.1], [1.5, 1.5]), "query ids"),
        (
            lambda: mean_average_precision([1, 0], [0.5, 0.1], np.array([1, "a"], dtype=object)),
            "one type",
        ),
        (
            lambda: mean_average_precision([1, 0], [0.5, 0.1], [1, 1], threshold=None),
            "threshold must be a finite number",
        ),
        (
            lambda: mean_average_precision([1, 0], [0.5, 0.1], [1, 1], no_relevant="skip"),
            r"no_relevant must be 'exclude' or a number in \[0, 1\]; got 'skip'",
        ),
        (
            lambda: ndcg_at_k([1, 0], [0.5, 0.1], [1, 1], no_relevant=[0.5]),
            r"no_relevant must be 'exclude' or a number in \[0, 1\]; got \[0.5\]",
        ),
        (
            lambda: ndcg_at_k([1, 0], [0.5, 0.1], [1, 1], no_relevant=2),
            r"no_relevant must be 'exclude' or a number in \[0, 1\]; got 2",
        ),
        (
            lambda: mean_average_precision([0, 0], [0.5, 0.1], [1, 1], no_relevant="exclude"),
            "no query has a relevant document.*AP is undefined",
        ),
        (lambda: ndcg_at_k([1, 0], [0.5, 0.1], [1, 1], k=0), "k must be a positive integer"),
        (
            lambda: ndcg_at_k([1, 0], [0.5, 0.1], [1, 1], gain="log"),
            "gain must be one of exponential, linear; got 'log'",
        ),
        (lambda: ndcg_at_k([1, -1], [0.5, 0.1], [1, 1]), "NDCG needs labels >= 0; got -1.0"),
        (lambda: ndcg_at_k([1, 2000], [0.5, 0.1], [1, 1]), "beyond float64; pass gain='linear'"),
        (lambda: precision_at_k([1, 0], [0.5, 0.1], [1, 1], k=2.0), "k must be a positive integer"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
