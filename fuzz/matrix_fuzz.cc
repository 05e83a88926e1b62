// libFuzzer target: ParseMatrix (TOML text -> expanded cells) must return a Status for any
// input, never crash, throw or trip ASan/UBSan. Seeds: fuzz/corpus/matrix/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "matrix/matrix_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<framegate::DeviceInfo> kFound = {
      framegate::DeviceInfo{"cpu", "Fuzz CPU", "avx2", 0, ""},
      framegate::DeviceInfo{"cuda:0", "Fuzz GPU", "9.0", 1 << 30, "550"}};
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A base directory that does not exist: model package paths never resolve to real files.
  (void)framegate::ParseMatrix(text, "fuzz.toml", "/nonexistent-framegate-fuzz", kFound);
  return 0;
}
