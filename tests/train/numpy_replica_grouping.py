#!/usr/bin/env python3
"""The replica-grouping example of poptorch-features.txt 4.4.3 as the mathematics it stands for,
for tests/train/test_session.cpp: Z = X W on the whole problem (X [24, 40], W [40, 56]), loss
mean(Z^2), 4 steps of SGD with lr 0.01, in float64 (numpy).

Eight replicas split W four ways (orthogonal groups of two replicas, each group holding 14 of W's
columns) and X two ways (consecutive input groups of four replicas, each taking 12 of X's rows):
each replica's loss is the mean over its [12, 14] block, so the mean of the eight replicas' losses is
the whole problem's loss, and the whole problem's gradient of a group's columns is the sum of its two
replicas' gradients divided by the 8 replicas.

Writes OUT/grouping/: x.npy [24, 40], w_init.npy and w_final.npy as one value per group [4, 40, 14],
losses.npy [4] (float64). Usage: numpy_replica_grouping.py OUT_DIR
"""
import os
import sys

import numpy as np

out = os.path.join(sys.argv[1], "grouping")
os.makedirs(out, exist_ok=True)
tensor_shards, data_shards, steps, lr = 4, 2, 4, 0.01
random = np.random.RandomState(seed=100)
x = random.normal(size=(24, 40)).astype(np.float32)
w_init = random.normal(size=(40, 56)).astype(np.float32) * np.float32((5 * 8) ** -0.5)


def grouped(w):  # [40, 56] -> one value per group [4, 40, 14]
    return np.ascontiguousarray(w.reshape(40, tensor_shards, 56 // tensor_shards).transpose(1, 0, 2))


w = w_init.astype(np.float64)
xd = x.astype(np.float64)
losses = []
for _ in range(steps):
    z = xd @ w
    losses.append(np.mean(z * z))
    w = w - lr * (xd.T @ (2 * z / z.size))
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "w_init.npy"), grouped(w_init))
np.save(os.path.join(out, "w_final.npy"), grouped(w).astype(np.float32))
np.save(os.path.join(out, "losses.npy"), np.array(losses))
