#include "pipelines/fp8_codec.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "harness/torch_version.h"

namespace framegate {
namespace {

// The bit layout of one format. "mag" is a code without its sign bit (0x00..0x7F).
struct Fp8Layout {
  int exp_bits;
  int man_bits;
  int bias;
  uint8_t max_finite_mag;  // e4m3 S.1111.110, e5m2 S.11110.11
  uint8_t nan_mag;         // canonical NaN: e4m3 S.1111.111, e5m2 S.11111.10
  uint8_t overflow_mag;    // non-saturating overflow: e4m3 NaN, e5m2 inf (S.11111.00)
};

constexpr Fp8Layout kE4M3Layout{4, 3, 7, 0x7E, 0x7F, 0x7F};
constexpr Fp8Layout kE5M2Layout{5, 2, 15, 0x7B, 0x7E, 0x7C};

const Fp8Layout& LayoutOf(Fp8Format format) { return format == Fp8Format::kE4M3 ? kE4M3Layout : kE5M2Layout; }

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// x / 2^shift rounded to nearest, ties to even. Requires x < 2^31 and shift >= 1.
uint32_t ShiftRightRoundEven(uint32_t x, int shift) {
  assert(x < (1u << 31) && shift >= 1);
  if (shift >= 32) return 0;  // x / 2^shift < 1/2
  const uint32_t quotient = x >> shift;
  const uint32_t remainder = x & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (quotient & 1))) return quotient + 1;
  return quotient;
}

uint8_t EncodeWithLayout(float value, const Fp8Layout& layout, bool saturate) {
  const uint32_t bits = FloatBits(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return sign | layout.nan_mag;
  if (abs_bits == 0x7F800000u) {
    return sign | (saturate ? layout.max_finite_mag : layout.overflow_mag);
  }
  const int exp32 = static_cast<int>(abs_bits >> 23);  // biased float32 exponent
  const uint32_t man32 = abs_bits & 0x7FFFFFu;
  // Biased float32 exponent of the format's min normal, 2^(1 - bias).
  const int min_normal_exp32 = 127 + 1 - layout.bias;
  uint32_t mag;
  if (exp32 >= min_normal_exp32) {
    // Normal: drop the low mantissa bits; a rounding carry moves into the exponent
    // field, which is exactly the next binade (or past max finite: overflow below).
    const uint32_t exp8 = static_cast<uint32_t>(exp32 - 127 + layout.bias);
    mag = ShiftRightRoundEven((exp8 << 23) | man32, 23 - layout.man_bits);
  } else if (exp32 == 0) {
    mag = 0;  // float32 zero or subnormal: far below half the min subnormal
  } else {
    // Subnormal: count quanta of the min subnormal 2^(1 - bias - man_bits). The result
    // may round up to 1 << man_bits, which is the min normal's code.
    const uint32_t significand = man32 | 0x800000u;  // value = significand * 2^(exp32-150)
    const int shift = 150 + 1 - layout.bias - layout.man_bits - exp32;
    mag = ShiftRightRoundEven(significand, shift);
  }
  if (mag > layout.max_finite_mag) {
    mag = saturate ? layout.max_finite_mag : layout.overflow_mag;
  }
  return sign | static_cast<uint8_t>(mag);
}

std::array<float, 256> BuildDecodeTable(const Fp8Layout& layout) {
  std::array<float, 256> table{};
  const int exp_all_ones = (1 << layout.exp_bits) - 1;
  const int man_all_ones = (1 << layout.man_bits) - 1;
  const bool has_inf = layout.overflow_mag != layout.nan_mag;  // e5m2
  for (int code = 0; code < 256; ++code) {
    const bool negative = (code & 0x80) != 0;
    const int exp = (code >> layout.man_bits) & exp_all_ones;
    const int man = code & man_all_ones;
    float magnitude;
    if (has_inf && exp == exp_all_ones) {
      magnitude = man == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    } else if (!has_inf && exp == exp_all_ones && man == man_all_ones) {
      magnitude = std::numeric_limits<float>::quiet_NaN();
    } else if (exp == 0) {
      magnitude = std::ldexp(static_cast<float>(man), 1 - layout.bias - layout.man_bits);
    } else {
      magnitude =
          std::ldexp(static_cast<float>((1 << layout.man_bits) | man), exp - layout.bias - layout.man_bits);
    }
    table[code] = negative ? -magnitude : magnitude;
  }
  return table;
}

// double -> float rounded to odd (truncate, then set the last bit when inexact). Rounding
// that result to FP8 (>= 2 bits narrower) equals rounding the double directly, which
// double -> float -> FP8 with nearest-even twice does not.
float NarrowToOdd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return BitsToFloat(FloatBits(f) | 1u);
}

}  // namespace

std::string_view Fp8FormatName(Fp8Format format) { return format == Fp8Format::kE4M3 ? "e4m3" : "e5m2"; }

std::optional<Fp8Format> ParseFp8Format(std::string_view name) {
  if (name == "e4m3" || name == "e4m3fn") return Fp8Format::kE4M3;
  if (name == "e5m2") return Fp8Format::kE5M2;
  return std::nullopt;
}

float Fp8MaxFinite(Fp8Format format) { return Fp8DecodeTable(format)[LayoutOf(format).max_finite_mag]; }

float Fp8MinNormal(Fp8Format format) { return std::ldexp(1.0f, format == Fp8Format::kE4M3 ? -6 : -14); }

uint8_t EncodeFp8(float value, Fp8Format format, bool saturate) {
  return EncodeWithLayout(value, LayoutOf(format), saturate);
}

float DecodeFp8(uint8_t code, Fp8Format format) { return Fp8DecodeTable(format)[code]; }

const std::array<float, 256>& Fp8DecodeTable(Fp8Format format) {
  static const std::array<float, 256> e4m3 = BuildDecodeTable(kE4M3Layout);
  static const std::array<float, 256> e5m2 = BuildDecodeTable(kE5M2Layout);
  return format == Fp8Format::kE4M3 ? e4m3 : e5m2;
}

void EncodeFp8Array(const float* values, size_t count, Fp8Format format, uint8_t* out, bool saturate) {
  const Fp8Layout& layout = LayoutOf(format);
  for (size_t i = 0; i < count; ++i) out[i] = EncodeWithLayout(values[i], layout, saturate);
}

void DecodeFp8Array(const uint8_t* codes, size_t count, Fp8Format format, float* out) {
  const std::array<float, 256>& table = Fp8DecodeTable(format);
  for (size_t i = 0; i < count; ++i) out[i] = table[codes[i]];
}

at::Tensor EncodeFp8Tensor(const at::Tensor& values, Fp8Format format, bool saturate) {
  TORCH_CHECK(values.defined(), "EncodeFp8Tensor: undefined tensor");
  TORCH_CHECK(at::isFloatingType(values.scalar_type()),
              "EncodeFp8Tensor: values must be floating point, got ", values.scalar_type());
  const at::Tensor cpu = values.to(at::kCPU).contiguous();  // same shape as values
  at::Tensor codes = at::empty(values.sizes(), at::TensorOptions().dtype(at::kByte));
  const size_t count = static_cast<size_t>(cpu.numel());
  uint8_t* out = codes.data_ptr<uint8_t>();
  if (cpu.scalar_type() == at::kDouble) {
    const Fp8Layout& layout = LayoutOf(format);
    const double* in = cpu.data_ptr<double>();
    for (size_t i = 0; i < count; ++i) {
      out[i] = EncodeWithLayout(NarrowToOdd(in[i]), layout, saturate);
    }
  } else {
    const at::Tensor f32 = cpu.to(at::kFloat).contiguous();  // exact for fp16 / bf16
    EncodeFp8Array(f32.data_ptr<float>(), count, format, out, saturate);
  }
  return codes;
}

at::Tensor Fp8DecodeTableTensor(Fp8Format format, at::ScalarType dtype, at::Device device) {
  const std::array<float, 256>& table = Fp8DecodeTable(format);
  at::Tensor cpu = at::empty({256}, at::TensorOptions().dtype(at::kFloat));  // (256,)
  std::memcpy(cpu.data_ptr<float>(), table.data(), sizeof(float) * table.size());
  return cpu.to(device, dtype);
}

at::Tensor DecodeFp8Tensor(const at::Tensor& codes, Fp8Format format, at::ScalarType out_dtype,
                           at::Device device) {
  TORCH_CHECK(codes.defined(), "DecodeFp8Tensor: undefined tensor");
  TORCH_CHECK(codes.scalar_type() == at::kByte, "DecodeFp8Tensor: codes must be uint8, got ",
              codes.scalar_type());
  TORCH_CHECK(at::isFloatingType(out_dtype), "DecodeFp8Tensor: out_dtype must be floating ", "point, got ",
              out_dtype);
#if FRAMEGATE_TORCH_AT_LEAST(2, 1)  // kHasNativeFloat8: LibTorch's own conversion
  if (codes.dim() > 0) return codes.to(device).view(*NativeFp8Dtype(format)).to(out_dtype);
#endif
  const at::Tensor table = Fp8DecodeTableTensor(format, out_dtype, device);  // (256,)
  const at::Tensor index = codes.to(device).to(at::kLong).reshape({-1});     // (N,)
  return table.index_select(0, index).reshape(codes.sizes());
}

std::optional<at::ScalarType> NativeFp8Dtype(Fp8Format format) {
#if FRAMEGATE_TORCH_AT_LEAST(2, 1)  // kHasNativeFloat8
  return format == Fp8Format::kE4M3 ? at::ScalarType::Float8_e4m3fn : at::ScalarType::Float8_e5m2;
#else
  (void)format;
  return std::nullopt;
#endif
}

void UseFp8WithoutUpcast(const at::Tensor& codes, Fp8Format format, at::ScalarType compute,
                         const std::string& weight) {
#if FRAMEGATE_TORCH_AT_LEAST(2, 1)  // kHasNativeFloat8
  // Both operands have dimensions, so type promotion runs (a 0-dim float would not promote).
  const at::Tensor native = codes.view(*NativeFp8Dtype(format));
  at::add(native, at::zeros(native.sizes(), native.options().dtype(compute)));
#else
  (void)codes;  // without a float8 dtype there is nothing to promote: framegate raises
#endif
  TORCH_CHECK(false, "Promotion for Float8 Types is not supported, attempted to promote ",
              format == Fp8Format::kE4M3 ? "Float8_e4m3fn" : "Float8_e5m2", " and ", c10::toString(compute),
              " (weight ", weight, ")");
}

}  // namespace framegate
