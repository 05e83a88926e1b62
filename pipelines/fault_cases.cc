#include "pipelines/fault_cases.h"

namespace framegate {

const std::vector<FaultCaseInfo>& FaultCases() {
  static const std::vector<FaultCaseInfo> cases = {
      {FaultCase::kTimeEmbedFp32, "time-embed-fp32", "F1",
       "timestep-embedding MLP left in FP32 while the rest is cast"},
      {FaultCase::kAttnOverflow, "attn-overflow", "F2", "attention logits beyond the FP16 range"},
      {FaultCase::kAttnFp16Accumulation, "attn-fp16-accum", "F2",
       "attention score partial sums beyond FP16: NaN with FP16 accumulation only"},
      {FaultCase::kActivationOverflow, "activation-overflow", "F3",
       "activations grow past 65504 over the denoising steps"},
      {FaultCase::kInputFp32, "input-fp32", "F4", "input cast to FP32 before a low-precision Conv3d"},
      {FaultCase::kFp8NoUpcast, "fp8-no-upcast", "F5", "FP8-stored weights used without upcast"},
  };
  return cases;
}

const char* FaultCaseName(FaultCase fault) {
  for (const FaultCaseInfo& info : FaultCases()) {
    if (info.fault == fault) return info.name;
  }
  return "";
}

std::optional<FaultCase> ParseFaultCase(const std::string& name) {
  if (name.empty() || name == "none") return FaultCase::kNone;
  for (const FaultCaseInfo& info : FaultCases()) {
    if (name == info.name) return info.fault;
  }
  return std::nullopt;
}

}  // namespace framegate
