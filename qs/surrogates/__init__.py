"""The other ways of training for a rank-based metric, beside the exact structured hinge of
:mod:`qs.torch`: SoDeep's learned sorter (:mod:`qs.surrogates.sodeep`).

Needs the ``[torch]`` extra; the names below load torch only when first used, so
``import qs.surrogates`` alone does not.
"""

import importlib

__all__ = ["CNNSorter", "HandcraftedSorter", "LSTMSorter", "exact_ranks", "load_sorter",
           "rank_l1_error", "sodeep_ap_loss", "sodeep_spearman_loss", "synthetic_scores",
           "train_sorter"]


def __getattr__(name):
    if name in __all__:
        return getattr(importlib.import_module("qs.surrogates.sodeep"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
