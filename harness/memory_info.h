// Memory figures of this process and its devices, read from the operating system
// (/proc) or, in a CUDA build, from the CUDA runtime.
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/Device.h>

namespace framegate {

// Bytes a new allocation can take on `device`: MemAvailable for the CPU, free memory for
// a GPU. 0 when unknown (the caller then does not refuse anything).
int64_t AvailableDeviceBytes(c10::Device device);
// This process's peak resident set size (VmHWM) in bytes; 0 when unknown.
int64_t PeakRssBytes();
// "1.5 GiB", "320.0 MiB", "12 B".
std::string FormatBytes(int64_t bytes);

}  // namespace framegate
