#include "pipelines/weight_store.h"

#include <cassert>

#include <ATen/Functions.h>

#include "pipelines/seeded_noise.h"

namespace framegate {

void WeightStore::AddNormal(const std::string& name, ModuleKind kind, std::vector<int64_t> shape, double std,
                            uint64_t seed) {
  assert(index_.count(name) == 0);
  at::Tensor master = SeededNormal(seed, StreamOf(name), shape).mul_(std);
  index_[name] = entries_.size();
  entries_.push_back({name, kind, master, master, WeightStorage::kFloat32});
}

void WeightStore::AddConstant(const std::string& name, ModuleKind kind, std::vector<int64_t> shape,
                              double fill) {
  assert(index_.count(name) == 0);
  at::Tensor master = at::full(shape, fill, at::kFloat);
  index_[name] = entries_.size();
  entries_.push_back({name, kind, master, master, WeightStorage::kFloat32});
}

Status WeightStore::Place(const DtypePolicy& model_policy, c10::Device device) {
  const DtypePolicy decoder_policy = DecoderPolicyOf(model_policy);
  for (WeightEntry& entry : entries_) {
    const DtypePolicy& policy = IsDecoderWeight(entry.name) ? decoder_policy : model_policy;
    const bool island = policy.IsIsland(entry.kind, ModuleOfWeight(entry.name));
    WeightStorage storage = island ? WeightStorage::kFloat32 : policy.storage;
    // The reference model's weights of 2 or more dimensions are its Linear and Conv weights.
    if (!island && Fp8FormatOf(storage) && !policy.StoresInFp8(entry.master.dim() >= 2)) {
      // A bias or a norm's weight under fp8_weights = "linear-conv": the compute dtype.
      storage = policy.compute == c10::kBFloat16 ? WeightStorage::kBFloat16
                : policy.compute == c10::kHalf   ? WeightStorage::kFloat16
                                                 : WeightStorage::kFloat32;
    }
    at::Tensor t = entry.master;
    switch (storage) {
      case WeightStorage::kFloat32:
        if (policy.emulate_fp16 && !island) t = t.to(at::kHalf).to(at::kFloat);
        entry.emulated_fp16 = policy.emulate_fp16 && !island;
        break;
      case WeightStorage::kFloat64:
        t = t.to(at::kDouble);
        break;
      case WeightStorage::kBFloat16:
        t = t.to(at::kBFloat16);
        break;
      case WeightStorage::kFloat16:
        t = t.to(at::kHalf);
        break;
      case WeightStorage::kFp8E4M3:
        t = EncodeFp8Tensor(t, Fp8Format::kE4M3);
        break;
      case WeightStorage::kFp8E5M2:
        t = EncodeFp8Tensor(t, Fp8Format::kE5M2);
        break;
    }
    entry.stored = t.to(device);
    entry.storage = storage;
  }
  return Status::Ok();
}

const WeightEntry& WeightStore::Get(const std::string& name) const {
  auto it = index_.find(name);
  assert(it != index_.end() && "unknown weight");
  return entries_[it->second];
}

const WeightEntry* WeightStore::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void WeightStore::ScaleMaster(const std::string& name, double factor) {
  WeightEntry& entry = Mutable(name);
  entry.master = entry.master * factor;
  entry.stored = entry.master;
}

void WeightStore::SetMaster(const std::string& name, const at::Tensor& value) {
  WeightEntry& entry = Mutable(name);
  assert(value.sizes() == entry.master.sizes());
  entry.master = value.to(at::kFloat).contiguous();
  entry.stored = entry.master;
}

std::optional<Fp8Format> Fp8FormatOf(WeightStorage storage) {
  if (storage == WeightStorage::kFp8E4M3) return Fp8Format::kE4M3;
  if (storage == WeightStorage::kFp8E5M2) return Fp8Format::kE5M2;
  return std::nullopt;
}

std::optional<Fp8Format> WeightEntry::fp8() const { return Fp8FormatOf(storage); }

WeightEntry& WeightStore::Mutable(const std::string& name) { return entries_[index_.at(name)]; }

void WeightStore::OverrideStored(const std::string& name, at::Tensor stored) {
  WeightEntry& entry = Mutable(name);
  entry.stored = std::move(stored);
  entry.emulated_fp16 = false;  // the override's own dtype holds
}

int64_t WeightStore::NumParameters() const {
  int64_t n = 0;
  for (const WeightEntry& e : entries_) n += e.master.numel();
  return n;
}

int64_t WeightStore::StoredBytes() const {
  int64_t n = 0;
  for (const WeightEntry& e : entries_) n += e.stored.numel() * e.stored.element_size();
  return n;
}

}  // namespace framegate
