#include "pipelines/dtype_policy.h"

#include <toml++/toml.h>

#include "harness/toml_source.h"
#include "pipelines/policies_toml.h"

namespace framegate {
namespace {

const std::map<std::string, WeightStorage>& StorageNames() {
  static const std::map<std::string, WeightStorage> names = {
      {"fp32", WeightStorage::kFloat32}, {"bf16", WeightStorage::kBFloat16},
      {"fp16", WeightStorage::kFloat16}, {"fp8e4m3", WeightStorage::kFp8E4M3},
      {"fp8e5m2", WeightStorage::kFp8E5M2}, {"fp64", WeightStorage::kFloat64}};
  return names;
}

const std::map<std::string, c10::ScalarType>& ComputeNames() {
  static const std::map<std::string, c10::ScalarType> names = {
      {"fp32", c10::kFloat}, {"bf16", c10::kBFloat16}, {"fp16", c10::kHalf},
      {"fp64", c10::kDouble}};
  return names;
}

const std::map<std::string, ModuleKind>& IslandNames() {
  static const std::map<std::string, ModuleKind> names = {
      {"norm", ModuleKind::kNorm}, {"softmax", ModuleKind::kSoftmax},
      {"time_embed", ModuleKind::kTimeEmbed}, {"decoder", ModuleKind::kDecoder}};
  return names;
}

template <typename T>
std::string KeysOf(const std::map<std::string, T>& map) {
  std::string keys;
  for (const auto& [k, v] : map) keys += (keys.empty() ? "" : ", ") + k;
  return keys;
}

std::string Where(const std::string& source, const toml::node& node) {
  return TomlPlace(source, node.source());
}

// One [policy.NAME] table -> DtypePolicy.
StatusOr<DtypePolicy> ParsePolicy(const std::string& name, const toml::table& t,
                                  const std::string& source) {
  DtypePolicy p;
  p.name = name;
  for (const auto& entry : t) {  // no structured binding: clang cannot capture one (C++17)
    const toml::node& node = entry.second;
    const std::string k(entry.first.str());
    const std::string at = Where(source, node) + ": policy '" + name + "': ";
    auto string_in = [&](const auto& names, auto* out) -> Status {
      const auto value = node.template value<std::string>();
      if (!value || !names.count(*value))
        return Status::InvalidInput(at + k + " must be one of " + KeysOf(names));
      *out = names.at(*value);
      return Status::Ok();
    };
    auto boolean = [&](bool* out) -> Status {
      if (!node.is_boolean()) return Status::InvalidInput(at + k + " must be true or false");
      *out = *node.template value<bool>();
      return Status::Ok();
    };
    if (k == "storage") {
      FG_RETURN_IF_ERROR(string_in(StorageNames(), &p.storage));
    } else if (k == "compute") {
      FG_RETURN_IF_ERROR(string_in(ComputeNames(), &p.compute));
    } else if (k == "emulate_fp16") {
      FG_RETURN_IF_ERROR(boolean(&p.emulate_fp16));
    } else if (k == "allow_tf32") {
      FG_RETURN_IF_ERROR(boolean(&p.allow_tf32));
    } else if (k == "fp16_reduced_precision_reduction") {
      FG_RETURN_IF_ERROR(boolean(&p.fp16_reduced_precision_reduction));
    } else if (k == "fallback") {
      const auto value = node.value<std::string>();
      if (!value) return Status::InvalidInput(at + "fallback must be a policy name");
      p.fallback = *value;
    } else if (k == "fp32_islands") {
      const toml::array* islands = node.as_array();
      if (!islands) return Status::InvalidInput(at + "fp32_islands must be an array of names");
      for (const toml::node& island : *islands) {
        const auto value = island.value<std::string>();
        if (!value || !IslandNames().count(*value))
          return Status::InvalidInput(Where(source, island) + ": policy '" + name +
                                      "': fp32_islands entries must be among " +
                                      KeysOf(IslandNames()));
        p.fp32_islands.insert(IslandNames().at(*value));
      }
    } else {
      return Status::InvalidInput(at + "unknown key '" + k + "'");
    }
  }
  if (p.emulate_fp16 && p.compute != c10::kFloat)
    return Status::InvalidInput(Where(source, t) + ": policy '" + name +
                                "': emulate_fp16 needs compute = \"fp32\"");
  return p;
}

}  // namespace

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
  for (const auto& [name, value] : StorageNames()) {
    if (value == storage) return name.c_str();
  }
  return "fp32";
}

int64_t WeightStorageBytes(WeightStorage storage) {
  switch (storage) {
    case WeightStorage::kFloat64: return 8;
    case WeightStorage::kFloat32: return 4;
    case WeightStorage::kBFloat16:
    case WeightStorage::kFloat16: return 2;
    case WeightStorage::kFp8E4M3:
    case WeightStorage::kFp8E5M2: return 1;
  }
  return 4;
}

const char* DtypeName(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "fp32";
    case c10::kBFloat16: return "bf16";
    case c10::kHalf: return "fp16";
    case c10::kDouble: return "fp64";
    case c10::kByte: return "uint8";
    default: return c10::toString(dtype);
  }
}

StatusOr<PolicySet> ParsePolicies(const std::string& toml_text, const std::string& source) {
  StatusOr<toml::table> parsed = ParseTomlText(toml_text, source);
  if (!parsed.ok()) return parsed.status();
  const toml::table& root = *parsed;
  PolicySet set;
  const toml::table* policies = root["policy"].as_table();
  if (!policies) return Status::InvalidInput(source + ": no [policy.NAME] tables");
  for (const auto& [key, node] : *policies) {
    const toml::table* t = node.as_table();
    if (!t) return Status::InvalidInput(Where(source, node) + ": policy." +
                                        std::string(key.str()) + " must be a table");
    StatusOr<DtypePolicy> p = ParsePolicy(std::string(key.str()), *t, source);
    if (!p.ok()) return p.status();
    set.push_back(*p);
  }
  for (const DtypePolicy& p : set) {
    if (!p.fallback.empty() && !FindPolicy(p.fallback, set).ok())
      return Status::InvalidInput(source + ": policy '" + p.name + "': fallback '" + p.fallback +
                                  "' is not a policy");
  }
  return set;
}

const PolicySet& PresetPolicies() {
  static const PolicySet presets = [] {
    StatusOr<PolicySet> set = ParsePolicies(kPresetPoliciesToml, "pipelines/policies.toml");
    return set.ok() ? *set : PolicySet{Fp32Policy()};  // the shipped file is tested
  }();
  return presets;
}

StatusOr<DtypePolicy> FindPolicy(const std::string& name, const PolicySet& set) {
  std::string known;
  for (const DtypePolicy& p : set) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  return Status::InvalidInput("unknown policy '" + name + "' (known: " + known + ")");
}

int64_t WeightBytes(const DtypePolicy& policy, int64_t num_parameters) {
  return num_parameters * WeightStorageBytes(policy.storage);
}

DtypePolicy Fp32Policy() { return DtypePolicy(); }

DtypePolicy Fp64ReferencePolicy() {
  DtypePolicy p;
  p.name = "fp64-reference";
  p.storage = WeightStorage::kFloat64;
  p.compute = c10::kDouble;
  return p;
}

DtypePolicy DecoderPolicyOf(const DtypePolicy& policy) {
  if (!policy.IsIsland(ModuleKind::kDecoder)) return policy;
  DtypePolicy fp32 = Fp32Policy();
  fp32.name = policy.name + "/decoder-fp32";
  return fp32;
}

bool IsDecoderWeight(const std::string& name) { return name.rfind("decoder.", 0) == 0; }

}  // namespace framegate
