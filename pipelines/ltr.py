"""Learning to rank with queries (docs/ltr.md): AP-SVM and NDCG-SVM beside pairwise RankSVM,
logistic regression, LightGBM, XGBoost and the exact hinges as boosting objectives, per data set
x method; writes table.md, metrics.csv and per_query.csv."""

import time
import warnings
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import conint
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from tqdm import tqdm

from qs import model_selection
from qs.boosting import lightgbm_objective, xgboost_objective
from qs.estimators import RankSVM
from qs.metrics import mean_average_precision, ndcg_at_k, precision_at_k
from qs.pairwise import PairwiseRankSVM
from qsrank.pipelines import _methods
from qsrank.pipelines import _schema as S
from qsrank.pipelines._io import write_csv, write_text
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines._tables import frame_table
from qsrank.pipelines.ltr_data import load_data

EXPERIMENT = "ltr"
#: method -> (what the table calls it, its model class)
METHODS = {
    "ap_svm": ("AP-SVM", "linear"),
    "ndcg_svm": ("NDCG-SVM", "linear"),
    "pairwise_svm": ("pairwise RankSVM", "linear"),
    "logistic": ("logistic regression", "linear"),
    "lgbm_lambdarank": ("LightGBM lambdarank", "trees"),
    "xgb_rank_map": ("XGBoost rank:map", "trees"),
    "xgb_rank_ndcg": ("XGBoost rank:ndcg", "trees"),
    "lgbm_ap_hinge": ("LightGBM, exact AP hinge", "trees"),
    "lgbm_ndcg_hinge": ("LightGBM, exact NDCG hinge", "trees"),
    "xgb_ap_hinge": ("XGBoost, exact AP hinge", "trees"),
}
#: the methods whose C cross-validation chooses (the boosters run at their defaults)
TUNED = ("ap_svm", "ndcg_svm", "pairwise_svm", "logistic")
DATASETS = ("synthetic", "modechoice", "files")
#: metric column -> what the table calls it
METRICS = {
    "map": "MAP",
    "ndcg@1": "NDCG@1",
    "ndcg@5": "NDCG@5",
    "ndcg@10": "NDCG@10",
    "p@10": "P@10",
}


class Synthetic(S.Section):
    queries: conint(ge=1) = S.key(10_000, "queries generated")
    docs_per_query: conint(ge=2) = S.key(120, "median documents a query")
    features: conint(ge=3) = S.key(136, "features a document")
    seed: conint(ge=0) = S.key(0, "seed of the generator")


class Config(S.Section):
    """Learning to rank over queries; configs/ltr.yaml sets the published run."""

    experiment: Literal[EXPERIMENT] = S.key(EXPERIMENT, "the pipeline this config runs")
    datasets: S.distinct(Literal[tuple(DATASETS)]) = S.key(
        ["synthetic", "modechoice"], "the data sets, each its own table"
    )
    synthetic: Synthetic = S.key(Synthetic, "the generated MSLR-WEB10K-shaped data")
    train: str | None = S.key(None, "files: the training feature file")
    test: str | None = S.key(None, "files: the test file; null: a share of the training queries")
    label_column: str | None = S.key(None, "files: the label column of a table")
    group_column: str | None = S.key(None, "files: the query id column of a table")
    methods: S.distinct(Literal[tuple(METHODS)]) = S.key(
        list(METHODS), "the methods, in table order"
    )
    test_size: S.real(gt=0, lt=1) = S.key(
        0.3, "share of the queries held out for testing when there is no test file"
    )
    relevance_threshold: S.real() = S.key(
        0.0,
        "a grade above it is relevant (the SVMs' and logistic regression's labels, MAP, "
        "P@10); NDCG keeps the grades",
    )
    C: S.C_GRID = S.key(
        [0.1, 1.0, 10.0],
        "C of the SVMs and logistic regression, or a grid that GroupKFold CV chooses from by MAP",
    )
    cv_folds: conint(ge=2) = S.key(3, "GroupKFold folds over the training queries")
    tol: S.real(gt=0) = S.key(1e-3, "the structured SVMs' tolerance")
    max_iter: conint(ge=1) = S.key(200, "the structured SVMs' most passes")
    rounds: conint(ge=1) = S.key(
        100, "boosting rounds of every booster (LightGBM's and XGBoost's default)"
    )
    threads: conint(ge=1) = S.key(1, "threads of LightGBM and XGBoost")
    seed: conint(ge=0) = S.key(0, "seed of the split, folds and boosters")
    force: bool = S.key(False, "retrain the units the run directory holds")


# ---------------------------------------------------------------------------- training


def settings(cfg, data):
    """What a unit depends on: the data sets and every key but `force`."""
    return {
        "data": "; ".join(f"{k}: {v.note}" for k, v in data.items()),
        "data_sha256": [v.sha256 for v in data.values()],
        **{k: v for k, v in cfg.items() if k != "force"},
    }


def units(cfg, data):
    return [(name, method) for name in data for method in cfg["methods"]]


def warm_up(cfg, units=None):
    """Compile (or load) the LAI kernels of the structured SVMs and the hinge objectives."""
    _methods.warm_up([("ap", "auto"), ("ndcg", "auto")])
    from qs.inference import lai_queries

    rng = np.random.default_rng(0)
    for loss in ("ap", "ndcg"):
        lai_queries(
            rng.normal(size=40),
            rng.random(40) < 0.3,
            [0, 15, 40],
            loss=loss,
            gradient=True,
            ranks=False,
        )


def fit_method(cfg, method, C, X, y, groups):
    """Method `method` fitted on (X, y, groups): a function that scores documents."""
    threshold = cfg["relevance_threshold"]
    relevant = y > threshold
    seed, rounds, threads = cfg["seed"], cfg["rounds"], cfg["threads"]
    if method in ("ap_svm", "ndcg_svm"):
        est = RankSVM(
            loss=method[:-4],
            C=C,
            tol=cfg["tol"],
            max_iter=cfg["max_iter"],
            relevance_threshold=threshold,
            random_state=seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # queries without a pair: counted
            return est.fit(X, y, groups=groups).decision_function
    if method == "pairwise_svm":
        return PairwiseRankSVM(C=C).fit(X, y, groups).decision_function
    if method == "logistic":
        return LogisticRegression(C=C, max_iter=5_000).fit(X, relevant).decision_function
    sizes = np.diff(np.flatnonzero(np.r_[True, groups[1:] != groups[:-1], True]))
    if method.startswith("lgbm"):
        import lightgbm as lgb

        objective = (
            "lambdarank"
            if method == "lgbm_lambdarank"
            else lightgbm_objective(method.split("_")[1], relevance_threshold=threshold)
        )
        params = {
            "objective": objective,
            "verbose": -1,
            "seed": seed,
            "num_threads": threads,
            "deterministic": True,
        }
        booster = lgb.train(params, lgb.Dataset(X, y, group=sizes), num_boost_round=rounds)
        return booster.predict
    import xgboost as xgb

    qid = np.repeat(np.arange(sizes.size), sizes)
    # rank:map takes binary labels only: the relevant documents, as the SVMs see them
    dtrain = xgb.DMatrix(X, relevant if method == "xgb_rank_map" else y, qid=qid)
    params = {"seed": seed, "nthread": threads, "tree_method": "hist"}
    if method == "xgb_ap_hinge":
        params.update(base_score=0.0, min_child_weight=0.0)
        objective = xgboost_objective("ap", relevance_threshold=threshold)
        booster = xgb.train(params, dtrain, rounds, obj=objective)
    else:
        params["objective"] = "rank:map" if method == "xgb_rank_map" else "rank:ndcg"
        booster = xgb.train(params, dtrain, rounds)
    return lambda X_new: booster.predict(xgb.DMatrix(X_new))


def choose_C(cfg, method, split):
    """(C, how, CV MAP) of `method`: the one given, or the best of the grid by GroupKFold MAP over
    the training queries."""
    grid = cfg["C"]
    if method not in TUNED:
        return None, "defaults", None
    if len(grid) == 1:
        return grid[0], "fixed", None
    X, y, g = split.X_train, split.y_train, split.g_train

    def fit_score(C, train, validation):
        score = fit_method(cfg, method, C, X[train], y[train], g[train])
        scores, threshold = score(X[validation]), cfg["relevance_threshold"]
        return mean_average_precision(y[validation], scores, g[validation], threshold=threshold)

    folds = GroupKFold(cfg["cv_folds"])
    choice = model_selection.choose_C(fit_score, grid, folds, X, y, groups=g)
    return choice.C, f"{cfg['cv_folds']}-fold GroupKFold", choice.best_score


def query_metrics(cfg, y, scores, groups):
    """Per test query: MAP's AP, NDCG@1/5/10 (gain 2^grade - 1) and P@10; the query ids."""
    t = cfg["relevance_threshold"]
    parts = {"map": mean_average_precision(y, scores, groups, threshold=t, per_query=True)}
    for k in (1, 5, 10):
        parts[f"ndcg@{k}"] = ndcg_at_k(y, scores, groups, k=k, per_query=True)
    parts["p@10"] = precision_at_k(y, scores, groups, k=10, threshold=t, per_query=True)
    ids = parts["map"].query_ids
    return ids, {name: m.values for name, m in parts.items()}


def run_unit(run, unit):
    """Fit one method on one data set (C by CV or fixed) and rank its test queries."""
    name, method = unit
    cfg, split = run.cfg, run.data[name]
    with tqdm(total=1, desc=f"{name} {method}", leave=False, disable=not run.progress) as bar:
        start = time.perf_counter()
        C, how, cv_map = choose_C(cfg, method, split)
        cv_s = time.perf_counter() - start
        start = time.perf_counter()
        score = fit_method(cfg, method, C, split.X_train, split.y_train, split.g_train)
        train_s = time.perf_counter() - start
        ids, values = query_metrics(cfg, split.y_test, score(split.X_test), split.g_test)
        bar.update()
    return {
        "dataset": name,
        "method": method,
        "model": METHODS[method][1],
        "C": C,
        "C_from": how,
        "cv_map": cv_map,
        "cv_s": cv_s,
        "train_s": train_s,
        **{k: float(np.mean(v)) for k, v in values.items()},
        "queries": ids.tolist(),
        "per_query": {k: v.tolist() for k, v in values.items()},
    }


# ---------------------------------------------------------------------------- outputs


def metrics_frame(records):
    """One row per data set and method: C, how it was chosen, the test means, the times."""
    keep = ["dataset", "method", "model", "C", "C_from", "cv_map", *METRICS, "train_s", "cv_s"]
    return pd.DataFrame([{k: r[k] for k in keep} for r in records], columns=keep)


def per_query_frame(records):
    """One row per data set, method and test query: its metrics."""
    frames = [
        pd.DataFrame(
            {
                "dataset": r["dataset"],
                "method": r["method"],
                "query": r["queries"],
                **r["per_query"],
            }
        )
        for r in records
    ]
    return pd.concat(frames, ignore_index=True)


def table(frame):
    """The Markdown table of one data set's methods."""
    cells = frame[["method", "model", "C", *METRICS, "train_s"]].copy()
    cells["method"] = cells["method"].map(lambda m: METHODS[m][0])
    cells["C"] = cells["C"].map(lambda c: "-" if pd.isna(c) else f"{c:g}")
    return frame_table(
        cells.rename(columns={**METRICS, "train_s": "train (s)"}),
        {**dict.fromkeys(METRICS.values(), ".4f"), "train (s)": ".2f"},
    )


def summary(cfg, records, data):
    """table.md: per data set, its note and its table of test metrics and training times."""
    frame = metrics_frame(records)
    how = (
        f"C {cfg['C'][0]:g} (fixed)"
        if len(cfg["C"]) == 1
        else f"C from {', '.join(f'{c:g}' for c in cfg['C'])} by {cfg['cv_folds']}-fold "
        "GroupKFold cross-validation over the training queries (mean MAP)"
    )
    parts = [
        "# Learning to rank with queries",
        (
            f"Linear methods (AP-SVM, NDCG-SVM, pairwise RankSVM, logistic regression): "
            f"{how}; relevant: grade > {cfg['relevance_threshold']:g}. Boosters (trees, a "
            f"different model class): {cfg['rounds']} rounds, the libraries' defaults "
            "otherwise; the exact-hinge ones take qs.boosting's objectives. Test metrics are "
            "means over the test queries (a query without a relevant document counts 0); "
            "NDCG's gain is 2^grade - 1. `train (s)`: the final fit, one measurement, "
            "cross-validation excluded."
        ),
    ]
    for name in data:
        rows = frame[frame["dataset"] == name]
        if len(rows):
            parts += [f"## {name}", f"Data: {data[name].note}.", table(rows)]
    return "\n\n".join(parts) + "\n"


def write(run, records):
    """metrics.csv, per_query.csv and table.md."""
    write_csv(run.out / "metrics.csv", metrics_frame(records))
    write_csv(run.out / "per_query.csv", per_query_frame(records))
    write_text(run.out / "table.md", summary(run.cfg, records, run.data))


SPEC = Experiment(
    name=EXPERIMENT,
    schema=Config,
    load_data=load_data,
    settings=settings,
    units=units,
    run_unit=run_unit,
    write=write,
    warm_up=warm_up,
    unit_label="method",
)
