// libFuzzer target: ParseGolden (the bytes ReadGolden reads) must return a Status for any
// input, never crash, throw or trip ASan/UBSan. Seeds: fuzz/corpus/golden/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "golden/golden_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)framegate::ParseGolden("fuzz.safetensors", bytes);
  return 0;
}
