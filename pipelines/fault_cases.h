// Fault cases: variants of the reference model that reproduce the field-reported failures
// (shared/context/failure-cases.md) on purpose, so that tests prove framegate catches them.
//   F1 time-embed-fp32     the timestep MLP left in FP32 while the policy casts the rest
//                          (mat1 and mat2 must have the same dtype under bf16)
//   F2 attn-overflow       attention logits beyond FP16's range in block 0's spatial
//                          attention (NaN/Inf then black frames under fp16-emulated)
//   F2 attn-fp16-accum     block 0's spatial attention scores QK^T whose partial sums pass
//                          65504 while the scores stay 0: fine with FP32 accumulation,
//                          NaN with FP16 accumulation at the same dtypes (as the field
//                          saw it: A100/A30 vs V100, half-precision accumulation)
//   F3 activation-overflow an unnormalised input projection whose output grows with the
//                          latents over the denoising steps past 65504 (Inf under fp16)
//   F4 input-fp32          the input cast to FP32 before the (bf16) Conv3d input projection
//   F5 fp8-no-upcast       FP8-stored weights used without the upcast (promotion error)
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace framegate {

enum class FaultCase {
  kNone,
  kTimeEmbedFp32,
  kAttnOverflow,
  kAttnFp16Accumulation,
  kActivationOverflow,
  kInputFp32,
  kFp8NoUpcast
};

struct FaultCaseInfo {
  FaultCase fault;
  const char* name;          // "time-embed-fp32"
  const char* field_report;  // "F1"
  const char* summary;
};

const std::vector<FaultCaseInfo>& FaultCases();                    // every fault except kNone
const char* FaultCaseName(FaultCase fault);                        // "" for kNone
std::optional<FaultCase> ParseFaultCase(const std::string& name);  // "" / "none" -> kNone

}  // namespace framegate
