"""Data: the VOC2011 action poselet loader, generic feature formats, synthetic look-alikes,
and synthetic classes for embedding learning.

Every data object says where it came from (`PoseletData.source`), so that no synthetic
number is ever reported as the papers' data.

The names below load their module on first use, so that importing one module of the package
(``qs.data.tables`` for a command that reads a CSV, say) does not import every reader and
the compiled kernels of the synthetic generators.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for readers and tools; loaded by __getattr__
    from qs.data.boxes import VocAnnotation, load_image_set, load_rcnn_cache, load_voc_annotation
    from qs.data.formats import cache_arrays, load_features, load_npz_cache
    from qs.data.latent_list import LatentListData, load_latent_list
    from qs.data.poselet import ACTIONS, IGNORE, N_FEATURES, PoseletData, load_poselet
    from qs.data.retrieval import make_retrieval_classes
    from qs.data.store import BoxStore, open_store
    from qs.data.synthetic import make_voc2011_actions

#: public name -> the module that defines it
_MODULES = {
    **dict.fromkeys(
        ["VocAnnotation", "load_image_set", "load_rcnn_cache", "load_voc_annotation"],
        "qs.data.boxes",
    ),
    **dict.fromkeys(["cache_arrays", "load_features", "load_npz_cache"], "qs.data.formats"),
    **dict.fromkeys(["LatentListData", "load_latent_list"], "qs.data.latent_list"),
    **dict.fromkeys(
        ["ACTIONS", "IGNORE", "N_FEATURES", "PoseletData", "load_poselet"], "qs.data.poselet"
    ),
    "make_retrieval_classes": "qs.data.retrieval",
    **dict.fromkeys(["BoxStore", "open_store"], "qs.data.store"),
    "make_voc2011_actions": "qs.data.synthetic",
}

__all__ = [
    "ACTIONS",
    "IGNORE",
    "N_FEATURES",
    "BoxStore",
    "LatentListData",
    "PoseletData",
    "VocAnnotation",
    "cache_arrays",
    "load_features",
    "load_image_set",
    "load_latent_list",
    "load_npz_cache",
    "load_poselet",
    "load_rcnn_cache",
    "load_voc_annotation",
    "make_retrieval_classes",
    "make_voc2011_actions",
    "open_store",
]


def __getattr__(name):
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'qs.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # loaded once
    return value


def __dir__():
    return sorted({*globals(), *__all__})
