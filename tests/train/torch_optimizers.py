#!/usr/bin/env python3
"""PyTorch training runs for tests/train/test_optimizer.cpp: RMSprop and Adagrad as torch.optim has
them, LAMB written here from its paper's formulas (You et al., 2019, Algorithm 2; torch has no LAMB),
and gradient accumulation as PopTorch defines it (each update uses the mean, or the sum, of its
micro-batches' gradients; BatchNorm's running statistics move once per micro-batch).

Each case writes OUT/<case>/ as tests/train/pytorch_reference.hpp describes; a row of x.npy holds a
step's micro-batches, stacked along the first axis.
Usage: torch_optimizers.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.fc2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class CnnBn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        x = self.bn(torch.relu(self.conv(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class MlpProbabilities(torch.nn.Module):
    """Per-class probabilities (sigmoid), for BCELoss on multi-label targets."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.fc2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


class Lamb:
    """LAMB from the paper: m, v as Adam; u = m^ / (sqrt(v^) + eps) + wd w; w -= lr * phi(|w|) / |u| * u,
    phi clipping the norm at max_weight_norm, the ratio 1 when either norm is 0."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, bias_correction=True,
                 max_weight_norm=None):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.bias_correction, self.max_weight_norm = bias_correction, max_weight_norm
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            mh, vh = (m / (1 - b1 ** self.t), v / (1 - b2 ** self.t)) if self.bias_correction else (m, v)
            u = mh / (vh.sqrt() + self.eps) + self.wd * p
            r1 = p.norm()
            if self.max_weight_norm is not None:
                r1 = torch.clamp(r1, max=self.max_weight_norm)
            r2 = u.norm()
            ratio = r1 / r2 if (r1 > 0 and r2 > 0) else torch.tensor(1.0)
            p.sub_(self.lr * ratio * u)


class AdamHalfMoments:
    """torch.optim.Adam's arithmetic in float32 with its moments stored in float16 between steps
    (PopTorch's first_order_momentum_accum_type / second_order_momentum_accum_type = float16)."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.m = [torch.zeros_like(p).half() for p in self.params]
        self.v = [torch.zeros_like(p).half() for p in self.params]
        self.t = 0

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        self.t += 1
        b1, b2 = self.betas
        for i, p in enumerate(self.params):
            g = p.grad + self.wd * p
            m = b1 * self.m[i].float() + (1 - b1) * g
            v = b2 * self.v[i].float() + (1 - b2) * g * g
            self.m[i], self.v[i] = m.half(), v.half()
            step_size = self.lr / (1 - b1 ** self.t)
            p.sub_(step_size * m / (v.sqrt() / (1 - b2 ** self.t) ** 0.5 + self.eps))


def export_for_training(model, x, path):
    """Writes `model` on input `x` to ONNX (input "x", output "y") with PyTorch's parameter names, and
    leaves it in train() mode. Exported in eval mode but with TrainingMode.PRESERVE:
    TrainingMode.EVAL (the default) folds a BatchNorm that follows a Conv into the Conv's weights,
    leaving nothing to train in train() mode."""
    model.eval()
    torch.onnx.export(model, (x,), path, opset_version=13, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE, input_names=["x"], output_names=["y"])
    model.train()


def run(out_dir, case, model, x, labels, loss_fn, make_opt, steps, micro=1, reduction="mean"):
    """x, labels: [rows, micro * batch, ...]; step k uses row k % rows, split into `micro` micro-batches."""
    d = os.path.join(out_dir, case)
    os.makedirs(d, exist_ok=True)
    batch = x.shape[1] // micro
    export_for_training(model, x[0][:batch], os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    opt = make_opt(model.parameters())
    losses = []
    for k in range(steps):
        opt.zero_grad()
        total = 0.0
        for j in range(micro):
            rows = slice(j * batch, (j + 1) * batch)
            loss = loss_fn(model(x[k % x.shape[0]][rows]), labels[k % labels.shape[0]][rows])
            if reduction == "mean":
                loss = loss / micro
            total += loss.item()
            loss.backward()
        losses.append(total)
        opt.step()
    for name, p in model.named_parameters():
        np.save(os.path.join(d, name + ".npy"), p.detach().numpy())
    for name, b in model.named_buffers():
        if b.is_floating_point():
            np.save(os.path.join(d, name + ".npy"), b.numpy())
    model.eval()
    np.save(os.path.join(d, "losses.npy"), np.array(losses, dtype=np.float64))
    with torch.no_grad():
        np.save(os.path.join(d, "out.npy"), model(x[0][:batch]).numpy())


def mlp_case(out, case, make_opt, steps=10, micro=1, reduction="mean"):
    torch.manual_seed(11)
    model = Mlp()
    x = torch.randn(3, 5 * micro, 6)
    labels = torch.randint(0, 4, (3, 5 * micro))
    run(out, case, model, x, labels, torch.nn.CrossEntropyLoss(), make_opt, steps, micro, reduction)


def main():
    out = sys.argv[1]
    mlp_case(out, "mlp_rmsprop", lambda p: torch.optim.RMSprop(p, lr=0.01))
    mlp_case(out, "mlp_rmsprop_centered_momentum",
             lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.01, momentum=0.5,
                                           centered=True))
    mlp_case(out, "mlp_adagrad",
             lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.05, weight_decay=0.01, initial_accumulator_value=0.1))
    mlp_case(out, "mlp_lamb", lambda p: Lamb(p, lr=0.01, eps=1e-6, weight_decay=0.01))
    mlp_case(out, "mlp_lamb_nobias_clipped",
             lambda p: Lamb(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.02, bias_correction=False,
                            max_weight_norm=0.5))
    mlp_case(out, "mlp_adam_f16_moments", lambda p: AdamHalfMoments(p, lr=0.01, weight_decay=0.01))
    mlp_case(out, "mlp_adam_accumulate4", lambda p: torch.optim.Adam(p, lr=0.01), steps=6, micro=4)
    mlp_case(out, "mlp_sgd_accumulate3_sum", lambda p: torch.optim.SGD(p, lr=0.02, momentum=0.9), steps=6, micro=3,
             reduction="sum")
    torch.manual_seed(13)
    model = MlpProbabilities()
    x = torch.randn(3, 5, 6)
    labels = (torch.rand(3, 5, 4) > 0.5).float()
    run(out, "mlp_bce_adam", model, x, labels, torch.nn.BCELoss(), lambda p: torch.optim.Adam(p, lr=0.02), 10)
    torch.manual_seed(12)
    model = CnnBn()
    x = torch.randn(3, 2 * 3, 1, 6, 6)
    labels = torch.randint(0, 3, (3, 2 * 3))
    run(out, "cnn_bn_adamw_accumulate2", model, x, labels, torch.nn.CrossEntropyLoss(),
        lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05), 6, micro=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
