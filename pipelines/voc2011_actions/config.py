"""The VOC2011 action experiment's config: the methods as the paper names them, the schema
of every key (Tables 1-4; Figures 2-3 under `figures`), and the selections it implies."""

from typing import Literal

from pydantic import conint, model_validator

from qs.data import ACTIONS
from qs.ssvm import SOLVERS
from qsrank.pipelines import _methods
from qsrank.pipelines import _schema as S
from qsrank.pipelines._sizes import size_pairs

EXPERIMENT = "voc2011_actions"

#: paper name -> (loss, LAI method)
METHODS = {
    "0-1": ("01", "zero_one"),
    "ap": ("ap", "yue"),
    "ap_qs": ("ap", "qs"),
    "ap_search": ("ap", "search"),
    "ap_auto": ("ap", "auto"),
    "ndcg": ("ndcg", "chakrabarti"),
    "ndcg_qs": ("ndcg", "qs"),
    "ndcg_auto": ("ndcg", "auto"),
}
LOSSES = ("01", "ap", "ndcg")
INFERENCES = _methods.inferences(METHODS)
#: the curves of each figure, as the paper's captions split them
FIGURE_METHODS = {"ap": ("0-1", "ap", "ap_qs", "ap_search"), "ndcg": ("0-1", "ndcg", "ndcg_qs")}
VARIES = ("total", "negatives", "positives")  # the paper's panel order

# Fixed C of the quick default, per loss: what 5-fold CV over the grid below chose most often
# over the 10 synthetic classes (seed 0); for 0-1, C = LinearSVC's C x n_samples.
FIXED_C = {"01": 100.0, "ap": 1000.0, "ndcg": 10.0}

SIZE_KEYS = {
    "negatives": ("fixed", "values"),
    "positives": ("fixed", "values"),
    "total": ("neg_per_pos", "values"),
}

FIGURE_PRESETS = {
    # class phoning has 227 trainval positives and, in the synthetic set, 3085 trainval
    # negatives: every size fits the trainval boxes
    "paper": {
        "negatives": {"fixed": 227, "values": [250, 500, 1000, 2000, 3000]},
        "positives": {"fixed": 200, "values": [25, 50, 100, 150, 227]},
        "total": {"neg_per_pos": 10, "values": [275, 550, 1100, 1650, 2497]},
    },
    "quick": {
        "negatives": {"fixed": 10, "values": [30, 60]},
        "positives": {"fixed": 30, "values": [5, 10]},
        "total": {"neg_per_pos": 10, "values": [33, 66]},
    },
}
COUNTS = S.distinct(conint(ge=1))


PER_LOSS = S.per_key(S.real(gt=0), LOSSES, FIXED_C, float)
C_OR_CV = PER_LOSS | Literal["cv"]


class Grid(S.Section):
    zero_one: S.C_GRID = S.key(
        [1.0, 10.0, 100.0, 1000.0, 10000.0], "C values of the 0-1 SVM", name="01"
    )
    ap: S.C_GRID = S.key([0.1, 1.0, 10.0, 100.0, 1000.0], "C values of the AP-SVM")
    ndcg: S.C_GRID = S.key([0.1, 1.0, 10.0, 100.0, 1000.0], "C values of the NDCG-SVM")


class CV(S.Section):
    folds: conint(ge=2) = S.key(5, "stratified folds on trainval")
    grid: Grid = S.key(Grid, "per loss, the C values tried")


PRESETS_EXPECTED = (
    "per preset name, a mapping of negatives and positives ({fixed, values}) "
    "and total ({neg_per_pos, values}) to counts >= 1"
)


class Figures(S.Section):
    """Figures 2-3 (`qsrank bench --experiment voc2011_actions`)."""

    class_: Literal[tuple(ACTIONS)] = S.key(
        "phoning", "the action class whose boxes are subsampled", name="class"
    )
    vary: Literal[tuple(VARIES)] = S.key("negatives", "which count grows")
    loss: Literal["ap", "ndcg", "all"] = S.key("all", "ap (Figure 2), ndcg (Figure 3) or all")
    methods: S.names(METHODS) | None = S.key(None, "null: the paper's curves of each figure")
    preset: str = S.key("paper", "the sizes: a name in figures.presets")
    repeats: conint(ge=1) = S.key(
        3, "trainings per point; the fastest one's total LAI time is plotted"
    )
    pool: Literal["trainval", "trainval+test"] = S.key(
        "trainval", "boxes to subsample from (trainval+test for more)"
    )
    C: PER_LOSS | None = S.key(
        {"01": 100.0, "ap": 10.0, "ndcg": 10.0},
        "C per loss (what 5-fold CV chose for phoning on the synthetic data); null: the tables'",
    )
    presets: S.presets(FIGURE_PRESETS, SIZE_KEYS, {"values": COUNTS}, PRESETS_EXPECTED) = S.key(
        FIGURE_PRESETS, "per preset and vary: the count that stays and the varied counts"
    )


class Config(S.Section):
    """The VOC2011 action experiment (Tables 1-4; Figures 2-3 under `figures`)."""

    experiment: Literal[EXPERIMENT] = S.key(EXPERIMENT, "the pipeline this config runs")
    seed: conint(ge=0) = S.key(0, "the synthetic data, subsampling and CV folds")
    data: S.split_paths(
        "a poselet list file or an .npz cache from `qsrank load poselet --out`", synthetic=True
    ) = S.key("synthetic", "synthetic, or {trainval: PATH, test: PATH} (list files or .npz caches)")
    features_dir: str | None = S.key(
        None, "feature files of list-file data; null: beside each list file"
    )
    max_boxes: conint(ge=2) | None = S.key(
        None, "keep at most this many boxes of each split (seeded; for quick looks)"
    )
    classes: S.names(ACTIONS, every=True) = S.key(list(ACTIONS), "action classes to train (or all)")
    methods: S.names(METHODS) = S.key(list(METHODS), "methods, as the paper names them")
    loss: Literal[tuple(LOSSES)] | None = S.key(None, "run only the methods of this loss")
    inference: Literal[tuple(INFERENCES)] | None = S.key(
        None, "run only the methods of this LAI method"
    )
    solver: Literal[tuple(SOLVERS)] = S.key("cutting_plane", "structured SVM solver")
    C: C_OR_CV = S.key(dict(FIXED_C), "a number, one per loss, or cv (folds over cv.grid)")
    cv: CV = S.key(CV, "cross-validation of C (C: cv)")
    tol: S.real(ge=0) = S.key(1e-3, "the solver's stopping tolerance")
    max_iter: conint(ge=1) = S.key(1000, "the solver's most iterations")
    lai_repeats: conint(ge=0) = S.key(
        7,
        "rounds in which each training's recorded LAI calls are timed again (Table 1's "
        "ratios: median and range over rounds); 0: none",
    )
    force: bool = S.key(False, "retrain finished class x method runs")
    figures: Figures = S.key(Figures, "Figures 2-3: LAI time in training as the data grow")

    @model_validator(mode="after")
    def _consistent(self):
        cfg = self.model_dump(by_alias=True)
        if cfg["data"] == "synthetic" and cfg["features_dir"] is not None:
            raise ValueError("features_dir applies to list-file data only; data is 'synthetic'")
        _methods.check_selection(METHODS, cfg)
        fig = cfg["figures"]
        if not figure_methods(cfg):
            raise ValueError(
                f"figures.methods {fig['methods']} hold no method of loss {fig['loss']!r} (or 0-1)"
            )
        if fig["preset"] not in fig["presets"]:
            raise ValueError(
                f"figures.preset: expected one of {', '.join(fig['presets'])}; "
                f"got {S.shown(fig['preset'])}"
            )
        if fig["vary"] not in fig["presets"][fig["preset"]]:
            raise ValueError(
                f"figures.presets.{fig['preset']} defines no sizes for vary {fig['vary']!r}"
            )
        figure_sizes(cfg)
        return self


def figure_methods(cfg):
    """The methods of the figure run: the loss's paper curves, or figures.methods filtered."""
    fig = cfg["figures"]
    losses = ("ap", "ndcg") if fig["loss"] == "all" else (fig["loss"],)
    if fig["methods"] is None:
        return list(dict.fromkeys(m for loss in losses for m in FIGURE_METHODS[loss]))
    return [m for m in fig["methods"] if METHODS[m][0] in losses + ("01",)]


def figure_sizes(cfg):
    """The (n_pos, n_neg) pairs of the figure run, smallest first."""
    fig = cfg["figures"]
    vary = fig["vary"]
    spec = fig["presets"][fig["preset"]][vary]
    return size_pairs(
        vary, spec, sorted(set(spec["values"])), f"figures.presets.{fig['preset']}.{vary}"
    )
