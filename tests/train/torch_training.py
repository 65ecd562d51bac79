#!/usr/bin/env python3
"""PyTorch training runs for tests/train/test_session.cpp: the reference the library must match.

For each case: OUT/<case>/model.onnx (the untrained model, exported with PyTorch's parameter names
as initializer names), x.npy and labels.npy (one batch per step, stacked: [steps, batch, ...]),
and after training with torch.optim on those batches: <param>.npy for every trained parameter,
losses.npy (the loss of each step, before its update) and out.npy (the trained model's output on
the first batch).
Usage: torch_training.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch


class SeedExample(torch.nn.Module):
    """poptorch-features.txt 4.2.1: Linear(10, 10) trained with MSELoss."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 10)

    def forward(self, x):
        return self.fc(x)


class Mlp(torch.nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.fc2 = torch.nn.Linear(8, classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)) + torch.relu(self.fc1(x)) * 0.5)


class SmallCnn(torch.nn.Module):
    """LeNet-like: convolutions (one strided and padded), max and average pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
        self.fc = torch.nn.Linear(6 * 3 * 3, 5)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)  # [N, 4, 6, 6]
        x = torch.nn.functional.avg_pool2d(torch.tanh(self.conv2(x)), 1)  # [N, 6, 3, 3]
        return self.fc(torch.flatten(x, 1))


class CnnBn(torch.nn.Module):
    """Convolutions with BatchNorm2d, trained in train() mode: batch statistics, running ones updated."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 6, 3, stride=2)
        self.bn2 = torch.nn.BatchNorm2d(6)
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        # Each BatchNorm2d after a ReLU (TiedInitials has them right after a Conv).
        x = self.bn1(torch.relu(self.conv1(x)))
        x = self.bn2(torch.relu(self.conv2(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class LstmTagger(torch.nn.Module):
    """Embedding -> bidirectional LSTM (batch first) -> Linear: per-token scores [N, C, T]."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(12, 4)
        self.lstm = torch.nn.LSTM(4, 5, batch_first=True, bidirectional=True)
        self.fc = torch.nn.Linear(10, 3)

    def forward(self, x):
        y, _ = self.lstm(self.emb(x))
        return self.fc(y).transpose(1, 2)


class GruTagger(torch.nn.Module):
    """Embedding -> two-layer GRU (time first) -> Linear: per-token scores flattened to [T * N, C]."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(12, 4)
        self.gru = torch.nn.GRU(4, 5, num_layers=2)
        self.fc = torch.nn.Linear(5, 3)

    def forward(self, x):
        y, _ = self.gru(self.emb(x.t()))
        return self.fc(y).reshape(-1, 3)


class TiedInitials(torch.nn.Module):
    """Conv -> BatchNorm2d twice, then two LayerNorms and a Linear head. PyTorch's export shares equal
    initial values: bn2's weight, bias and statistics, norm1's and norm2's weight and bias are
    Identity ops of one initializer each (bn1's ones and zeros), which must still train separately."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(4)
        self.norm1 = torch.nn.LayerNorm(4)
        self.norm2 = torch.nn.LayerNorm(4)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(self.norm2(torch.tanh(self.norm1(x))))


def optimizer_for(name, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)
    if name == "sgd_nesterov":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)
    if name == "adam":
        return torch.optim.Adam(params, lr=0.01, weight_decay=0.01)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)
    raise ValueError(name)


def export_for_training(model, example, path):
    """Exports `model` as a training session takes it: input "x", output "y", PyTorch's parameter
    names as initializer names. Eval mode, but TrainingMode.PRESERVE: the default (EVAL) folds a
    BatchNorm that directly follows a Conv into the Conv, leaving no BatchNorm to train in train() mode."""
    model.eval()
    torch.onnx.export(model, (example,), path, opset_version=13, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE, input_names=["x"], output_names=["y"])
    model.train()  # the export ran the model in eval mode


def run(out_dir, case, model, x, labels, loss_fn, opt_name, steps):
    d = os.path.join(out_dir, case)
    os.makedirs(d, exist_ok=True)
    export_for_training(model, x[0], os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    opt = optimizer_for(opt_name, model.parameters())
    losses = []
    for k in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x[k % x.shape[0]]), labels[k % labels.shape[0]])
        losses.append(loss.item())
        loss.backward()
        opt.step()
    for name, p in model.named_parameters():
        np.save(os.path.join(d, name + ".npy"), p.detach().numpy())
    for name, b in model.named_buffers():
        if b.is_floating_point():  # running statistics, not the batch counter
            np.save(os.path.join(d, name + ".npy"), b.numpy())
    model.eval()  # the trained output, as PyTorch's inference would give it
    np.save(os.path.join(d, "losses.npy"), np.array(losses, dtype=np.float64))
    with torch.no_grad():
        np.save(os.path.join(d, "out.npy"), model(x[0]).numpy())


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = SeedExample()
    x = torch.randn(1, 10)
    target = torch.randn(1, 10)
    run(out, "seed_example", model, x, target, torch.nn.MSELoss(), "sgd", 800)

    for opt_name in ["sgd_momentum", "sgd_nesterov", "adam", "adamw"]:
        torch.manual_seed(1)
        model = Mlp()
        x = torch.randn(3, 5, 6)
        labels = torch.randint(0, 4, (3, 5))
        run(out, "mlp_ce_" + opt_name, model, x, labels, torch.nn.CrossEntropyLoss(), opt_name, 10)
    for opt_name in ["sgd_momentum", "adam"]:
        torch.manual_seed(4)
        model = SmallCnn()
        x = torch.randn(3, 4, 1, 12, 12)
        labels = torch.randint(0, 5, (3, 4))
        run(out, "cnn_ce_" + opt_name, model, x, labels, torch.nn.CrossEntropyLoss(), opt_name, 10)
    torch.manual_seed(5)
    model = CnnBn()
    x = torch.randn(3, 4, 1, 8, 8)
    labels = torch.randint(0, 3, (3, 4))
    run(out, "cnn_bn_ce_sgd_momentum", model, x, labels, torch.nn.CrossEntropyLoss(), "sgd_momentum", 10)
    torch.manual_seed(2)
    model = Mlp()
    x = torch.randn(2, 5, 6)
    target = torch.randn(2, 5, 4)
    run(out, "mlp_l1_sgd_momentum", model, x, target, torch.nn.L1Loss(), "sgd_momentum", 10)
    for opt_name in ["sgd_momentum", "adam"]:
        torch.manual_seed(6)
        model = LstmTagger()
        x = torch.randint(0, 12, (3, 4, 6))
        labels = torch.randint(0, 3, (3, 4, 6))
        run(out, "lstm_tagger_ce_" + opt_name, model, x, labels, torch.nn.CrossEntropyLoss(), opt_name, 10)
    for opt_name in ["sgd_momentum", "adam"]:
        torch.manual_seed(7)
        model = GruTagger()
        x = torch.randint(0, 12, (3, 4, 6))
        labels = torch.randint(0, 3, (3, 6 * 4))  # time-major, as the scores are flattened
        run(out, "gru_tagger_ce_" + opt_name, model, x, labels, torch.nn.CrossEntropyLoss(), opt_name, 10)
    torch.manual_seed(8)
    model = TiedInitials()
    x = torch.randn(3, 4, 1, 6, 6)
    labels = torch.randint(0, 3, (3, 4))
    run(out, "tied_initials_ce_sgd_momentum", model, x, labels, torch.nn.CrossEntropyLoss(), "sgd_momentum", 10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
