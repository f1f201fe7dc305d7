"""Data: the VOC2011 action poselet loader, generic feature formats, synthetic look-alikes.

Every data object says where it came from (`PoseletData.source`), so that no synthetic
number is ever reported as the papers' data.
"""

from qs.data.formats import cache_arrays, load_features, load_npz_cache
from qs.data.poselet import ACTIONS, IGNORE, N_FEATURES, PoseletData, load_poselet
from qs.data.synthetic import make_voc2011_actions

__all__ = [
    "ACTIONS",
    "IGNORE",
    "N_FEATURES",
    "PoseletData",
    "cache_arrays",
    "load_features",
    "load_npz_cache",
    "load_poselet",
    "make_voc2011_actions",
]
