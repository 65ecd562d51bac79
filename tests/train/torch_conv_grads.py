"""F32 Conv forward and both gradients by PyTorch, for tests/train/test_autodiff.cpp.

Usage: torch_conv_grads.py OUT. Writes OUT/<k>/ for each case: shape.npy (int64: N C H W M kh kw
group sh sw dh dw pad_top pad_left pad_bottom pad_right bias), x, w, b, dy (the loss's gradient by
y) and PyTorch's y, dx, dw, db (F32 .npy). Asymmetric pads are an explicit F.pad before the conv.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

CASES = [
    # N C  H   W  M kh kw g sh sw dh dw pt pl pb pr bias
    (2, 4, 9, 8, 6, 3, 2, 2, 2, 1, 1, 2, 1, 0, 0, 2, 1),  # grouped, strided, dilated, asymmetric
    (2, 3, 11, 10, 4, 3, 3, 1, 1, 1, 2, 2, 2, 1, 2, 1, 0),  # dilated
    (2, 6, 10, 9, 6, 3, 3, 6, 2, 2, 1, 1, 1, 1, 0, 0, 1),  # depthwise, strided
    (3, 8, 12, 12, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),  # ResNet-like 3x3
    (2, 5, 10, 11, 7, 3, 3, 1, 3, 2, 1, 1, 0, 1, 1, 0, 1),  # stride 3: the input gradient drops rows
    (2, 16, 7, 7, 8, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0),  # 1x1 stride 2 (a ResNet downsample)
]


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    for k, c in enumerate(CASES):
        n, ch, h, w_, m, kh, kw, g, sh, sw, dh, dw, pt, pl, pb, pr, bias = c
        d = os.path.join(out, str(k))
        os.makedirs(d, exist_ok=True)
        x = torch.randn(n, ch, h, w_, requires_grad=True)
        w = torch.randn(m, ch // g, kh, kw, requires_grad=True)
        b = torch.randn(m, requires_grad=True)
        y = F.conv2d(F.pad(x, (pl, pr, pt, pb)), w, b if bias else None, (sh, sw), 0, (dh, dw), g)
        dy = torch.randn_like(y)
        y.backward(dy)
        np.save(os.path.join(d, "shape.npy"), np.array(c, dtype=np.int64))
        for name, t in [("x", x), ("w", w), ("b", b), ("dy", dy), ("y", y)]:
            np.save(os.path.join(d, name + ".npy"), t.detach().numpy().astype(np.float32))
        for name, t in [("dx", x), ("dw", w), ("db", b)]:
            grad = t.grad if t.grad is not None else torch.zeros_like(t)
            np.save(os.path.join(d, name + ".npy"), grad.numpy().astype(np.float32))


if __name__ == "__main__":
    main()
