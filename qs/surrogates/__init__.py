"""The other ways of training for a rank-based metric, beside the exact structured hinge of
`qs.torch`: SoDeep's learned sorter (`qs.surrogates.sodeep`), the global objectives
of Eban et al. (`qs.surrogates.global_objectives`) and the outside methods
(`qs.surrogates.outside`).

Needs the ``[torch]`` extra; the names below load torch only when first used, so
``import qs.surrogates`` alone does not.
"""

import importlib
from typing import Any

_MODULES = {
    "qs.surrogates.sodeep": (
        "CNNSorter",
        "HandcraftedSorter",
        "LSTMSorter",
        "exact_ranks",
        "load_sorter",
        "rank_l1_error",
        "sodeep_ap_loss",
        "sodeep_spearman_loss",
        "synthetic_scores",
        "train_sorter",
    ),
    "qs.surrogates.global_objectives": (
        "AUCPRLoss",
        "FBetaLoss",
        "PrecisionAtRecallLoss",
        "ROCAUCLoss",
        "RecallAtPrecisionLoss",
        "false_positives_upper_bound",
        "true_positives_lower_bound",
    ),
    "qs.surrogates.outside": (
        "LibAUCAPLoss",
        "LibAUCNDCGLoss",
        "blackbox_ap_loss",
        "blackbox_ranks",
        "smooth_ap_loss",
        "soft_rank_ap_loss",
        "soft_rank_spearman_loss",
    ),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """The public name `name` of its submodule, imported on first use."""
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
