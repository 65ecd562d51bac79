#pragma once
// Debian's oneDNN runs on OpenMP. The kernels call it on one OpenMP thread, the calling thread's
// ICV set to 1 while the call runs, and share work out with the device's parallel_for instead:
// the thread pool alone decides the parallelism, concurrent executor stages do not multiply it, no
// OpenMP worker threads exist for ThreadSanitizer to misread, and results depend only on the pool.
#include <omp.h>

namespace ipu::detail::math_ops {

/// Runs oneDNN on the calling thread alone while alive.
class dnnl_one_thread {
 public:
  dnnl_one_thread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~dnnl_one_thread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  dnnl_one_thread(const dnnl_one_thread&) = delete;
  dnnl_one_thread& operator=(const dnnl_one_thread&) = delete;

 private:
  int saved_;
};

}  // namespace ipu::detail::math_ops
