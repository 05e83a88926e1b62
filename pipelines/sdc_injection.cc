#include "pipelines/sdc_injection.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "harness/number_limits.h"

namespace framegate {
namespace {

constexpr RealLimit kSdcRateLimit = {"the rate", 0.0, 1e6, false, " of flips per pass"};

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.push_back("");
  return parts;
}

bool ParseBits(const std::string& text, SdcBits* bits) {
  for (SdcBits b :
       {SdcBits::kMantissaLow, SdcBits::kMantissaHigh, SdcBits::kExponent, SdcBits::kSign, SdcBits::kAny}) {
    if (text == SdcBitsName(b)) {
      *bits = b;
      return true;
    }
  }
  return false;
}

// The element of `value` at flat index `element` (C order) as a one-element view of
// integers of its width, which a bitwise XOR flips in place on any device.
at::Tensor ElementBits(const at::Tensor& value, int64_t element) {
  at::Tensor e = value;
  int64_t rest = element;
  std::vector<int64_t> index(static_cast<size_t>(value.dim()));
  for (int64_t d = value.dim() - 1; d >= 0; --d) {
    index[static_cast<size_t>(d)] = rest % value.size(d);
    rest /= value.size(d);
  }
  for (int64_t d = 0; d < value.dim(); ++d) e = e.select(0, index[static_cast<size_t>(d)]);
  return e.unsqueeze(0).view(value.element_size() == 4 ? at::kInt : at::kShort);
}

}  // namespace

const char* SdcBitsName(SdcBits bits) {
  switch (bits) {
    case SdcBits::kMantissaLow:
      return "mantissa-low";
    case SdcBits::kMantissaHigh:
      return "mantissa-high";
    case SdcBits::kExponent:
      return "exponent";
    case SdcBits::kSign:
      return "sign";
    case SdcBits::kAny:
      return "any";
  }
  return "?";
}

std::string SdcSpec::ToString() const {
  std::ostringstream out;
  out << device << ":" << rate << ":" << (persistent ? "persistent" : "transient") << ":"
      << SdcBitsName(bits);
  return out.str();
}

StatusOr<SdcSpec> ParseSdcSpec(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidInput("--inject-sdc '" + text + "': " + why +
                                " (expected DEVICE:RATE[:transient|persistent][:BITS])");
  };
  const std::vector<std::string> parts = Split(text, ':');
  // The device may hold a colon ("cpu:avx512", "cuda:1"): it does when the third field is
  // the rate.
  auto numeric = [](const std::string& t) {
    return !t.empty() && (std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.');
  };
  if (parts.size() < 2 || parts[0].empty())
    return bad(parts.empty() || parts[0].empty() ? "no device" : "no rate");
  const size_t rate_at = parts.size() >= 3 && numeric(parts[2]) ? 2 : 1;
  SdcSpec spec;
  for (size_t i = 0; i < rate_at; ++i) spec.device += (i ? ":" : "") + parts[i];
  StatusOr<double> rate = ParseNumber(kSdcRateLimit, parts[rate_at]);
  if (!rate.ok()) return bad(rate.status().message());
  spec.rate = *rate;
  for (size_t i = rate_at + 1; i < parts.size(); ++i) {
    if (parts[i] == "persistent" || parts[i] == "transient") {
      spec.persistent = parts[i] == "persistent";
    } else if (!ParseBits(parts[i], &spec.bits)) {
      return bad("'" + parts[i] +
                 "' is neither transient|persistent nor mantissa-low|mantissa-high|exponent|sign|any");
    }
  }
  return spec;
}

BitRange SdcBitRange(SdcBits bits, int element_bits, int mantissa_bits) {
  const int sign = element_bits - 1;
  switch (bits) {
    case SdcBits::kMantissaLow:
      return {0, mantissa_bits / 2 - 1};
    case SdcBits::kMantissaHigh:
      return {mantissa_bits / 2, mantissa_bits - 1};
    case SdcBits::kExponent:
      return {mantissa_bits, sign - 1};
    case SdcBits::kSign:
      return {sign, sign};
    case SdcBits::kAny:
      return {0, sign};
  }
  return {0, sign};
}

void SdcInjector::Arm(int64_t outputs, uint64_t pass_seed) {
  targets_.clear();
  next_ = 0;
  if (outputs <= 0) return;
  uint64_t state = pass_seed;
  const double whole = std::floor(spec_.rate);
  int64_t count = static_cast<int64_t>(whole);
  const double fraction = spec_.rate - whole;
  if (fraction > 0 && static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53 < fraction) ++count;
  std::set<int64_t> chosen;
  count = std::min(count, outputs);
  while (static_cast<int64_t>(chosen.size()) < count)
    chosen.insert(static_cast<int64_t>(SplitMix64(state) % outputs));
  for (int64_t output : chosen) targets_.push_back({output, SplitMix64(state)});
}

void SdcInjector::Observe(const ModuleOutput& output) {
  const at::Tensor& value = output.value;
  if (!value.defined() || !value.is_floating_point() || value.numel() == 0) return;
  const int64_t index = seen_++;
  if (next_ >= targets_.size() || targets_[next_].output != index) return;
  const uint64_t draw = targets_[next_++].draw;
  const int width = static_cast<int>(value.element_size()) * 8;
  if (width != 32 && width != 16) return;  // float64 and FP8 storage are not flipped
  const int mantissa = width == 32 ? 23 : value.scalar_type() == at::kBFloat16 ? 7 : 10;
  const BitRange range = SdcBitRange(spec_.bits, width, mantissa);
  SdcFlip flip;
  flip.step = output.step;
  flip.module = output.module;
  flip.op = output.op;
  flip.element = static_cast<int64_t>(draw % static_cast<uint64_t>(value.numel()));
  flip.bit = range.low + static_cast<int>((draw >> 32) % static_cast<uint64_t>(range.high - range.low + 1));
  c10::NoGradGuard no_grad;
  const at::Tensor bits = ElementBits(value, flip.element);
  flip.before = bits.view(value.scalar_type()).item<double>();
  const int64_t mask = width == 32 ? static_cast<int64_t>(static_cast<int32_t>(uint32_t{1} << flip.bit))
                                   : static_cast<int64_t>(static_cast<int16_t>(uint16_t(1u << flip.bit)));
  bits.bitwise_xor_(mask);
  flip.after = bits.view(value.scalar_type()).item<double>();
  flips_.push_back(std::move(flip));
}

}  // namespace framegate
