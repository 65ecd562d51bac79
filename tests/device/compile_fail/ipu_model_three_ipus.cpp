// Must not compile: a device has a power of two of IPUs. Checked by tests/compile_fail.cmake.
#include "ipu/device/device_model.hpp"

int main() { return static_cast<int>(ipu::ipu_model<ipu::mk2, 3>::num_ipus); }
