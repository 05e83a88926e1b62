#include "harness/memory_info.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace framegate {
namespace {

// The value in kB of "<key>:" in a /proc file, in bytes; 0 when absent.
int64_t ReadProcKb(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      int64_t kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace

int64_t AvailableDeviceBytes(c10::Device device) {
  if (device.is_cpu()) return ReadProcKb("/proc/meminfo", "MemAvailable");
  return 0;
}

int64_t PeakRssBytes() { return ReadProcKb("/proc/self/status", "VmHWM"); }

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) value /= 1024.0, ++unit;
  char buf[32];
  if (unit == 0)
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof(buf), "%.1f %s", value, units[unit]);
  return buf;
}

}  // namespace framegate
