"""The VOC2007 detection experiment's names (methods, losses, the paper's numbers) and its
config schema."""

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, conint, model_validator

from qs.data.voc2007 import CLASSES
from qs.ssvm.lockstep import VERIFY
from qsrank.pipelines import _methods
from qsrank.pipelines import _schema as S

EXPERIMENT = "voc2007_detection"

#: method name -> (loss, LAI method); the names of Tables 1-4
METHODS = {
    "0-1": ("01", "zero_one"),
    "ap": ("ap", "yue"),
    "ap_qs": ("ap", "qs"),
    "ap_auto": ("ap", "auto"),
}
LOSSES = ("01", "ap")
INFERENCES = tuple(m for _, m in METHODS.values())
#: the AP methods, all exact: the same weights, in the order the AP column takes them
AP_METHODS = ("ap_qs", "ap", "ap_auto")
#: (slower, faster) pairs of the LAI-time table; the first is the paper's
RATIOS = (("ap", "ap_qs"), ("ap", "ap_auto"))

# Mohapatra et al., CVPR 2018, Table 5: test AP (%) per class, (0-1 loss, AP loss)
PAPER_AP = dict(
    zip(
        CLASSES,
        [
            (46.60, 48.18),
            (48.53, 61.45),
            (33.31, 36.73),
            (15.23, 19.66),
            (6.10, 1.01),
            (37.01, 49.51),
            (61.28, 66.78),
            (38.12, 40.77),
            (2.71, 3.23),
            (21.06, 38.52),
            (14.20, 39.53),
            (33.55, 36.25),
            (46.14, 53.86),
            (29.97, 34.81),
            (29.58, 30.41),
            (21.27, 23.03),
            (11.65, 32.20),
            (36.66, 42.03),
            (29.71, 37.10),
            (27.31, 37.26),
        ],
    )
)
# Mohapatra et al., CVPR 2018, Section 4.2: total LAI time in training, mean over 20 classes (s)
PAPER_LAI_S = {"ap": 7.623, "ap_qs": 0.5214}
#: the classes as Table 5 prints them
CLASS_NAMES = {
    **{c: c.capitalize() for c in CLASSES},
    "diningtable": "Dining-table",
    "pottedplant": "Potted-plant",
    "tvmonitor": "TV-monitor",
}
#: the AP methods' LAI as the tables and the figure name them
LAI_NAMES = {"ap": "Yue", "ap_qs": "QS", "ap_auto": "default"}

INITS = ("image_means", "random")
SPLITS = ("trainval", "test")
#: the method that trains the models of a C grid, per loss (the AP methods train one model)
GRID_METHOD = {"01": "0-1", "ap": "ap_auto"}
C_GRID = [10.0, 100.0, 1000.0]
#: boxes per image of the training working set when the data are read out of core
WORKING_SET = 10
#: the synthetic section's keys that size the data (the others say how features are made)
GENERATOR_KEYS = (
    "scale",
    "boxes_per_image",
    "n_features",
    "signal",
    "noise",
    "difficult_rate",
    "components",
)


C_VALUES = Annotated[
    S.real(gt=0) | Annotated[list[S.real(gt=0)], Field(min_length=1)],
    AfterValidator(lambda v: [float(c) for c in dict.fromkeys(v if isinstance(v, list) else [v])]),
]


class Synthetic(S.Section):
    """The synthetic data's size (qs.data.voc2007.make_voc2007_detection)."""

    scale: S.real(gt=0, le=1) = S.key(0.5, "fraction of VOC2007's 5011 / 4952 images")
    boxes_per_image: conint(ge=2) = S.key(8, "candidate boxes per image")
    n_features: conint(ge=1) = S.key(16, "features per box")
    signal: S.real(ge=0) = S.key(4.0, "strength of the objects' signal")
    noise: S.real(ge=0) = S.key(1.0, "feature noise")
    difficult_rate: S.real(ge=0, le=1) = S.key(0.1, "fraction of objects marked difficult")
    components: conint(ge=0) = S.key(
        0,
        "dimension of the images' backgrounds and the objects' appearances, shared by the "
        "boxes of an image as CNN features are (0: every box independent noise)",
    )
    generated: bool = S.key(
        False,
        "generate the box features block by block from the seed on every pass (never "
        "held: the paper's size without a store) instead of in memory",
    )
    dtype: Literal["float32", "float16"] = S.key(
        "float32", "the generated features' type (generated: true)"
    )
    chunk_images: conint(ge=1) = S.key(4, "images per generated block (generated: true)")


class Config(S.Section):
    """The VOC2007 detection experiment (Table 5)."""

    experiment: Literal[EXPERIMENT] = S.key(EXPERIMENT, "the pipeline this config runs")
    seed: conint(ge=0) = S.key(0, "the synthetic data, init and holdout")
    data: S.split_paths("a directory of R-CNN .mat feature caches", synthetic=True) = S.key(
        "synthetic", "synthetic, or {trainval: DIR, test: DIR} of R-CNN .mat caches"
    )
    store: S.split_paths("a box-feature store written by `qsrank load cnn`") | None = S.key(
        None, "or {trainval: PATH, test: PATH}: stores written by `qsrank load cnn`"
    )
    in_memory_max_gb: S.real(ge=0) = S.key(
        1.0, "a store's features up to this size are loaded in memory, larger read by block"
    )
    scheduler: Annotated[str, Field(min_length=1)] | None = S.key(
        None,
        "where a store read by block is scored: null (Dask's threads), threads, sync, "
        "processes, or tcp://HOST:PORT",
    )
    synthetic: Synthetic = S.key(Synthetic, "the synthetic data's size")
    classes: S.names(CLASSES, every=True) = S.key(list(CLASSES), "object classes to train (or all)")
    methods: S.names(METHODS) = S.key(list(METHODS), "methods to train")
    loss: Literal[tuple(LOSSES)] | None = S.key(None, "run only the methods of this loss")
    inference: Literal[tuple(INFERENCES)] | None = S.key(
        None, "run only the methods of this LAI method"
    )
    solver: Literal["cutting_plane"] = S.key(
        "cutting_plane", "the inner solver of the CCCP loop (the only one it has)"
    )
    init: Literal[tuple(INITS)] = S.key(
        "image_means",
        "initial boxes of the positive images: image_means (the best box under "
        "a centroid classifier of whole images) or random (seeded)",
    )
    C: S.per_key(
        C_VALUES,
        LOSSES,
        {loss: list(C_GRID) for loss in LOSSES},
    ) = S.key(
        list(C_GRID),
        "a number, a grid (the best detection AP on a held-out part of "
        "trainval), or one such per loss",
    )
    validation_fraction: S.real(gt=0, lt=1) = S.key(
        0.25, "the stratified part of trainval held out to choose C"
    )
    tol: S.real(gt=0) = S.key(1e-3, "cutting-plane tolerance")
    max_iter: conint(ge=1) = S.key(20000, "cutting-plane iterations per outer step")
    max_outer: conint(ge=1) = S.key(400, "most outer (CCCP) steps")
    lai_repeats: conint(ge=0) = S.key(
        7,
        "rounds in which each training's recorded LAI calls are timed again (Table 5's "
        "time ratios: median and range over rounds); 0: none; not with lockstep",
    )
    min_outer: S.per_key(conint(ge=1), LOSSES, {"01": 2, "ap": 2}, int) = S.key(
        2, "fewest outer steps, a number or one per loss (the released code: 2)"
    )
    nms_threshold: S.real(ge=0, le=1) = S.key(
        0.3, "IoU above which a lower-scoring box of the same image is dropped"
    )
    working_set: conint(ge=0) | None = S.key(
        None,
        "boxes per image held in memory between passes over every box in training "
        "(exact; 0: none, every LAI call scores every box); null: 10 for a store read out of "
        "core, 0 otherwise",
    )
    lockstep: bool = S.key(
        False,
        "train every class of a loss together: per round, each class's inner problem "
        "on its working set, then one pass over all boxes for all classes (needs one C per "
        "loss); resumable per round",
    )
    verify: Literal[tuple(VERIFY)] = S.key(
        "path",
        "lockstep: what a pass checks, every weight vector of the inner solve "
        "(path: the in-memory models) or its last (step: each step's optimum, fewer products)",
    )
    blas_threads: conint(ge=1) | None = S.key(
        1, "BLAS threads while training and scoring (null: the library's)"
    )
    force: bool = S.key(False, "retrain finished class x method runs")

    @model_validator(mode="after")
    def _consistent(self):
        if self.scheduler is not None and self.store is None and not self.synthetic.generated:
            raise ValueError(
                "scheduler applies to data read from stores (store: {trainval: "
                "PATH, test: PATH}) or generated (synthetic: {generated: true}); "
                "the data in memory are scored in memory"
            )
        if self.store is not None and self.data != "synthetic":
            raise ValueError(
                "give either data (synthetic or R-CNN cache directories) or store, not both"
            )
        cfg = self.model_dump()
        if self.lockstep and any(len(cfg["C"][loss]) > 1 for loss in LOSSES):
            raise ValueError(
                "lockstep trains every class at once and needs one C per loss "
                "(a grid chooses C per class on a held-out part that differs by "
                "class); give C as a number or one per loss"
            )
        if self.synthetic.generated and (self.store is not None or self.data != "synthetic"):
            raise ValueError(
                "synthetic.generated applies to synthetic data only (data: synthetic, no store)"
            )
        if not selected_methods(cfg):
            raise ValueError(
                f"no method of {cfg['methods']} has "
                + " and ".join(
                    f"{k} {cfg[k]!r}" for k in ("loss", "inference") if cfg[k] is not None
                )
                + f" (methods: {', '.join(f'{m} = {los}/{i}' for m, (los, i) in METHODS.items())})"
            )
        return self


def selected_methods(cfg):
    """The configured methods that pass the loss and inference filters, in config order."""
    return _methods.selected_methods(METHODS, cfg)
