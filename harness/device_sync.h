// Waits for the work queued on a device, so that wall-clock timings measure the work
// itself. CPU work is synchronous; the CUDA path is added with the GPU build (issue 9).
#pragma once

#include <c10/core/Device.h>

namespace framegate {

inline void SynchronizeDevice(c10::Device /*device*/) {}

}  // namespace framegate
