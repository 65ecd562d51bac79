#!/usr/bin/env python3
"""Exports the models the test suites use, with PyTorch, at test time (nothing large is committed).

For each model: <out>/<name>.onnx (opset 13, random weights, fixed seed), <name>.input.npy (the
input it was traced with) and <name>.output.npy (PyTorch's output for that input), so tests can
compare the library's results with PyTorch's. The training models (TRAINING) are exported as
tests/train/torch_training.py exports what a training session takes (BatchNorm kept, input "x"),
<name>.onnx alone. The latency benchmark's models (LATENCY, benchmarks/model_latency.py) are exported
like MODELS, but only when named. Existing files are kept, so reruns are cheap.
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


class Tagger(torch.nn.Module):
    """A sequence tagger: a 2-layer bidirectional LSTM or GRU over 32 embedded tokens (the input is
    the embeddings, so the graph is the recurrent layers and a per-token classifier), 17 tags."""

    def __init__(self, cell, features=64, hidden=128, tags=17):
        super().__init__()
        self.rnn = cell(features, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * hidden, tags)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def mlp():
    """MNIST-sized: 784 -> 512 -> 512 -> 10."""
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10))


MODELS = {
    "alexnet": (lambda: torchvision.models.alexnet(weights=None), (4, 3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (4, 3, 224, 224)),
    "transformer_encoder": (lambda: TransformerEncoder(), (4, 16, 64)),
}

# The latency benchmark's other models (issue 13's reference set), batch 4: exported only when named,
# so the test fixture does not pay for them.
_vision = (4, 3, 224, 224)
LATENCY = {
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), _vision),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None), _vision),
    "mnasnet1_0": (lambda: torchvision.models.mnasnet1_0(weights=None), _vision),
    "densenet121": (lambda: torchvision.models.densenet121(weights=None), _vision),
    # No auxiliary classifiers: eval mode would not run them. init_weights named: left None, torchvision
    # warns that its default will change.
    "googlenet": (lambda: torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True), _vision),
    "regnet_y_400mf": (lambda: torchvision.models.regnet_y_400mf(weights=None), _vision),
    "shufflenet_v2_x1_0": (lambda: torchvision.models.shufflenet_v2_x1_0(weights=None), _vision),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(weights=None), _vision),
    "vgg11": (lambda: torchvision.models.vgg11(weights=None), _vision),
    "lstm_tagger": (lambda: Tagger(torch.nn.LSTM), (4, 32, 64)),
    "gru_tagger": (lambda: Tagger(torch.nn.GRU), (4, 32, 64)),
    "mlp": (mlp, (4, 784)),
}

# Trained by tests/exec/test_training_executor.cpp across IPUs and replicas, 10 steps under ASan:
# ResNet-18 at the smallest input its BatchNorms still normalise over more than one value.
TRAINING = {
    "resnet18_train": (lambda: torchvision.models.resnet18(num_classes=10), (2, 3, 16, 16)),
    "encoder_layer_train": (lambda: Encoder(), (2, 5, 16)),
}


def _batch_statistics(model, input_shape):
    """Sets every BatchNorm's running mean and variance to those of one random batch.

    At their initial statistics (mean 0, variance 1) the BatchNorms normalise nothing, and through
    many random layers the activations fade: GoogLeNet's and ShuffleNet's logits were their
    classifier's bias to 1 part in 10^5, so comparing outputs checked only that bias. Only the
    BatchNorms run in training mode, and on a generator of their own, so dropout and stochastic
    depth stay off and the global seed (the exported input) is untouched.
    """
    model.eval()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return model
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: after one batch, that batch's statistics
        m.train()
    with torch.no_grad():
        model(torch.randn(*input_shape, generator=torch.Generator().manual_seed(1)))
    return model.eval()


def build(name):
    """The inference model NAME (of MODELS or LATENCY) in eval mode, with the weights export()
    gives it, and its input shape."""
    if name in MODELS:
        factory, input_shape = MODELS[name]
        torch.manual_seed(0)
        return factory().eval(), input_shape
    factory, input_shape = LATENCY[name]
    torch.manual_seed(0)
    return _batch_statistics(factory(), input_shape), input_shape


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
    model, input_shape = build(name)
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
