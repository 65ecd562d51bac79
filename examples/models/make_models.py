#!/usr/bin/env python3
"""Produces the small real models bundled with the project (run with Debian's python3-torch).

lenet5.onnx: LeCun's LeNet-5 (conv-pool-conv-pool-fc-fc-fc, ReLU) for 1x28x28 digits, batch 4,
random weights from a fixed seed, opset 13, plus the input it was traced with and PyTorch's output
(lenet5.input.npy, lenet5.output.npy) so the main job can check itself against PyTorch.
Usage: /usr/bin/python3 make_models.py [OUT_DIR]
"""
import os
import sys

import numpy as np
import torch


class LeNet5(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.classifier = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(16 * 5 * 5, 120), torch.nn.ReLU(),
            torch.nn.Linear(120, 84), torch.nn.ReLU(), torch.nn.Linear(84, 10))

    def forward(self, x):
        return torch.softmax(self.classifier(self.features(x)), dim=1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(2026)
    model = LeNet5().eval()
    x = torch.rand(4, 1, 28, 28)
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, x, os.path.join(out, "lenet5.onnx"), opset_version=13,
                      input_names=["image"], output_names=["probabilities"])
    np.save(os.path.join(out, "lenet5.input.npy"), x.numpy())
    np.save(os.path.join(out, "lenet5.output.npy"), y.numpy())


if __name__ == "__main__":
    main()
