#!/usr/bin/env python3
"""PyTorch's side of tests/train/test_training_graph.cpp: a Linear -> Dropout -> Linear exported in
train() mode, and one SGD step of it given the mask the library drew (PyTorch's own generator cannot
be matched, so the mask is applied explicitly: h * mask / (1 - p)).

Usage: torch_dropout.py export OUT_DIR   writes model.onnx, x.npy, labels.npy and <param>.npy
       torch_dropout.py step OUT_DIR     reads those and mask.npy; writes trained_<param>.npy
"""
import os
import sys

import numpy as np
import torch

P = 0.5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 6)
        self.drop = torch.nn.Dropout(P)
        self.fc2 = torch.nn.Linear(6, 3)

    def forward(self, x):
        return self.fc2(self.drop(self.fc1(x)))


def export(d):
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(5, 4)
    labels = torch.randn(5, 3)
    model.train()
    torch.onnx.export(model, (x,), os.path.join(d, "model.onnx"), opset_version=13, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING, input_names=["x"], output_names=["y"])
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    for name, p in model.named_parameters():
        np.save(os.path.join(d, name + ".npy"), p.detach().numpy())


def step(d):
    model = Net()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(np.load(os.path.join(d, name + ".npy"))))
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy")))
    labels = torch.from_numpy(np.load(os.path.join(d, "labels.npy")))
    mask = torch.from_numpy(np.load(os.path.join(d, "mask.npy")))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    y = model.fc2(model.fc1(x) * (mask.float() / (1 - P)))
    torch.nn.functional.mse_loss(y, labels).backward()
    opt.step()
    for name, p in model.named_parameters():
        np.save(os.path.join(d, "trained_" + name + ".npy"), p.detach().numpy())


if __name__ == "__main__":
    {"export": export, "step": step}[sys.argv[1]](sys.argv[2])
