"""The CIFAR-10 experiment's names (methods, losses, presets, the paper's numbers) and its
config schema."""

from typing import Annotated, Literal

from pydantic import Field, conint, model_validator

from qsrank.pipelines import _schema as S
from qsrank.pipelines._config import merge
from qsrank.pipelines._device import DEVICES
from qsrank.pipelines._images import SPLIT
from qsrank.pipelines._methods import check_selection, inferences

EXPERIMENT = "cifar10"
#: method -> (loss, LAI method of qs.inference)
METHODS = {
    "zero_one": ("01", "zero_one"),
    "ap_yue": ("ap", "yue"),
    "ap_qs": ("ap", "qs"),
    "ap_auto": ("ap", "auto"),
    "ndcg_chakrabarti": ("ndcg", "chakrabarti"),
    "ndcg_qs": ("ndcg", "qs"),
    "ndcg_auto": ("ndcg", "auto"),
}
LOSSES = ("01", "ap", "ndcg")
INFERENCES = inferences(METHODS)
WARM_PHASES = ("warm_cross_entropy", "warm_hinge")
TRAININGS = ("end_to_end", "layerwise")
WARM_OPTIMIZERS = {"adadelta": "Adadelta", "sgd": "SGD"}
# Mohapatra et al., CVPR 2018, Section 4.3 (real CIFAR-10, layer-wise training): test mean AP and
# mean NDCG in percent per loss, training time in hours per method.
PAPER_MAP = {"01": 84.22, "ap": 85.28}
PAPER_NDCG = {"01": 95.31, "ndcg": 96.14}
PAPER_HOURS = {"ap_yue": 1.974, "ap_qs": 1.589, "ndcg_chakrabarti": 2.217, "ndcg_qs": 1.632}
EVAL_BATCH = 500

PRESETS = {
    "default": {},
    # The paper's data, split, network and batch size; the epochs are ours (the paper's
    # layer-wise schedule does not map onto epochs of end-to-end training).
    "full": {
        "split": {"train": 45000, "val": 5000, "test": 10000},
        "widths": [64, 128, 256],
        "warm_start": {"cross_entropy_epochs": 20, "hinge_epochs": 5},
        "epochs": 10,
        "device": "auto",
    },
}


class Split(S.Section):
    train: conint(ge=1) = S.key(SPLIT["train"], "training images")
    val: conint(ge=0) = S.key(SPLIT["val"], "validation images (drawn from the training pool)")
    test: conint(ge=1) = S.key(SPLIT["test"], "test images")


class WarmStart(S.Section):
    cross_entropy_epochs: conint(ge=0) = S.key(4, "cross-entropy epochs")
    hinge_epochs: conint(ge=0) = S.key(1, "multi-class hinge epochs")
    optimizer: Literal[tuple(WARM_OPTIMIZERS)] = S.key(
        "adadelta",
        "adadelta (lr 1.0, as the paper) or sgd (with the run's momentum and weight decay)",
    )
    lr: S.real(gt=0) = S.key(1.0, "the warm start's learning rate")


class Layerwise(S.Section):
    C: S.real(gt=0) = S.key(1000.0, "weight of the mean structured hinge")
    proximal: S.real(gt=0) = S.key(100.0, "proximal weight")
    passes: conint(ge=1) = S.key(1, "passes over the mini-batches per layer")


class Config(S.Section):
    """The CIFAR-10 experiment; the defaults are the `default` preset: small and quick on 2
    CPU cores, no download."""

    experiment: Literal[EXPERIMENT] = S.key(EXPERIMENT, "the pipeline this config runs")
    preset: Literal[tuple(PRESETS)] = S.key(
        "default",
        "default (digits-as-CIFAR, narrow, quick) or full (the paper's data, split, network)",
    )
    seed: conint(ge=0) = S.key(0, "network initialisation, data split and mini-batch order")
    data: str | None = S.key(None, "null: digits-as-CIFAR; else the folder of the CIFAR-10 batches")
    split: Split = S.key(Split, "images per part of the split")
    widths: Annotated[list[conint(ge=1)], Field(min_length=3, max_length=3)] = S.key(
        [8, 16, 32], "channels of the three blocks (paper: 64, 128, 256)"
    )
    batch_size: conint(ge=2) = S.key(200, "mini-batch size")
    threads: conint(ge=1) | None = S.key(None, "torch intra-op threads (null: torch's default)")
    device: Literal[tuple(DEVICES)] = S.key(
        "cpu",
        "the network's device (auto: cuda when torch sees one); the LAI of a named "
        "method runs on the CPU",
    )
    warm_start: WarmStart = S.key(WarmStart, "the paper's warm start (after Berrada et al.)")
    epochs: conint(ge=1) = S.key(
        3, "per method, after the warm start (layer-wise: sweeps over the layers)"
    )
    training: Literal[tuple(TRAININGS)] = S.key(
        "end_to_end", "end_to_end (SGD on the whole net) or layerwise (the paper's)"
    )
    layerwise: Layerwise = S.key(
        Layerwise,
        "layer-wise SVM: per layer, proximal/2 |theta - theta_prev|^2 + C * mean "
        "structured hinge, by block-coordinate Frank-Wolfe",
    )
    lr: S.real(gt=0) = S.key(0.01, "the methods' SGD learning rate")
    momentum: S.real(ge=0) = S.key(0.9, "SGD momentum")
    weight_decay: S.real(ge=0) = S.key(5e-4, "weight decay")
    freeze_bn: bool = S.key(True, "batch norm as a fixed affine map in the rank-loss training")
    methods: S.distinct(Literal[tuple(METHODS)]) = S.key(
        ["zero_one", "ap_yue", "ap_qs", "ndcg_chakrabarti", "ndcg_qs"], "methods to train"
    )
    loss: Literal[tuple(LOSSES)] | None = S.key(None, "run only the methods of this loss")
    inference: Literal[tuple(INFERENCES)] | None = S.key(
        None, "run only the methods of this LAI method"
    )
    force: bool = S.key(False, "retrain finished methods (the warm start is kept while valid)")

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, config):
        """The preset's values under the config's."""
        preset = config.get("preset", "default") if isinstance(config, dict) else None
        return merge(PRESETS[preset], config) if preset in PRESETS else config

    @model_validator(mode="after")
    def _consistent(self):
        if self.preset == "full" and self.data is None:
            raise ValueError(
                "preset full is the paper's setting on real CIFAR-10: set data: "
                "to the folder of the CIFAR-10 batches (python or binary version)"
            )
        check_selection(METHODS, self.model_dump())
        return self
