// WeightStore: the named weights of a reference model. Created once on the CPU in FP32
// from a seed (so every device gets the same numbers), then placed on a device in the
// storage form a DtypePolicy asks for. Not thread-safe; one per pipeline instance.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "harness/status.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/fp8_codec.h"

namespace framegate {

// The FP8 format of a weight storage; nullopt for the others.
std::optional<Fp8Format> Fp8FormatOf(WeightStorage storage);

struct WeightEntry {
  std::string name;   // "blocks.0.spatial_attn.q.weight"
  ModuleKind kind;    // the kind of module that owns it (islands keep it in FP32)
  at::Tensor master;  // FP32, CPU
  at::Tensor stored;  // on the device, in the policy's storage form (after Place)
  WeightStorage storage = WeightStorage::kFloat32;
  // Rounded through FP16 by Place under FP16 emulation: it stands for an FP16 weight.
  bool emulated_fp16 = false;
  // The FP8 format of `stored` codes (uint8) when storage is kFp8E4M3/kFp8E5M2.
  std::optional<Fp8Format> fp8() const;
};

class WeightStore {
 public:
  // Adds a weight drawn from N(0, std^2) with the stream of its name (std == 0: filled
  // with `fill`). Names must be unique (asserted).
  void AddNormal(const std::string& name, ModuleKind kind, std::vector<int64_t> shape, double std,
                 uint64_t seed);
  void AddConstant(const std::string& name, ModuleKind kind, std::vector<int64_t> shape, double fill);

  // Casts every master into its stored form on `device`. Islands stay FP32 (decoder
  // weights follow DecoderPolicyOf(policy)); with emulate_fp16 FP32 values are rounded
  // through FP16.
  Status Place(const DtypePolicy& policy, c10::Device device);

  // The stored tensor (after Place). Asserts that `name` exists.
  const WeightEntry& Get(const std::string& name) const;
  const WeightEntry* Find(const std::string& name) const;  // nullptr when absent
  // Multiplies a master (before Place): fault cases that amplify a layer.
  void ScaleMaster(const std::string& name, double factor);
  // Replaces a master (before Place) with `value` of the same shape (asserted).
  void SetMaster(const std::string& name, const at::Tensor& value);
  const std::vector<WeightEntry>& entries() const { return entries_; }
  // Overrides one stored tensor (fault cases: a weight left in the wrong dtype).
  void OverrideStored(const std::string& name, at::Tensor stored);

  int64_t NumParameters() const;
  int64_t StoredBytes() const;  // bytes the stored tensors take on the device

 private:
  WeightEntry& Mutable(const std::string& name);
  std::vector<WeightEntry> entries_;
  std::map<std::string, size_t> index_;
};

}  // namespace framegate
