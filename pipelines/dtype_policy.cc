#include "pipelines/dtype_policy.h"

namespace framegate {

const char* ModuleKindName(ModuleKind kind) {
  switch (kind) {
    case ModuleKind::kNorm: return "norm";
    case ModuleKind::kSoftmax: return "softmax";
    case ModuleKind::kTimeEmbed: return "time_embed";
    case ModuleKind::kDecoder: return "decoder";
    case ModuleKind::kAttentionLogits: return "attention_logits";
    case ModuleKind::kOther: return "other";
  }
  return "other";
}

const char* WeightStorageName(WeightStorage storage) {
  switch (storage) {
    case WeightStorage::kFloat32: return "fp32";
    case WeightStorage::kBFloat16: return "bf16";
    case WeightStorage::kFloat16: return "fp16";
    case WeightStorage::kFp8E4M3: return "fp8e4m3";
    case WeightStorage::kFp8E5M2: return "fp8e5m2";
  }
  return "fp32";
}

int64_t WeightStorageBytes(WeightStorage storage) {
  switch (storage) {
    case WeightStorage::kFloat32: return 4;
    case WeightStorage::kBFloat16:
    case WeightStorage::kFloat16: return 2;
    case WeightStorage::kFp8E4M3:
    case WeightStorage::kFp8E5M2: return 1;
  }
  return 4;
}

DtypePolicy Fp32Policy() { return DtypePolicy(); }

DtypePolicy DecoderPolicyOf(const DtypePolicy& policy) {
  if (!policy.IsIsland(ModuleKind::kDecoder)) return policy;
  DtypePolicy fp32 = Fp32Policy();
  fp32.name = policy.name + "/decoder-fp32";
  return fp32;
}

bool IsDecoderWeight(const std::string& name) { return name.rfind("decoder.", 0) == 0; }

}  // namespace framegate
