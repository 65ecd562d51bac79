"""PyTorch's BLAS on a given thread count, for the benchmarks that time PyTorch.

torch.set_num_threads does not reach the OpenBLAS that Debian's PyTorch runs its matrix products
on: that library keeps a thread per core. On a busy machine its spare thread made PyTorch's
training step swing 2-10x between rounds; on an idle one it gives PyTorch a second core that
`--threads 1` says it does not have.
"""
import ctypes

import torch


def pin(threads):
    """Holds PyTorch's OpenBLAS (loaded first if need be) to `threads` threads and returns its
    kernel set (OPENBLAS_CORETYPE can hold it to an older CPU's), or 'none' when PyTorch runs on
    another BLAS."""
    torch.set_num_threads(threads)
    torch.ones(2, 2) @ torch.ones(2, 2)  # loads PyTorch's BLAS
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "openblas" in line})
    for lib in libs:
        try:
            blas = ctypes.CDLL(lib)
            corename, set_threads = blas.openblas_get_corename, blas.openblas_set_num_threads
        except (OSError, AttributeError):
            continue
        set_threads.argtypes = [ctypes.c_int]
        set_threads(threads)
        corename.restype = ctypes.c_char_p
        return corename().decode()
    return "none"
