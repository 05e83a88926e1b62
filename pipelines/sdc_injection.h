// Silent data corruption you can inject (a testing aid of `framegate qualify` and
// `check --replay`, docs/qualification.md): bit flips in the outputs of a model's ops
// (the reference model's modules, a package's ops) on one device, to measure whether
// qualification finds a device that corrupts data without NaN.
//
//   --inject-sdc DEVICE:RATE[:transient|persistent][:BITS]
//     DEVICE  the device whose process flips ("cpu:avx512", "cuda:1")
//     RATE    flips per pass (a replay or a run): floor(RATE) flips, plus one more with
//             probability RATE - floor(RATE); 0.25 flips in a quarter of the passes
//     persistent (default): the same flips in every repeat, like a stuck bit;
//     transient: other flips in each repeat
//     BITS    mantissa-low | mantissa-high | exponent | sign | any (default exponent):
//             which bits of the element's dtype (float32, bfloat16, float16) flip
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/status.h"
#include "pipelines/layers.h"

namespace framegate {

enum class SdcBits { kMantissaLow, kMantissaHigh, kExponent, kSign, kAny };
const char* SdcBitsName(SdcBits bits);

struct SdcSpec {
  std::string device;
  double rate = 1;
  bool persistent = true;
  SdcBits bits = SdcBits::kExponent;
  std::string ToString() const;  // the spec's text, normalised: "cpu:avx512:1:persistent:exponent"
};

// InvalidInput "--inject-sdc 'TEXT': <problem>" for a spec that is not the grammar above.
StatusOr<SdcSpec> ParseSdcSpec(const std::string& text);

// One flip made: where, which bit, the value before and after.
struct SdcFlip {
  int step = 0;  // sampler step, -1 the decoder
  std::string module;
  std::string op;
  int64_t element = 0;
  int bit = 0;
  double before = 0, after = 0;
};

// Flips bits in op outputs as a ModuleObserver. A pass first needs the number of outputs
// it sees (CountPass, or a pass with Observe while not armed counts them); Arm then picks
// the flips of the next pass among that many outputs, from `pass_seed` (the same seed
// gives the same flips: persistent; another seed other flips: transient).
class SdcInjector {
 public:
  explicit SdcInjector(SdcSpec spec) : spec_(std::move(spec)) {}
  const SdcSpec& spec() const { return spec_; }
  // Picks the flips of the next pass among `outputs` outputs.
  void Arm(int64_t outputs, uint64_t pass_seed);
  void Disarm() { targets_.clear(); }
  void BeginPass() { seen_ = 0; }
  // Counts the output and flips it in place when it is a target. Outputs that are not
  // floating point or empty are not counted.
  void Observe(const ModuleOutput& output);
  int64_t outputs_seen() const { return seen_; }
  const std::vector<SdcFlip>& flips() const { return flips_; }  // every flip made, in order

 private:
  struct Target {
    int64_t output;
    uint64_t draw;  // picks the element and the bit
  };
  SdcSpec spec_;
  std::vector<Target> targets_;  // sorted by output
  size_t next_ = 0;
  int64_t seen_ = 0;
  std::vector<SdcFlip> flips_;
};

// The bit range [low, high] of `bits` for an element of `element_bits` (32 or 16) bits
// of the floating dtype with `mantissa_bits` mantissa bits.
struct BitRange {
  int low, high;
};
BitRange SdcBitRange(SdcBits bits, int element_bits, int mantissa_bits);

}  // namespace framegate
