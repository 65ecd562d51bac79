#!/usr/bin/env python3
"""scikit-learn's handwritten digits (1,797 8x8 images, shipped by Debian's python3-sklearn) as .npy
files for examples/train_digits.cpp: pixels scaled to [0, 1] as float32 [N, 1, 8, 8], labels int64.
The images are shuffled with a fixed seed, then the first 1,500 train and the other 297 test
(scikit-learn's own order groups writers, so an unshuffled split tests on unseen writers only).
Usage: make_digits.py OUT_DIR
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    d = load_digits()
    order = np.random.RandomState(0).permutation(len(d.target))
    x = (d.images[order] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = d.target[order].astype(np.int64)
    np.save(os.path.join(out, "digits_train_x.npy"), x[:1500])
    np.save(os.path.join(out, "digits_train_y.npy"), y[:1500])
    np.save(os.path.join(out, "digits_test_x.npy"), x[1500:])
    np.save(os.path.join(out, "digits_test_y.npy"), y[1500:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
