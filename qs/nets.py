"""The PL-CNN of the CIFAR-10 experiment (Mohapatra et al., CVPR 2018, Section 4.3; Berrada et al.,
ICLR 2017).

Three blocks of [conv3x3 + BN + ReLU, conv3x3 + BN + ReLU, max-pool 2x2] and a linear layer
from the last block's 4x4 maps to the class scores. At the paper's widths (64, 128, 256)
it has 1,188,170 parameters. With the activation pattern (ReLU masks, max-pool choices)
held fixed and batch norm in eval mode, the class scores are affine in each layer's weights:
the layer-wise SVM training of the paper solves one convex problem per layer that way
(:meth:`PLCNN.patterns`, :meth:`PLCNN.forward_fixed`). Needs torch (the ``[torch]`` extra); ``import qs`` does not
import this module.
"""

import torch
from torch import nn
from torch.nn import functional as F

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

    def linear_layers(self):
        """The convolutions and the classifier, input to output: the layers trained one at a
        time by the layer-wise training."""
        return [m for m in self.features if isinstance(m, nn.Conv2d)] + [self.classifier]

    def patterns(self, x):
        """The activation pattern of `x` at the current weights: each ReLU's mask and each
        max-pool's argmax indices, in order (no gradient)."""
        found = []
        with torch.no_grad():
            for layer in self.features:
                if isinstance(layer, nn.ReLU):
                    found.append(x > 0)
                    x = x.clamp_min(0)
                elif isinstance(layer, nn.MaxPool2d):
                    x, index = F.max_pool2d(x, 2, return_indices=True)
                    found.append(index)
                else:
                    x = layer(x)
        return found

    def forward_fixed(self, x, patterns):
        """Class scores with the activation pattern `patterns` (of :meth:`patterns`) held
        fixed; equal to ``forward`` at the weights the pattern was taken at."""
        given = iter(patterns)
        for layer in self.features:
            if isinstance(layer, nn.ReLU):
                x = x * next(given)
            elif isinstance(layer, nn.MaxPool2d):
                index = next(given)
                x = x.flatten(2).gather(2, index.flatten(2)).view(index.shape)
            else:
                x = layer(x)
        return self.classifier(torch.flatten(x, 1))


def n_parameters(module):
    """The number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
