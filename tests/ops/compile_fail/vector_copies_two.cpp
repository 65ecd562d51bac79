// IPU_VECTOR_COPIES takes 0 or 1; any other value is refused, not read as one of them.
#define IPU_VECTOR_COPIES 2
#include "ipu/ops/kernels/vector_isa.hpp"

int main() {}
