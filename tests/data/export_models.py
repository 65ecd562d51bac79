#!/usr/bin/env python3
"""Exports the models the test suites use, with PyTorch, at test time (nothing large is committed).

For each model: <out>/<name>.onnx (opset 13, random weights, fixed seed), <name>.input.npy (the
input it was traced with) and <name>.output.npy (PyTorch's output for that input), so tests can
compare the library's results with PyTorch's. The training models (TRAINING) are exported as
tests/train/torch_training.py exports what a training session takes (BatchNorm kept, input "x"),
<name>.onnx alone. Existing files are kept, so reruns are cheap.
Usage: export_models.py OUT_DIR [NAME...]
"""
import os
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
from torch_models import Encoder  # noqa: E402
from torch_training import export_for_training  # noqa: E402


class TransformerEncoder(torch.nn.Module):
    """A small BERT-like encoder: embedding-sized input, 2 layers, 4 heads."""

    def __init__(self, d_model=64, heads=4, layers=2, ff=128):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(d_model, 10)

    def forward(self, x):
        return self.head(self.encoder(x))


MODELS = {
    "alexnet": (lambda: torchvision.models.alexnet(weights=None), (4, 3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (4, 3, 224, 224)),
    "transformer_encoder": (lambda: TransformerEncoder(), (4, 16, 64)),
}

# Trained by tests/exec/test_training_executor.cpp across IPUs and replicas, 10 steps under ASan:
# ResNet-18 at the smallest input its BatchNorms still normalise over more than one value.
TRAINING = {
    "resnet18_train": (lambda: torchvision.models.resnet18(num_classes=10), (2, 3, 16, 16)),
    "encoder_layer_train": (lambda: Encoder(), (2, 5, 16)),
}


def export(name, out_dir):
    if name in TRAINING:
        path = os.path.join(out_dir, name + ".onnx")
        if not os.path.exists(path):
            factory, input_shape = TRAINING[name]
            torch.manual_seed(0)
            tmp = path + ".tmp"
            export_for_training(factory(), torch.randn(*input_shape), tmp)
            os.replace(tmp, path)
            print(f"exported {name} -> {path}")
        return
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path) and os.path.exists(os.path.join(out_dir, name + ".output.npy")):
        return
    factory, input_shape = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    x = torch.randn(*input_shape)
    with torch.no_grad():
        y = model(x)
    tmp = path + ".tmp"
    torch.onnx.export(model, x, tmp, opset_version=13, input_names=["input"], output_names=["output"])
    np.save(os.path.join(out_dir, name + ".input.npy"), x.numpy())
    np.save(os.path.join(out_dir, name + ".output.npy"), y.numpy())
    os.replace(tmp, path)  # last, so a half-written set is redone next time
    print(f"exported {name} -> {path}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    # resnet18_train only when named: its test is skipped by default (too slow under ASan).
    for name in sys.argv[2:] or [*MODELS, "encoder_layer_train"]:
        export(name, out_dir)


if __name__ == "__main__":
    main()
