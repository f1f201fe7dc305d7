"""The PL-CNN of the CIFAR-10 experiment (paper 000, Section 4.3; Berrada et al., ICLR 2017).

Three blocks of [conv3x3 + BN + ReLU, conv3x3 + BN + ReLU, max-pool 2x2] and a linear layer
from the last block's 4x4 maps to the class scores. At the paper's widths (64, 128, 256)
it has 1,188,170 parameters. Needs torch (the ``[torch]`` extra); ``import qs`` does not
import this module.
"""

import torch
from torch import nn

PAPER_WIDTHS = (64, 128, 256)


class PLCNN(nn.Module):
    """The PL-CNN on (n, 3, 32, 32) images; `widths` the channels of the three blocks."""

    def __init__(self, widths=PAPER_WIDTHS, n_classes=10):
        super().__init__()
        layers, channels = [], 3
        for width in widths:
            for _ in range(2):
                layers += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width),
                           nn.ReLU(inplace=True)]
                channels = width
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        side = 32 // 2 ** len(widths)
        self.classifier = nn.Linear(channels * side * side, n_classes)

    def forward(self, x):
        """Class scores (n, n_classes)."""
        return self.classifier(torch.flatten(self.features(x), 1))


def n_parameters(module):
    """The number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
