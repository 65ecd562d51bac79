// Must not compile: a schedule opts in with its tag. Checked by tests/compile_fail.cmake.
#include "ipu/exec/engine.hpp"

struct my_schedule {};

int main() { return sizeof(ipu::exec::engine<my_schedule>) > 0 ? 0 : 1; }
