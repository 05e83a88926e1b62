#include "pipelines/fp8_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "harness/torch_version.h"

namespace framegate {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// Written from the OFP8 spec's field table, independently of the codec.
struct RefSpec {
  int exp_bits, man_bits, bias;
  bool ieee_specials;  // e5m2: exp all ones = inf (man 0) / NaN; e4m3: only S.1111.111 NaN
  uint8_t max_code;    // largest positive finite code
};

RefSpec SpecOf(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? RefSpec{4, 3, 7, false, 0x7E} : RefSpec{5, 2, 15, true, 0x7B};
}

double RefDecode(uint8_t code, const RefSpec& s) {
  const int sign = code >> 7;
  const int exp = (code >> s.man_bits) & ((1 << s.exp_bits) - 1);
  const int man = code & ((1 << s.man_bits) - 1);
  const double sgn = sign ? -1.0 : 1.0;
  const bool exp_ones = exp == (1 << s.exp_bits) - 1;
  if (s.ieee_specials && exp_ones) return man == 0 ? sgn * HUGE_VAL : std::nan("");
  if (!s.ieee_specials && exp_ones && man == (1 << s.man_bits) - 1) return std::nan("");
  const double frac = (exp == 0 ? 0.0 : 1.0) + man / static_cast<double>(1 << s.man_bits);
  const int e = (exp == 0 ? 1 : exp) - s.bias;
  double scale = 1.0;
  for (int i = 0; i < e; ++i) scale *= 2.0;
  for (int i = 0; i > e; --i) scale /= 2.0;
  return sgn * frac * scale;
}

bool IsNaNCode(uint8_t code, Fp8Format f) { return std::isnan(RefDecode(code, SpecOf(f))); }

uint8_t CanonicalNaN(Fp8Format f, bool negative) {
  return static_cast<uint8_t>((f == Fp8Format::kE4M3 ? 0x7F : 0x7E) | (negative ? 0x80 : 0));
}

// Nearest finite code to finite x by brute force over the reference values of x's sign,
// ties to the even code (the one whose mantissa ends in 0): the saturating encoding.
uint8_t BruteForceNearest(float x, Fp8Format f) {
  const RefSpec s = SpecOf(f);
  const uint8_t sign = (Bits(x) >> 31) ? 0x80 : 0x00;
  // Beyond max, max is nearest (and x - v would round in double for huge x).
  if (std::fabs(x) >= RefDecode(s.max_code, s)) return sign | s.max_code;
  uint8_t best = sign;
  double best_dist = HUGE_VAL;
  for (int mag = 0; mag <= s.max_code; ++mag) {
    const uint8_t code = static_cast<uint8_t>(sign | mag);
    const double dist = std::fabs(static_cast<double>(x) - RefDecode(code, s));
    if (dist < best_dist || (dist == best_dist && (code & 1) == 0)) {
      best = code;
      best_dist = dist;
    }
  }
  return best;
}

// The reference for any float32 and either mode.
uint8_t RefEncode(float x, Fp8Format f, bool saturate) {
  const RefSpec s = SpecOf(f);
  const bool negative = std::signbit(x);
  if (std::isnan(x)) return CanonicalNaN(f, negative);
  const uint8_t sign = negative ? 0x80 : 0x00;
  const uint8_t overflow = s.ieee_specials ? 0x7C : 0x7F;
  if (std::isinf(x)) return sign | (saturate ? s.max_code : overflow);
  if (!saturate) {
    // Overflow when |x| rounds above max: past max + ulp/2, or on it if max's code is odd.
    const double max = RefDecode(s.max_code, s);
    const double threshold = max + (max - RefDecode(s.max_code - 1, s)) / 2;
    const double a = std::fabs(static_cast<double>(x));
    if (a > threshold || (a == threshold && (s.max_code & 1))) return sign | overflow;
  }
  return BruteForceNearest(x, f);
}

class Fp8CodecTest : public ::testing::TestWithParam<Fp8Format> {};

TEST_P(Fp8CodecTest, DecodeMatchesReferenceForAllCodes) {
  const Fp8Format f = GetParam();
  const std::array<float, 256>& table = Fp8DecodeTable(f);
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const double ref = RefDecode(code, SpecOf(f));
    const float got = DecodeFp8(code, f);
    EXPECT_EQ(Bits(got), Bits(table[c])) << "code " << c;
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(Bits(got), Bits(static_cast<float>(ref)))
          << "code " << c << " got " << got << " want " << ref;
    }
  }
}

TEST_P(Fp8CodecTest, EncodeOfDecodeIsIdentity) {
  const Fp8Format f = GetParam();
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const float v = DecodeFp8(code, f);
    if (IsNaNCode(code, f)) {
      EXPECT_EQ(EncodeFp8(v, f, true), CanonicalNaN(f, c & 0x80)) << "code " << c;
      EXPECT_EQ(EncodeFp8(v, f, false), CanonicalNaN(f, c & 0x80)) << "code " << c;
    } else if (std::isinf(v)) {  // e5m2 only: saturating storage clamps inf to max
      EXPECT_EQ(EncodeFp8(v, f, false), code) << "code " << c;
      EXPECT_EQ(EncodeFp8(v, f, true), (c & 0x80) | 0x7B) << "code " << c;
    } else {
      EXPECT_EQ(EncodeFp8(v, f, true), code) << "code " << c;
      EXPECT_EQ(EncodeFp8(v, f, false), code) << "code " << c;
    }
  }
}

TEST_P(Fp8CodecTest, FiniteValuesIncreaseWithCodeAndMirrorOnSign) {
  const Fp8Format f = GetParam();
  const uint8_t max_code = SpecOf(f).max_code;
  for (int c = 1; c <= max_code; ++c) {
    EXPECT_LT(DecodeFp8(static_cast<uint8_t>(c - 1), f), DecodeFp8(static_cast<uint8_t>(c), f))
        << "code " << c;
  }
  for (int c = 0; c < 128; ++c) {
    if (IsNaNCode(static_cast<uint8_t>(c), f)) continue;
    EXPECT_EQ(Bits(DecodeFp8(static_cast<uint8_t>(c | 0x80), f)),
              Bits(-DecodeFp8(static_cast<uint8_t>(c), f)))
        << "code " << c;
  }
  EXPECT_EQ(Fp8MaxFinite(f), DecodeFp8(max_code, f));
}

TEST_P(Fp8CodecTest, MidpointsRoundToEvenCode) {
  const Fp8Format f = GetParam();
  for (int c = 0; c < SpecOf(f).max_code; ++c) {
    const float a = DecodeFp8(static_cast<uint8_t>(c), f);
    const float b = DecodeFp8(static_cast<uint8_t>(c + 1), f);
    const float mid = (a + b) / 2;  // exact in float32
    const uint8_t even = static_cast<uint8_t>(c % 2 == 0 ? c : c + 1);
    for (bool saturate : {true, false}) {
      EXPECT_EQ(EncodeFp8(mid, f, saturate), even) << "between codes " << c << " and " << c + 1;
      EXPECT_EQ(EncodeFp8(-mid, f, saturate), even | 0x80) << "negative, code " << c;
      EXPECT_EQ(EncodeFp8(std::nextafter(mid, kInf), f, saturate), c + 1) << "code " << c;
      EXPECT_EQ(EncodeFp8(std::nextafter(mid, 0.0f), f, saturate), c) << "code " << c;
    }
  }
}

TEST_P(Fp8CodecTest, SweepOfFloat32MatchesBruteForceNearest) {
  const Fp8Format f = GetParam();
  std::vector<float> values;
  values.reserve(1u << 20);
  for (uint32_t i = 0; i < (1u << 20); ++i) {
    // Every 4096th bit pattern (exact ties included); odd steps get low "sticky" bits too.
    const uint32_t low = (i & 1) ? ((i * 2654435761u) >> 20) : 0;
    values.push_back(FromBits((i << 12) | low));
  }
  std::vector<uint8_t> array_codes(values.size());
  EncodeFp8Array(values.data(), values.size(), f, array_codes.data());
  int failures = 0;
  for (size_t i = 0; i < values.size() && failures < 10; ++i) {
    const float x = values[i];
    for (bool saturate : {true, false}) {
      const uint8_t want = RefEncode(x, f, saturate);
      const uint8_t got = EncodeFp8(x, f, saturate);
      if (got != want) {
        ++failures;
        ADD_FAILURE() << "x=" << x << " bits=0x" << std::hex << Bits(x) << " saturate=" << saturate
                      << " got 0x" << int{got} << " want 0x" << int{want};
      }
    }
    if (array_codes[i] != EncodeFp8(x, f)) {
      ++failures;
      ADD_FAILURE() << "EncodeFp8Array differs from EncodeFp8 at x=" << x;
    }
  }
  std::vector<float> decoded(array_codes.size());
  DecodeFp8Array(array_codes.data(), array_codes.size(), f, decoded.data());
  for (size_t i = 0; i < decoded.size(); i += 97) {
    ASSERT_EQ(Bits(decoded[i]), Bits(DecodeFp8(array_codes[i], f)));
  }
}

TEST_P(Fp8CodecTest, SpecialInputs) {
  const Fp8Format f = GetParam();
  for (bool saturate : {true, false}) {
    EXPECT_EQ(EncodeFp8(kNaN, f, saturate), CanonicalNaN(f, false));
    EXPECT_EQ(EncodeFp8(-kNaN, f, saturate), CanonicalNaN(f, true));
    EXPECT_EQ(EncodeFp8(FromBits(0x7F800001u), f, saturate), CanonicalNaN(f, false));  // sNaN
    EXPECT_EQ(EncodeFp8(0.0f, f, saturate), 0x00);
    EXPECT_EQ(EncodeFp8(-0.0f, f, saturate), 0x80);
    EXPECT_EQ(EncodeFp8(-1e-30f, f, saturate), 0x80);
    EXPECT_EQ(EncodeFp8(std::numeric_limits<float>::denorm_min(), f, saturate), 0x00);
  }
  EXPECT_TRUE(std::signbit(DecodeFp8(0x80, f)));
  EXPECT_EQ(DecodeFp8(0x80, f), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8CodecTest, ::testing::Values(Fp8Format::kE4M3, Fp8Format::kE5M2),
                         [](const ::testing::TestParamInfo<Fp8Format>& info) {
                           return std::string(Fp8FormatName(info.param));
                         });

// Literal values from the spec, so a wrong table cannot agree with itself.
TEST(Fp8E4M3, Boundaries) {
  const Fp8Format f = Fp8Format::kE4M3;
  EXPECT_EQ(Fp8MaxFinite(f), 448.0f);
  EXPECT_EQ(Fp8MinNormal(f), std::ldexp(1.0f, -6));
  EXPECT_EQ(EncodeFp8(448.0f, f), 0x7E);
  EXPECT_EQ(EncodeFp8(std::ldexp(1.0f, -6), f), 0x08);   // min normal
  EXPECT_EQ(EncodeFp8(std::ldexp(1.0f, -9), f), 0x01);   // min subnormal
  EXPECT_EQ(EncodeFp8(std::ldexp(1.0f, -10), f), 0x00);  // half of it: tie to even 0
  EXPECT_EQ(EncodeFp8(std::nextafter(std::ldexp(1.0f, -10), 1.0f), f), 0x01);
  EXPECT_EQ(EncodeFp8(std::ldexp(1.5f, -9), f), 0x02);     // tie 1 / 2 -> 2
  EXPECT_EQ(EncodeFp8(std::ldexp(2.5f, -9), f), 0x02);     // tie 2 / 3 -> 2
  EXPECT_EQ(EncodeFp8(std::ldexp(7.5f, -9), f), 0x08);     // tie largest subnormal / min normal
  EXPECT_EQ(EncodeFp8(std::ldexp(1.9375f, -6), f), 0x10);  // tie across binades -> 2^-5
  EXPECT_EQ(EncodeFp8(1.0f, f), 0x38);
  EXPECT_EQ(EncodeFp8(1.0625f, f), 0x38);  // tie 1 / 1.125 -> 1
  EXPECT_EQ(EncodeFp8(1.1875f, f), 0x3A);  // tie 1.125 / 1.25 -> 1.25
  EXPECT_EQ(EncodeFp8(-2.0f, f), 0xC0);
  EXPECT_EQ(DecodeFp8(0x7E, f), 448.0f);
  EXPECT_EQ(DecodeFp8(0x01, f), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(DecodeFp8(0x7F, f)));
  EXPECT_TRUE(std::isnan(DecodeFp8(0xFF, f)));
  EXPECT_EQ(DecodeFp8(0x78, f), 256.0f);  // S.1111.000 is finite in e4m3
}

TEST(Fp8E4M3, SaturationAndOverflow) {
  const Fp8Format f = Fp8Format::kE4M3;
  const float above_tie = std::nextafter(464.0f, kInf);
  for (float v : {449.0f, 464.0f, above_tie, 480.0f, 1e30f, kInf}) {
    EXPECT_EQ(EncodeFp8(v, f, true), 0x7E) << v;
    EXPECT_EQ(EncodeFp8(-v, f, true), 0xFE) << v;
  }
  EXPECT_EQ(EncodeFp8(449.0f, f, false), 0x7E);
  EXPECT_EQ(EncodeFp8(464.0f, f, false), 0x7E);  // tie 448 / 480: 448's mantissa is even
  EXPECT_EQ(EncodeFp8(above_tie, f, false), 0x7F);
  EXPECT_EQ(EncodeFp8(-above_tie, f, false), 0xFF);
  EXPECT_EQ(EncodeFp8(kInf, f, false), 0x7F);
  EXPECT_EQ(EncodeFp8(-kInf, f, false), 0xFF);
}

TEST(Fp8E5M2, Boundaries) {
  const Fp8Format f = Fp8Format::kE5M2;
  EXPECT_EQ(Fp8MaxFinite(f), 57344.0f);
  EXPECT_EQ(Fp8MinNormal(f), std::ldexp(1.0f, -14));
  EXPECT_EQ(EncodeFp8(57344.0f, f), 0x7B);
  EXPECT_EQ(EncodeFp8(std::ldexp(1.0f, -14), f), 0x04);  // min normal
  EXPECT_EQ(EncodeFp8(std::ldexp(1.0f, -16), f), 0x01);  // min subnormal
  EXPECT_EQ(EncodeFp8(std::ldexp(1.0f, -17), f), 0x00);
  EXPECT_EQ(EncodeFp8(std::nextafter(std::ldexp(1.0f, -17), 1.0f), f), 0x01);
  EXPECT_EQ(EncodeFp8(std::ldexp(3.5f, -16), f), 0x04);  // tie 3 / min normal -> 4
  EXPECT_EQ(EncodeFp8(1.0f, f), 0x3C);
  EXPECT_EQ(EncodeFp8(1.125f, f), 0x3C);  // tie 1 / 1.25 -> 1
  EXPECT_EQ(EncodeFp8(1.375f, f), 0x3E);  // tie 1.25 / 1.5 -> 1.5
  EXPECT_EQ(EncodeFp8(1.875f, f), 0x40);  // tie 1.75 / 2 -> 2
  EXPECT_EQ(DecodeFp8(0x7C, f), kInf);
  EXPECT_EQ(DecodeFp8(0xFC, f), -kInf);
  for (uint8_t c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) {
    EXPECT_TRUE(std::isnan(DecodeFp8(c, f))) << int{c};
  }
}

TEST(Fp8E5M2, SaturationAndOverflow) {
  const Fp8Format f = Fp8Format::kE5M2;
  const float below_tie = std::nextafter(61440.0f, 0.0f);
  for (float v : {57345.0f, below_tie, 61440.0f, 65536.0f, 1e30f, kInf}) {
    EXPECT_EQ(EncodeFp8(v, f, true), 0x7B) << v;
    EXPECT_EQ(EncodeFp8(-v, f, true), 0xFB) << v;
  }
  EXPECT_EQ(EncodeFp8(below_tie, f, false), 0x7B);
  EXPECT_EQ(EncodeFp8(61440.0f, f, false), 0x7C);  // tie 57344 / 65536: 57344's is odd
  EXPECT_EQ(EncodeFp8(-61440.0f, f, false), 0xFC);
  EXPECT_EQ(EncodeFp8(kInf, f, false), 0x7C);
  EXPECT_EQ(EncodeFp8(-kInf, f, false), 0xFC);
}

TEST(Fp8Format, NamesParseAndNativeDtype) {
  EXPECT_EQ(Fp8FormatName(Fp8Format::kE4M3), "e4m3");
  EXPECT_EQ(Fp8FormatName(Fp8Format::kE5M2), "e5m2");
  EXPECT_EQ(ParseFp8Format("e4m3"), Fp8Format::kE4M3);
  EXPECT_EQ(ParseFp8Format("e4m3fn"), Fp8Format::kE4M3);
  EXPECT_EQ(ParseFp8Format("e5m2"), Fp8Format::kE5M2);
  EXPECT_EQ(ParseFp8Format("E4M3"), std::nullopt);
  EXPECT_EQ(ParseFp8Format("fp8"), std::nullopt);
  EXPECT_EQ(ParseFp8Format(""), std::nullopt);
#if FRAMEGATE_TORCH_AT_LEAST(2, 1)  // kHasNativeFloat8
  EXPECT_EQ(NativeFp8Dtype(Fp8Format::kE4M3), at::ScalarType::Float8_e4m3fn);
  EXPECT_EQ(NativeFp8Dtype(Fp8Format::kE5M2), at::ScalarType::Float8_e5m2);
#else
  EXPECT_EQ(NativeFp8Dtype(Fp8Format::kE4M3), std::nullopt);
  EXPECT_EQ(NativeFp8Dtype(Fp8Format::kE5M2), std::nullopt);
#endif
}

// (3, 4, 5) float32 weights spanning both formats' ranges, with specials.
at::Tensor SampleWeights() {
  std::vector<float> v(60);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::ldexp(static_cast<float>(i % 7) - 3.3f, static_cast<int>(i) % 40 - 20);
  }
  v[5] = 1000.0f;  // beyond e4m3 max: saturates
  v[6] = -1e6f;    // beyond e5m2 max: saturates
  v[7] = -0.0f;
  v[8] = kNaN;
  v[9] = -kInf;
  return at::from_blob(v.data(), {3, 4, 5}, at::kFloat).clone();
}

void ExpectCodesMatchScalar(const at::Tensor& codes, const at::Tensor& values, Fp8Format f) {
  const at::Tensor flat = values.to(at::kFloat).contiguous().reshape({-1});
  ASSERT_EQ(codes.numel(), flat.numel());
  const uint8_t* c = codes.data_ptr<uint8_t>();
  const float* x = flat.data_ptr<float>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    EXPECT_EQ(c[i], EncodeFp8(x[i], f)) << "element " << i << " = " << x[i];
  }
}

TEST_P(Fp8CodecTest, TensorEncodeMatchesScalarApi) {
  const Fp8Format f = GetParam();
  const at::Tensor w = SampleWeights();  // (3, 4, 5) float32
  const at::Tensor codes = EncodeFp8Tensor(w, f);
  EXPECT_EQ(codes.sizes(), w.sizes());
  EXPECT_EQ(codes.scalar_type(), at::kByte);
  EXPECT_TRUE(codes.is_contiguous());
  EXPECT_TRUE(codes.device().is_cpu());
  ExpectCodesMatchScalar(codes, w, f);
  EXPECT_EQ(codes.numel() * codes.element_size() * 4, w.numel() * w.element_size());
  // 1000 saturates to 448 in e4m3 and rounds to 1024 in e5m2; -1e6 saturates in both.
  EXPECT_EQ(codes.data_ptr<uint8_t>()[5], f == Fp8Format::kE4M3 ? 0x7E : 0x64);
  EXPECT_EQ(codes.data_ptr<uint8_t>()[6], f == Fp8Format::kE4M3 ? 0xFE : 0xFB);

  const at::Tensor wt = w.transpose(0, 2);  // (5, 4, 3), not contiguous
  const at::Tensor codes_t = EncodeFp8Tensor(wt, f);
  EXPECT_EQ(codes_t.sizes(), wt.sizes());
  EXPECT_TRUE(codes_t.is_contiguous());
  ExpectCodesMatchScalar(codes_t, wt, f);

  const at::Tensor w_bf16 = w.to(at::kBFloat16);  // widens exactly to float32
  ExpectCodesMatchScalar(EncodeFp8Tensor(w_bf16, f), w_bf16, f);
}

TEST_P(Fp8CodecTest, TensorDecodeMatchesTable) {
  const Fp8Format f = GetParam();
  const std::array<float, 256>& table = Fp8DecodeTable(f);
  const at::Tensor all = at::arange(256, at::kInt).to(at::kByte).reshape({4, 8, 8});
  const at::Tensor sample = EncodeFp8Tensor(SampleWeights(), f);  // (3, 4, 5)
  for (const at::Tensor& codes : {all, sample}) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
      const at::Tensor out = DecodeFp8Tensor(codes, f, dtype, at::kCPU);
      ASSERT_EQ(out.scalar_type(), dtype);
      ASSERT_EQ(out.sizes(), codes.sizes());
      ASSERT_TRUE(out.is_contiguous());
      // Exact: every FP8 value survives dtype -> float32 unchanged.
      const at::Tensor back = out.to(at::kFloat).contiguous();
      const uint8_t* c = codes.data_ptr<uint8_t>();
      const float* v = back.data_ptr<float>();
      for (int64_t i = 0; i < codes.numel(); ++i) {
        if (std::isnan(table[c[i]])) {
          EXPECT_TRUE(std::isnan(v[i])) << "code " << int{c[i]} << " dtype " << dtype;
        } else {
          EXPECT_EQ(Bits(v[i]), Bits(table[c[i]])) << "code " << int{c[i]} << " dtype " << dtype;
        }
      }
    }
  }
  // Shapes at the edges: empty and 0-dim.
  const at::Tensor empty = at::empty({0, 3}, at::kByte);
  EXPECT_EQ(DecodeFp8Tensor(empty, f, at::kFloat, at::kCPU).sizes(), empty.sizes());
  const at::Tensor scalar = EncodeFp8Tensor(at::scalar_tensor(1.0, at::kFloat), f);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(DecodeFp8Tensor(scalar, f, at::kFloat, at::kCPU).item<float>(), 1.0f);
}

// LibTorch 2.1 on: its float8 dtypes agree with the codec bit for bit, decoding every
// one of the 256 codes, and encoding every value between the formats' extremes (each
// representable value, each midpoint between neighbours: the ties, and just off them).
TEST_P(Fp8CodecTest, AgreesWithLibTorchsOwnFloat8BitForBit) {
  const Fp8Format f = GetParam();
  const std::optional<at::ScalarType> native = NativeFp8Dtype(f);
  if (!native) GTEST_SKIP() << "this LibTorch has no float8 dtype";
  const std::array<float, 256>& table = Fp8DecodeTable(f);
  const at::Tensor codes = at::arange(256, at::kInt).to(at::kByte);
  const at::Tensor decoded = codes.view(*native).to(at::kFloat).contiguous();
  std::vector<float> finite;
  for (int c = 0; c < 256; ++c) {
    const float theirs = decoded.data_ptr<float>()[c];
    if (std::isnan(table[c])) {
      EXPECT_TRUE(std::isnan(theirs)) << "code " << c;
    } else {
      EXPECT_EQ(Bits(theirs), Bits(table[c])) << "code " << c;
      if (std::isfinite(table[c])) finite.push_back(table[c]);
    }
  }
  std::sort(finite.begin(), finite.end());
  std::vector<float> values = finite;
  for (size_t i = 0; i + 1 < finite.size(); ++i) {
    const float mid = (finite[i] + finite[i + 1]) / 2;  // exact: FP8 values have few bits
    values.insert(values.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
  }
  const at::Tensor v = at::tensor(values);
  const at::Tensor ours = EncodeFp8Tensor(v, f, /*saturate=*/false);
  const at::Tensor theirs = v.to(*native).view(at::kByte);
  for (int64_t i = 0; i < v.numel(); ++i) {
    EXPECT_EQ(int{ours.data_ptr<uint8_t>()[i]}, int{theirs.data_ptr<uint8_t>()[i]}) << "value " << values[i];
  }
}

TEST(Fp8Tensor, Float64IsRoundedOnceNotTwice) {
  const Fp8Format f = Fp8Format::kE4M3;
  // Just above the 1 / 1.125 tie: float32 rounds it onto the tie, which then goes to 1.
  const double above = 1.0625 + std::ldexp(1.0, -40);
  const double below = 1.0625 - std::ldexp(1.0, -40);
  ASSERT_EQ(EncodeFp8(static_cast<float>(above), f), 0x38);  // the double-rounding trap
  const at::Tensor values =
      at::tensor(std::vector<double>{above, below, -above, 1e300, -1e300, 1e-300}, at::kDouble);
  const at::Tensor sat = EncodeFp8Tensor(values, f, true);
  const at::Tensor nonsat = EncodeFp8Tensor(values, f, false);
  const std::vector<uint8_t> want_sat{0x39, 0x38, 0xB9, 0x7E, 0xFE, 0x00};
  const std::vector<uint8_t> want_nonsat{0x39, 0x38, 0xB9, 0x7F, 0xFF, 0x00};
  for (size_t i = 0; i < want_sat.size(); ++i) {
    EXPECT_EQ(sat.data_ptr<uint8_t>()[i], want_sat[i]) << "element " << i;
    EXPECT_EQ(nonsat.data_ptr<uint8_t>()[i], want_nonsat[i]) << "element " << i;
  }
}

TEST(Fp8Tensor, RejectsWrongDtypes) {
  EXPECT_THROW(EncodeFp8Tensor(at::ones({2}, at::kInt), Fp8Format::kE4M3), c10::Error);
  EXPECT_THROW(EncodeFp8Tensor(at::Tensor(), Fp8Format::kE4M3), c10::Error);
  EXPECT_THROW(DecodeFp8Tensor(at::ones({2}, at::kFloat), Fp8Format::kE4M3, at::kFloat, at::kCPU),
               c10::Error);
  EXPECT_THROW(DecodeFp8Tensor(at::ones({2}, at::kByte), Fp8Format::kE4M3, at::kInt, at::kCPU), c10::Error);
}

// F5: FP8 codes used in arithmetic without the upcast raise the promotion error; from
// LibTorch 2.1 on it is LibTorch's own (no weight named), before it is framegate's.
TEST(Fp8CodecTest, UseWithoutUpcastRaisesThePromotionError) {
  const at::Tensor codes = EncodeFp8Tensor(at::ones({2, 3}), Fp8Format::kE4M3);
  for (const auto& [format, name] :
       {std::pair{Fp8Format::kE4M3, "Float8_e4m3fn"}, std::pair{Fp8Format::kE5M2, "Float8_e5m2"}}) {
    for (const auto& [compute, compute_name] :
         {std::pair{at::kFloat, "Float"}, std::pair{at::kBFloat16, "BFloat16"}}) {
      std::string what;
      try {
        UseFp8WithoutUpcast(codes, format, compute, "blocks.0.attn.qkv.weight");
      } catch (const c10::Error& e) {
        what = e.what_without_backtrace();
      }
      const std::string expected =
          std::string("Promotion for Float8 Types is not supported, attempted to promote ") + name + " and " +
          compute_name;
      EXPECT_EQ(what.rfind(expected, 0), 0u) << what;
      EXPECT_EQ(what.find("(weight blocks.0.attn.qkv.weight)") != std::string::npos, !kHasNativeFloat8)
          << what;
    }
  }
}

}  // namespace
}  // namespace framegate
