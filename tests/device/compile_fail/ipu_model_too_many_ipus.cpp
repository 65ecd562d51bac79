// Must not compile: a device has at most 64 IPUs. Checked by tests/compile_fail.cmake.
#include "ipu/device/device_model.hpp"

int main() { return static_cast<int>(ipu::ipu_model<ipu::mk2, 128>::num_ipus); }
