"""CIFAR-10 (Mohapatra et al., CVPR 2018, Section 4.3): the PL-CNN trained for the 0-1, AP and
NDCG losses from one shared warm start, end to end by SGD or by the paper's layer-wise SVM
training; ``data: null`` is digits-as-CIFAR (no download), never reported as CIFAR-10."""

from qsrank.pipelines.cifar10.figures import plot, redraw
from qsrank.pipelines.cifar10.train import SPEC, load_data

__all__ = ["SPEC", "load_data", "plot", "redraw"]
