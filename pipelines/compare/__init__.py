"""`qsrank compare` (docs/experiments/compare.md): every method of `methods.METHODS` trains the
same model from the same initialisation, on the same data, batches and budget, per seed; the
units are data set x method x seed, on the data sets of the families the method has a loss for."""

from typing import Annotated, Literal

from pydantic import Field, conint, model_validator

from qsrank.pipelines import _schema as S
from qsrank.pipelines._device import DEVICES, prepare, torch_threads
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines._runs import digest_arrays
from qsrank.pipelines.compare import classification, outputs, retrieval
from qsrank.pipelines.compare.methods import FAMILIES, METHODS, check_available
from qsrank.pipelines.compare.outputs import DATASETS, FAMILY_OF, redraw, results_frame
from qsrank.pipelines.compare.training import train_one

EXPERIMENT = "compare"

__all__ = ["SPEC", "redraw", "results_frame", "train_one"]


class Epochs(S.Section):
    """A data set's budget: epochs, and seconds (stop after the first epoch past it)."""

    epochs: conint(ge=1) | None = S.key(10, "the budget in epochs (null: seconds only)")
    seconds: S.real(gt=0) | None = S.key(
        None, "the budget in seconds: stop after the first epoch past it (null: none)"
    )

    @model_validator(mode="after")
    def _a_budget(self):
        if self.epochs is None and self.seconds is None:
            raise ValueError("set a budget, epochs or seconds (both are null)")
        return self


class Budget(Epochs):
    """A classification data set's budget, and Adam's step size and batch size."""

    batch_size: conint(ge=2) = S.key(256, "mini-batch size")
    lr: S.real(gt=0) = S.key(0.01, "Adam's step size for the model")


VOCBudget = S.with_defaults(Budget, epochs=5, batch_size=512)
DigitsBudget = S.with_defaults(Budget, epochs=20, batch_size=128)


class CifarBudget(S.with_defaults(Budget, epochs=3, batch_size=200)):
    warm_start_epochs: conint(ge=0) = S.key(
        3, "cross-entropy epochs of the PL-CNN's warm start, shared by every method"
    )
    widths: Annotated[list[conint(ge=1)], Field(min_length=3, max_length=3)] = S.key(
        [8, 16, 32], "channels of the PL-CNN's three blocks"
    )


class RetrievalBudget(Epochs):
    """A retrieval data set's budget, its class-balanced batches and its embedding model."""

    lr: S.real(gt=0) = S.key(0.001, "Adam's step size for the model")
    classes_per_batch: conint(ge=2) = S.key(5, "classes in each batch")
    samples_per_class: conint(ge=2) = S.key(5, "samples of each class in a batch")
    hidden: conint(ge=0) = S.key(
        0, "hidden units of an MLP (ReLU) before the embedding (0: a linear map)"
    )
    dim: conint(ge=1) = S.key(32, "embedding dimensions")


class DigitsRetrieval(S.with_defaults(RetrievalBudget, epochs=5)):
    train_classes: S.distinct(conint(ge=0, le=9)) = S.key(
        [0, 1, 2, 3, 4], "the training digits; the others are held out for the test"
    )

    @model_validator(mode="after")
    def _held_out(self):
        if not 2 <= len(self.train_classes) <= 8:
            raise ValueError(
                f"train_classes: expected 2 to 8 digits (the others are held out "
                f"for the test); got {len(self.train_classes)}"
            )
        return self


class SyntheticRetrieval(
    S.with_defaults(RetrievalBudget, classes_per_batch=8, samples_per_class=8)
):
    classes: conint(ge=4) = S.key(
        100, "classes generated; the first half train, the second half is held out"
    )
    per_class: conint(ge=2) = S.key(30, "samples of each class")


class Options(S.Section):
    """The losses' own settings."""

    num_anchors: conint(ge=1) = S.key(20, "AUCPR's anchors")
    dual_rate_factor: S.real(gt=0) = S.key(
        0.1, "global objectives: the multipliers' ascent, as a fraction of the descent step"
    )
    surrogate: Literal["hinge", "xent"] = S.key("xent", "global objectives' surrogate")
    temperature: S.real(gt=0) = S.key(0.01, "Smooth-AP's sigmoid temperature")
    blackbox_strength: S.real(gt=0) = S.key(1000.0, "black-box AP's interpolation strength")
    libauc_gamma: S.real(gt=0) = S.key(
        0.9, "LibAUC's moving-average weight (SOAP gamma, SONG gamma0)"
    )
    libauc_num_pos: conint(ge=1) = S.key(8, "LibAUC NDCG's num_pos")
    memory_size: conint(ge=1) = S.key(
        512, "ap_hinge_memory: past embeddings kept in the memory bank"
    )
    dlm_eps: S.real(gt=0) = S.key(
        0.1, "dlm_ap: the step eps of direct loss minimization, on the cosine scale"
    )
    dlm_update: Literal["positive", "negative"] = S.key(
        "positive", "dlm_ap: the positive or the negative update"
    )
    fastap_bins: conint(ge=1) = S.key(10, "FastAP's histogram bins")


class Config(S.Section):
    """`qsrank compare`: every method, data set and seed; the same model, data and budget."""

    experiment: Literal[EXPERIMENT] = S.key(EXPERIMENT, "the pipeline this config runs")
    seeds: S.distinct(conint(ge=0)) = S.key(
        [0, 1, 2], "training seeds (initialisation and batch order); the data split is fixed"
    )
    methods: S.distinct(Literal[tuple(METHODS)]) = S.key(
        [
            "cross_entropy",
            "zero_one",
            "ap_hinge",
            "ndcg_hinge",
            "aucpr",
            "recall_at_precision",
            "smooth_ap",
            "blackbox_ap",
            "libauc_ap",
            "libauc_ndcg",
        ],
        "the methods compared (each on the data sets of the families it has a loss for)",
    )
    datasets: S.distinct(Literal[tuple(DATASETS)]) = S.key(
        list(classification.DATASETS), "the data sets"
    )
    voc2011_actions: VOCBudget = S.key(VOCBudget, "budget and steps on voc2011_actions")
    digits: DigitsBudget = S.key(DigitsBudget, "budget and steps on digits")
    cifar10: CifarBudget = S.key(CifarBudget, "budget, steps and network on cifar10")
    digits_retrieval: DigitsRetrieval = S.key(
        DigitsRetrieval, "budget, batches, model and split of digits_retrieval"
    )
    synthetic_retrieval: SyntheticRetrieval = S.key(
        SyntheticRetrieval, "budget, batches, model and data of synthetic_retrieval"
    )
    loss_lr: S.real(gt=0) = S.key(
        0.01, "SGD step of the losses' own parameters (thresholds, multipliers)"
    )
    options: Options = S.key(Options, "the losses' own settings")
    threads: conint(ge=1) | None = S.key(None, "torch intra-op threads (null: torch's default)")
    device: Literal[tuple(DEVICES)] = S.key(
        "cpu",
        "where the models and the losses run (auto: cuda when torch sees one); "
        "numba's inference and LibAUC's moving averages follow the scores' device",
    )
    force: bool = S.key(False, "retrain what the run directory holds")

    @model_validator(mode="after")
    def _applicable(self):
        families = {FAMILY_OF[d] for d in self.datasets}
        for name in self.methods:
            mine = [f for f in FAMILIES if f in METHODS[name].losses]
            if not families.intersection(mine):
                raise ValueError(
                    f"methods: {name} runs on {' and '.join(mine)} data sets "
                    f"only, and datasets names none"
                )
            for family in families.intersection(mine):
                check_available(name, family)
        for dataset in self.datasets:
            section = getattr(self, dataset)
            if (
                "smooth_ap" in self.methods
                and FAMILY_OF[dataset] == "retrieval"
                and section.classes_per_batch != section.samples_per_class
            ):
                raise ValueError(
                    f"{dataset}: smooth_ap (pytorch-metric-learning's SmoothAPLoss) needs "
                    f"classes_per_batch equal to samples_per_class; got "
                    f"{section.classes_per_batch} and {section.samples_per_class}"
                )
        return self


def load_data(cfg):
    """{data set: its data} for the data sets of `cfg`, each split fixed (the same for every
    seed), and {data set: the digest of its arrays}."""
    sets = {
        name: (
            classification.load_data(name)
            if FAMILY_OF[name] == "classification"
            else retrieval.load_data(name, cfg[name])
        )
        for name in cfg["datasets"]
    }
    return {"sets": sets, "sha256": {n: digest_arrays(*d.arrays()) for n, d in sets.items()}}


def settings(cfg, data):
    """The run's settings, as its provenance records them: every data set's note and
    digest, and the losses' settings."""
    return {
        "data": {n: d.note for n, d in data["sets"].items()},
        "data_sha256": digest_arrays(*(s.encode() for s in data["sha256"].values())),
        **_losses(cfg),
    }


def _losses(cfg):
    """The losses' settings and device."""
    return {k: cfg[k] for k in ("loss_lr", "options", "device")}


def unit_settings(cfg, data, unit):
    """What a unit's record depends on besides the unit: its data set's section and data,
    and the losses' settings (so a change to one data set retrains only that one)."""
    dataset = unit[0]
    return {
        "dataset": dataset,
        "section": cfg[dataset],
        "data": data["sets"][dataset].note,
        "data_sha256": data["sha256"][dataset],
        **_losses(cfg),
    }


def units(cfg, data):
    """Data set x method x seed, data sets outer; a method only on the data sets of the
    families it has a loss for."""
    return [
        (dataset, method, f"seed{seed}")
        for dataset in cfg["datasets"]
        for method in cfg["methods"]
        if FAMILY_OF[dataset] in METHODS[method].losses
        for seed in cfg["seeds"]
    ]


def task(run, dataset):
    """The training task of `dataset`, made once per run."""
    tasks = run.cache.setdefault("tasks", {})
    if dataset not in tasks:
        family = classification if FAMILY_OF[dataset] == "classification" else retrieval
        tasks[dataset] = family.Task(run.data["sets"][dataset], run.cfg, dataset)
    return tasks[dataset]


def run_unit(run, unit):
    """Train and evaluate one (data set, method, seed): its record."""
    dataset, method, seed = unit[0], unit[1], int(unit[2].removeprefix("seed"))
    work = task(run, dataset)
    start = None
    if dataset == "cifar10":  # the PL-CNN's warm start, shared by the methods of a seed
        starts = run.cache.setdefault("starts", {})
        if seed not in starts:
            starts[seed] = work.warm_start(seed)
        start = starts[seed]
    return train_one(method, work, run.cfg, dataset, seed, start)


def write(run, records):
    outputs.write(run.out, run.cfg, records, {n: d.note for n, d in run.data["sets"].items()})


SPEC = Experiment(
    name=EXPERIMENT,
    schema=Config,
    load_data=load_data,
    settings=settings,
    units=units,
    run_unit=run_unit,
    write=write,
    session=torch_threads,
    prepare=prepare,
    unit_settings=unit_settings,
    unit_label="run",
    report=("tables.md",),
)
