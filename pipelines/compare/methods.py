"""The methods of `qsrank compare`: name -> kind and, per family of data sets, the builder of its
loss: (cfg, data) -> (loss, its own parameters); a loss takes (output, targets, index), scores
and positives (Q, b) or embeddings and labels, and the samples' places in the training set."""

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field

FAMILIES = ("classification", "retrieval")
TARGET_PRECISION = 0.9  # recall_at_precision's target and the recall-at-precision column


@dataclass(frozen=True)
class Loss:
    """A method's loss on one family: its builder, a line saying what it is, and the package
    it needs (a key of qs.surrogates.outside.PACKAGES, or a module)."""

    build: Callable
    label: str
    needs: str = "torch"


@dataclass(frozen=True)
class Method:
    """A row of the comparison: its kind and its loss per family (absent: not applicable)."""

    kind: str  # baseline | ours | global objectives | outside
    losses: dict = field(default_factory=dict)


def _method(kind, **losses):
    return Method(kind, losses)


def _untrained(cfg, data):
    return (lambda out, target, i: (out * 0).sum()), []


# ---------------------------------------------------------------------------- classification


def _cross_entropy(cfg, data):
    import torch

    return (
        lambda s, y, i: torch.nn.functional.binary_cross_entropy_with_logits(s, y.to(s.dtype))
    ), []


def _rank_hinge(loss):
    def build(cfg, data):
        from qs.torch import rank_hinge_loss

        # scores (classes, batch): one query per row, as the surrogates take them
        return (lambda s, y, i: rank_hinge_loss(s, y, loss=loss, dim=-1)), []

    return build


def _global_objective(name):
    def build(cfg, data):
        from qs.surrogates import global_objectives as go

        opts = cfg["options"]
        common = {
            "num_labels": data.Y_train.shape[1],
            "surrogate": opts["surrogate"],
            "dual_rate_factor": opts["dual_rate_factor"],
        }
        module = (
            go.AUCPRLoss(num_anchors=opts["num_anchors"], **common)
            if name == "aucpr"
            else go.RecallAtPrecisionLoss(TARGET_PRECISION, **common)
        ).to(cfg["device"])
        return (lambda s, y, i: module(s, y)), list(module.parameters())

    return build


def _smooth_ap(cfg, data):
    from qs.surrogates import outside

    return (lambda s, y, i: outside.smooth_ap_loss(s, y, cfg["options"]["temperature"])), []


def _blackbox_ap(cfg, data):
    from qs.surrogates import outside

    strength = cfg["options"]["blackbox_strength"]
    return (lambda s, y, i: outside.blackbox_ap_loss(s, y, strength)), []


def _libauc_ap(cfg, data):
    from qs.surrogates import outside

    n_train, n_classes = data.Y_train.shape
    return outside.LibAUCAPLoss(
        n_train, n_classes, gamma=cfg["options"]["libauc_gamma"], device=cfg["device"]
    ), []


def _libauc_ndcg(cfg, data):
    from qs.surrogates import outside

    opts = cfg["options"]
    return outside.LibAUCNDCGLoss(
        len(data.Y_train),
        data.Y_train.sum(0),
        num_pos=opts["libauc_num_pos"],
        gamma0=opts["libauc_gamma"],
        device=cfg["device"],
    ), []


def _soft_rank_ap(cfg, data):
    from qs.surrogates import outside

    return (lambda s, y, i: outside.soft_rank_ap_loss(s, y)), []


def _sodeep_ap(cfg, data):
    """SoDeep's AP loss on the batch cut into groups of the frozen sorter's length (the rest
    of the batch left out of the step; a batch shorter than the length, such as an epoch's
    last, gives a zero loss)."""
    from qs.surrogates import sodeep

    sorter = sodeep.load_sorter()
    length = sorter.length

    def loss(s, y, i):
        groups = s.shape[1] // length
        if groups == 0:
            return (s * 0).sum()
        cut = groups * length
        shape = (s.shape[0] * groups, length)
        return sodeep.sodeep_ap_loss(
            s[:, :cut].reshape(shape), y[:, :cut].reshape(shape), sorter=sorter
        )

    return loss, []


# ---------------------------------------------------------------------------- retrieval


def _pairs(embeddings, labels):
    """Each query's cosine similarities to the other samples of the batch, and which of
    them share its class: (b, b - 1) each."""
    from qs.torch.retrieval import off_diagonal, similarities

    return (
        off_diagonal(similarities(embeddings, embeddings)),
        off_diagonal(labels[:, None] == labels[None, :]),
    )


def _retrieval_hinge(cfg, data):
    from qs.torch.retrieval import retrieval_loss

    return (lambda e, y, i: retrieval_loss(e, y, loss="ap")), []


def _memory_hinge(cfg, data):
    from qs.torch.memory import CrossBatchMemory

    memory = CrossBatchMemory(cfg["options"]["memory_size"], loss="ap").to(cfg["device"])
    return (lambda e, y, i: memory(e, y)), []


def _direct_ap(cfg, data):
    from qs.torch.dlm import direct_loss

    opts = cfg["options"]
    return (
        lambda e, y, i: direct_loss(
            *_pairs(e, y), "ap", eps=opts["dlm_eps"], update=opts["dlm_update"], dim=-1
        )
    ), []


def _pml_loss(name, **options):
    """pytorch-metric-learning's loss `name`, its arguments from the config's options."""

    def build(cfg, data):
        from qs.surrogates.outside import require

        losses = require("pytorch-metric-learning", "pytorch_metric_learning.losses")
        module = getattr(losses, name)(**{k: cfg["options"][o] for k, o in options.items()})
        return (lambda e, y, i: module(e, y)), []

    return build


def _retrieval_blackbox_ap(cfg, data):
    from qs.surrogates import outside

    strength = cfg["options"]["blackbox_strength"]
    return (lambda e, y, i: outside.blackbox_ap_loss(*_pairs(e, y), strength)), []


def _retrieval_libauc_ap(cfg, data):
    from qs.surrogates import outside

    return outside.LibAUCRetrievalAPLoss(
        len(data.y_train),
        data.train_classes,
        gamma=cfg["options"]["libauc_gamma"],
        device=cfg["device"],
    ), []


# ---------------------------------------------------------------------------- the table

#: every method `methods:` may name
METHODS = {
    "cross_entropy": _method(
        "baseline", classification=Loss(_cross_entropy, "binary cross-entropy, one-vs-rest")
    ),
    "zero_one": _method("baseline", classification=Loss(_rank_hinge("01"), "0-1: binary hinge")),
    "ap_hinge": _method(
        "ours",
        classification=Loss(_rank_hinge("ap"), "AP structured hinge, exact LAI"),
        retrieval=Loss(
            _retrieval_hinge,
            "AP structured hinge, exact LAI, every sample of the batch a query against the others",
        ),
    ),
    "ndcg_hinge": _method(
        "ours", classification=Loss(_rank_hinge("ndcg"), "NDCG structured hinge, exact LAI")
    ),
    "aucpr": _method(
        "global objectives", classification=Loss(_global_objective("aucpr"), "AUCPR, K anchors")
    ),
    "recall_at_precision": _method(
        "global objectives",
        classification=Loss(_global_objective("recall_at_precision"), "recall at precision 0.9"),
    ),
    "smooth_ap": _method(
        "outside",
        classification=Loss(_smooth_ap, "Smooth-AP, temperature 0.01"),
        retrieval=Loss(
            _pml_loss("SmoothAPLoss", temperature="temperature"),
            "Smooth-AP, pytorch-metric-learning's SmoothAPLoss",
            "pytorch-metric-learning",
        ),
    ),
    "blackbox_ap": _method(
        "outside",
        classification=Loss(_blackbox_ap, "AP of black-box ranks"),
        retrieval=Loss(
            _retrieval_blackbox_ap, "AP of black-box ranks of each query's similarities"
        ),
    ),
    "libauc_ap": _method(
        "outside",
        classification=Loss(_libauc_ap, "LibAUC AP (SOAP)", "libauc"),
        retrieval=Loss(
            _retrieval_libauc_ap, "LibAUC AP (SOAP), a table per class of the query", "libauc"
        ),
    ),
    "libauc_ndcg": _method(
        "outside", classification=Loss(_libauc_ndcg, "LibAUC NDCG (SONG)", "libauc")
    ),
    "soft_rank_ap": _method(
        "outside",
        classification=Loss(_soft_rank_ap, "AP of torchsort soft ranks", "torchsort"),
    ),
    "sodeep_ap": _method(
        "outside",
        classification=Loss(_sodeep_ap, "SoDeep AP, frozen sorter", "qs.surrogates.sodeep"),
    ),
    "ap_hinge_memory": _method(
        "ours",
        retrieval=Loss(
            _memory_hinge,
            "AP structured hinge, exact LAI, against the batch and a memory of "
            "past embeddings (qs.torch.memory.CrossBatchMemory)",
        ),
    ),
    "dlm_ap": _method(
        "ours",
        retrieval=Loss(
            _direct_ap,
            "direct loss minimization of AP on the exact inference (qs.torch.dlm.direct_loss)",
        ),
    ),
    "fastap": _method(
        "outside",
        retrieval=Loss(
            _pml_loss("FastAPLoss", num_bins="fastap_bins"),
            "FastAP, pytorch-metric-learning's FastAPLoss",
            "pytorch-metric-learning",
        ),
    ),
    "untrained": _method(
        "baseline",
        **dict.fromkeys(
            FAMILIES,
            Loss(
                _untrained,
                "the seeded initial model, never moved (a zero loss): where training starts",
            ),
        ),
    ),
}
BASELINES = ("cross_entropy", "zero_one", "untrained")


def make_loss(name, family, cfg, data):
    """Method `name`'s loss on a data set of `family`: (loss, its own parameters)."""
    return METHODS[name].losses[family].build(cfg, data)


def check_available(name, family):
    """Raise a one-line ImportError when method `name` needs, on `family`, something not
    installed."""
    needs = METHODS[name].losses[family].needs
    if needs.startswith("qs."):
        if importlib.util.find_spec(needs) is None:
            raise ImportError(f"method {name} needs {needs}, which this installation lacks")
        return
    if importlib.util.find_spec("torch") is None:  # every outside method trains with torch
        raise ImportError(
            f"method {name} needs torch, which is not installed: pip install 'qsrank[torch]'"
        )
    from qs.surrogates.outside import PACKAGES

    module = PACKAGES[needs][0] if needs in PACKAGES else needs
    if importlib.util.find_spec(module) is None:
        how = PACKAGES[needs][1] if needs in PACKAGES else "pip install 'qsrank[torch]'"
        raise ImportError(f"method {name} needs the package {needs}, which is not installed: {how}")
