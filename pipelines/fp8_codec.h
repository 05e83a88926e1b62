// FP8 weight codec (OCP 8-bit floating point, "OFP8", v1.0). LibTorch 1.13 has no float8
// dtype, so framegate stores FP8 weights itself as uint8 codes and decodes them through a
// 256-entry table when a layer uses them (from 2.1 on through LibTorch's float8 dtypes).
//
//   format | bias | max finite | min normal | min subnormal | specials
//   e4m3   |   7  |    448     |   2^-6     |    2^-9       | NaN = S.1111.111, no inf
//   e5m2   |  15  |   57344    |   2^-14    |    2^-16      | inf = S.11111.00,
//          |      |            |            |               | NaN = S.11111.{01,10,11}
//
// Encoding rounds to nearest, ties to even, with IEEE overflow semantics: a value
// overflows when it rounds (with unbounded exponent) above max finite. So e4m3 464 (the tie
// between 448 and 480) gives 448 and anything above 464 overflows; e5m2 overflows from
// 61440 (tie between 57344 and 65536) up.
//   saturate=true  (default, weight storage): overflow and +-inf -> +-max finite.
//   saturate=false: overflow and +-inf -> e4m3 NaN (S.1111.111), e5m2 +-inf.
// NaN input -> the canonical NaN with the input's sign: e4m3 0x7F/0xFF, e5m2 0x7E/0xFE
// (the quiet NaN, as float16's 0x7E00). -0.0 and negative values that round to zero
// -> 0x80.
//
// Decoding is exact: every FP8 value is exactly representable in float32, float16 and
// bfloat16. All functions are thread-safe (the tables are built once, on first use).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace framegate {

enum class Fp8Format { kE4M3, kE5M2 };

// "e4m3" or "e5m2".
std::string_view Fp8FormatName(Fp8Format format);
// Accepts "e4m3", "e4m3fn" and "e5m2"; nullopt for anything else.
std::optional<Fp8Format> ParseFp8Format(std::string_view name);

// Largest finite value: 448 (e4m3), 57344 (e5m2).
float Fp8MaxFinite(Fp8Format format);
// Smallest normal value: 2^-6 (e4m3), 2^-14 (e5m2); below it fewer mantissa bits, then 0.
float Fp8MinNormal(Fp8Format format);

// float32 -> code, see the rounding and overflow rules above.
uint8_t EncodeFp8(float value, Fp8Format format, bool saturate = true);
// code -> value, exact (NaN codes decode to a NaN carrying the code's sign).
float DecodeFp8(uint8_t code, Fp8Format format);
// The table DecodeFp8 reads: table[code] == DecodeFp8(code). Static storage, never freed.
const std::array<float, 256>& Fp8DecodeTable(Fp8Format format);

// Span forms of the above: `values`/`codes` hold `count` elements; `out` must not overlap
// the input.
void EncodeFp8Array(const float* values, size_t count, Fp8Format format, uint8_t* out, bool saturate = true);
void DecodeFp8Array(const uint8_t* codes, size_t count, Fp8Format format, float* out);

// Tensor forms. Preconditions are checked with TORCH_CHECK: a violation throws c10::Error,
// which the pipeline boundary classifies like any other LibTorch error.
//
// values: any shape, any floating dtype, any device (copied to the CPU; float16 and
// bfloat16 widen exactly; float64 is narrowed with round-to-odd so that it does not round
// twice). Returns uint8 codes, same shape, contiguous, on the CPU.
at::Tensor EncodeFp8Tensor(const at::Tensor& values, Fp8Format format, bool saturate = true);
// codes: uint8, any shape, any device. Returns the decoded values as `out_dtype` (a
// floating dtype) on `device`, same shape, contiguous: LibTorch's own float8 conversion
// where it has the dtype (2.1 on; cross-checked bit for bit against the table over all 256
// codes), else a gather from the decode table done on `device`; only the 1-byte codes
// travel.
at::Tensor DecodeFp8Tensor(const at::Tensor& codes, Fp8Format format, at::ScalarType out_dtype,
                           at::Device device);
// The decode table as a [256] tensor of `dtype` on `device`, for callers that cache it.
at::Tensor Fp8DecodeTableTensor(Fp8Format format, at::ScalarType dtype, at::Device device);

// LibTorch's own float8 dtype for the format (Float8_e4m3fn / Float8_e5m2, LibTorch >= 2.1;
// the codes here are bit-compatible with it: codes.view(dtype)), or nullopt where LibTorch
// has none (1.13 here).
std::optional<at::ScalarType> NativeFp8Dtype(Fp8Format format);

// Uses FP8 `codes` in `compute` arithmetic without the upcast, as a model that forgot it
// does (fault F5), and so always throws c10::Error. Where LibTorch has float8 dtypes the
// codes are viewed as one and added to a `compute` tensor: LibTorch raises its own
// "Promotion for Float8 Types is not supported, attempted to promote Float8_e4m3fn and
// BFloat16". Before (1.13) framegate raises that text itself, naming `weight`.
[[noreturn]] void UseFp8WithoutUpcast(const at::Tensor& codes, Fp8Format format, at::ScalarType compute,
                                      const std::string& weight);

}  // namespace framegate
