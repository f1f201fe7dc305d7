"""Data: the VOC2011 action poselet loader, generic feature formats, synthetic look-alikes,
and synthetic classes for embedding learning.

Every data object says where it came from (`PoseletData.source`), so that no synthetic
number is ever reported as the papers' data.
"""

from qs.data.boxes import VocAnnotation, load_image_set, load_rcnn_cache, load_voc_annotation
from qs.data.formats import cache_arrays, load_features, load_npz_cache
from qs.data.latent_list import LatentListData, load_latent_list
from qs.data.poselet import ACTIONS, IGNORE, N_FEATURES, PoseletData, load_poselet
from qs.data.retrieval import make_retrieval_classes
from qs.data.store import BoxStore, open_store
from qs.data.synthetic import make_voc2011_actions

__all__ = [
    "ACTIONS",
    "BoxStore",
    "IGNORE",
    "LatentListData",
    "N_FEATURES",
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
