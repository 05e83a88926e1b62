// libFuzzer target: ParseNpy must return a Status for any bytes, and a parsed array must
// hold exactly NumElements() values (ToFloat32 reads them all). Seeds: fuzz/corpus/npy/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "harness/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  framegate::StatusOr<framegate::NpyArray> array = framegate::ParseNpy("fuzz.npy", data, size);
  if (!array.ok()) return 0;
  const std::vector<float> values = array->ToFloat32();
  if (static_cast<int64_t>(values.size()) != array->NumElements()) std::abort();
  return 0;
}
