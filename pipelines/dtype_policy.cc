#include "pipelines/dtype_policy.h"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>

#include <toml++/toml.h>

#include "checks/tolerance.h"
#include "harness/name_rules.h"
#include "harness/toml_source.h"
#include "pipelines/policies_toml.h"

namespace framegate {
namespace {

const std::map<std::string, WeightStorage>& StorageNames() {
  static const std::map<std::string, WeightStorage> names = {
      {"fp32", WeightStorage::kFloat32},    {"bf16", WeightStorage::kBFloat16},
      {"fp16", WeightStorage::kFloat16},    {"fp8e4m3", WeightStorage::kFp8E4M3},
      {"fp8e5m2", WeightStorage::kFp8E5M2}, {"fp64", WeightStorage::kFloat64}};
  return names;
}

bool Fp8Storage(WeightStorage storage) {
  return storage == WeightStorage::kFp8E4M3 || storage == WeightStorage::kFp8E5M2;
}

const std::map<std::string, c10::ScalarType>& ComputeNames() {
  static const std::map<std::string, c10::ScalarType> names = {
      {"fp32", c10::kFloat}, {"bf16", c10::kBFloat16}, {"fp16", c10::kHalf}, {"fp64", c10::kDouble}};
  return names;
}

const std::map<std::string, ModuleKind>& IslandNames() {
  static const std::map<std::string, ModuleKind> names = {{"norm", ModuleKind::kNorm},
                                                          {"softmax", ModuleKind::kSoftmax},
                                                          {"time_embed", ModuleKind::kTimeEmbed},
                                                          {"decoder", ModuleKind::kDecoder}};
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

// One [policy.NAME] table -> DtypePolicy. `presets` are what based_on may name ({} while
// the presets themselves are parsed). `*fallback_at`: the file:line:col that sets the
// fallback (its `fallback` key, else `based_on`), "" when none does.
StatusOr<DtypePolicy> ParsePolicy(const std::string& name, const toml::table& t, const std::string& source,
                                  const PolicySet& presets, std::string* fallback_at) {
  DtypePolicy p;
  if (const toml::node* base = t.get("based_on")) {
    const auto value = base->value<std::string>();
    StatusOr<DtypePolicy> preset =
        value ? FindPolicy(*value, presets) : Status::InvalidInput("based_on must be a string");
    if (!preset.ok())
      return Status::InvalidInput(Where(source, *base) + ": policy '" + name +
                                  "': based_on: " + preset.status().message());
    p = *preset;
    p.based_on = preset->name;
    p.fallback = preset->name;  // the policy's own base is the next safer step
    *fallback_at = Where(source, *base);
  }
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
    } else if (k == "fp8_weights") {
      static const std::map<std::string, bool> scopes = {{"all", false}, {"linear-conv", true}};
      FG_RETURN_IF_ERROR(string_in(scopes, &p.fp8_linear_conv_only));
    } else if (k == "allow_tf32") {
      FG_RETURN_IF_ERROR(boolean(&p.allow_tf32));
    } else if (k == "fp16_reduced_precision_reduction") {
      FG_RETURN_IF_ERROR(boolean(&p.fp16_reduced_precision_reduction));
    } else if (k == "bf16_reduced_precision_reduction") {
      FG_RETURN_IF_ERROR(boolean(&p.bf16_reduced_precision_reduction));
    } else if (k == "attention_backend") {
      static const std::map<std::string, std::string> backends = {
          {"cudnn", "cudnn"}, {"flash", "flash"}, {"math", "math"}, {"mem_efficient", "mem_efficient"}};
      FG_RETURN_IF_ERROR(string_in(backends, &p.attention_backend));
    } else if (k == "accumulation_block") {
      const auto value = node.value_exact<int64_t>();
      if (!value || *value < 1 || *value > 65536)
        return Status::InvalidInput(at + "accumulation_block must be an integer from 1 to 65536");
      p.accumulation_block = *value;
    } else if (k == "fallback") {
      const auto value = node.value<std::string>();
      if (!value) return Status::InvalidInput(at + "fallback must be a policy name");
      p.fallback = *value;
      *fallback_at = Where(source, node);
    } else if (k == "based_on") {
      continue;  // read first, above
    } else if (k == "tolerance") {
      const auto value = node.value<std::string>();
      if (!value) return Status::InvalidInput(at + "tolerance must be a tolerance profile name");
      const StatusOr<ToleranceProfile> profile = FindToleranceProfile(*value);
      if (!profile.ok()) return Status::InvalidInput(at + "tolerance: " + profile.status().message());
      p.tolerance = *value;
    } else if (k == "fp32_modules") {
      const toml::array* globs = node.as_array();
      if (!globs || globs->empty())
        return Status::InvalidInput(at +
                                    "fp32_modules must be a non-empty array of module "
                                    "path globs");
      p.fp32_modules.clear();
      for (const toml::node& glob : *globs) {
        const auto value = glob.value<std::string>();
        if (!value || value->empty())
          return Status::InvalidInput(Where(source, glob) + ": policy '" + name +
                                      "': fp32_modules entries must be non-empty strings");
        p.fp32_modules.push_back(*value);
      }
    } else if (k == "fp32_islands") {
      const toml::array* islands = node.as_array();
      if (!islands) return Status::InvalidInput(at + "fp32_islands must be an array of names");
      for (const toml::node& island : *islands) {
        const auto value = island.value<std::string>();
        if (!value || !IslandNames().count(*value))
          return Status::InvalidInput(Where(source, island) + ": policy '" + name +
                                      "': fp32_islands entries must be among " + KeysOf(IslandNames()));
        p.fp32_islands.insert(IslandNames().at(*value));
      }
    } else {
      return Status::InvalidInput(at + "unknown key '" + k + "'");
    }
  }
  if (p.fp16_reduced_precision_reduction && p.bf16_reduced_precision_reduction)
    return Status::InvalidInput(Where(source, t) + ": policy '" + name +
                                "': fp16_ and bf16_reduced_precision_reduction exclude each other");
  if (p.fp8_linear_conv_only && !Fp8Storage(p.storage))
    return Status::InvalidInput(Where(source, t) + ": policy '" + name +
                                "': fp8_weights needs storage = \"fp8e4m3\" or \"fp8e5m2\"");
  if (p.emulate_fp16 && p.compute != c10::kFloat)
    return Status::InvalidInput(Where(source, t) + ": policy '" + name +
                                "': emulate_fp16 needs compute = \"fp32\"");
  if (!presets.empty() && p.ToleranceProfileName().empty())  // a file's policy, not a preset
    return Status::InvalidInput(
        Where(source, t) + ": policy '" + name + "': no tolerance profile is implied by storage " +
        WeightStorageName(p.storage) + ", compute " + DtypeName(p.compute) +
        (p.emulate_fp16 ? ", emulate_fp16" : "") + (p.allow_tf32 ? ", allow_tf32" : "") +
        (p.fp16_reduced_precision_reduction ? ", fp16_reduced_precision_reduction" : "") +
        (p.bf16_reduced_precision_reduction ? ", bf16_reduced_precision_reduction" : "") +
        "; set tolerance = \"PROFILE\" or based_on = \"PRESET\"");
  return p;
}

// The preset (without islands) whose storage, compute, emulation and accumulation flags
// `policy` has, "" when none. Weights stored finer than the compute dtype are cast to it
// at use, so they count as stored in it; a compute dtype finer than the weights' storage
// counts as the storage's preset, whose bound allows more error than such a policy makes.
std::string ImpliedToleranceProfile(const DtypePolicy& policy) {
  DtypePolicy key = policy;
  if (key.storage == WeightStorage::kFloat32 && key.compute == c10::kBFloat16)
    key.storage = WeightStorage::kBFloat16;
  if (key.storage == WeightStorage::kFloat32 && key.compute == c10::kHalf)
    key.storage = WeightStorage::kFloat16;
  if (key.compute == c10::kFloat && !key.emulate_fp16 && !key.allow_tf32) {
    if (key.storage == WeightStorage::kFloat16) key.compute = c10::kHalf;
    if (key.storage == WeightStorage::kBFloat16 || key.storage == WeightStorage::kFp8E4M3 ||
        key.storage == WeightStorage::kFp8E5M2)
      key.compute = c10::kBFloat16;
  }
  for (const DtypePolicy& preset : PresetPolicies()) {
    if (!preset.fp32_islands.empty() || !preset.fp32_modules.empty()) continue;
    if (preset.storage == key.storage && preset.compute == key.compute &&
        preset.emulate_fp16 == key.emulate_fp16 && preset.allow_tf32 == key.allow_tf32 &&
        preset.fp16_reduced_precision_reduction == key.fp16_reduced_precision_reduction &&
        preset.bf16_reduced_precision_reduction == key.bf16_reduced_precision_reduction)
      return preset.name;
  }
  return "";
}

}  // namespace

const char* ModuleKindName(ModuleKind kind) {
  switch (kind) {
    case ModuleKind::kNorm:
      return "norm";
    case ModuleKind::kSoftmax:
      return "softmax";
    case ModuleKind::kTimeEmbed:
      return "time_embed";
    case ModuleKind::kDecoder:
      return "decoder";
    case ModuleKind::kAttentionLogits:
      return "attention_logits";
    case ModuleKind::kOther:
      return "other";
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
    case WeightStorage::kFloat64:
      return 8;
    case WeightStorage::kFloat32:
      return 4;
    case WeightStorage::kBFloat16:
    case WeightStorage::kFloat16:
      return 2;
    case WeightStorage::kFp8E4M3:
    case WeightStorage::kFp8E5M2:
      return 1;
  }
  return 4;
}

const char* DtypeName(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
      return "fp32";
    case c10::kBFloat16:
      return "bf16";
    case c10::kHalf:
      return "fp16";
    case c10::kDouble:
      return "fp64";
    case c10::kByte:
      return "uint8";
    default:
      return c10::toString(dtype);
  }
}

namespace {

// The fallback cycle that `start` is on ("a -> b -> a"), or "" when following the
// fallbacks from `start` ends (or runs into a cycle `start` is not on).
std::string FallbackCycleFrom(const std::string& start, const PolicySet& set) {
  std::vector<std::string> chain;
  std::string name = start;
  while (!name.empty()) {
    if (std::find(chain.begin(), chain.end(), name) != chain.end()) {
      if (name != start) return "";
      std::string cycle;
      for (const std::string& step : chain) cycle += step + " -> ";
      return cycle + start;
    }
    chain.push_back(name);
    const auto next =
        std::find_if(set.begin(), set.end(), [&](const DtypePolicy& p) { return p.name == name; });
    if (next == set.end()) return "";
    name = next->fallback;
  }
  return "";
}

// The [policy.NAME] tables of `root` appended to `set` (which holds what based_on and
// fallback may name besides them). Names follow CheckName; every fallback names a policy
// and no chain of fallbacks comes back to where it started (`run --fallback` would not end).
Status AppendPolicies(const toml::table& root, const std::string& source, PolicySet* set) {
  const PolicySet base = *set;
  const toml::node* node = root.get("policy");
  if (node == nullptr) return Status::Ok();
  const toml::table* policies = node->as_table();
  if (!policies)
    return Status::InvalidInput(Where(source, *node) + ": policy must be a table of [policy.NAME] tables");
  std::map<std::string, std::string> fallback_at;  // new policy -> where its fallback is set
  for (const auto& [key, value] : *policies) {
    const std::string name(key.str());
    const Status named = CheckName("policy name", name);
    if (!named.ok()) return named.WithContext(TomlPlace(source, key.source()));
    const toml::table* t = value.as_table();
    if (!t) return Status::InvalidInput(Where(source, value) + ": policy." + name + " must be a table");
    if (FindPolicy(name, base).ok())
      return Status::InvalidInput(Where(source, value) + ": policy '" + name +
                                  "' is a preset; give the new policy another name");
    StatusOr<DtypePolicy> p = ParsePolicy(name, *t, source, base, &fallback_at[name]);
    if (!p.ok()) return p.status();
    set->push_back(*p);
  }
  for (const DtypePolicy& p : *set) {
    if (!p.fallback.empty() && !FindPolicy(p.fallback, *set).ok())
      return Status::InvalidInput(source + ": policy '" + p.name + "': fallback '" + p.fallback +
                                  "' is not a policy");
  }
  for (const auto& [name, at] : fallback_at) {
    const std::string cycle = FallbackCycleFrom(name, *set);
    if (!cycle.empty())
      return Status::InvalidInput(at + ": policy '" + name + "': fallback cycle " + cycle +
                                  " (`run --fallback` would never end)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PolicySet> ParsePolicies(const std::string& toml_text, const std::string& source) {
  StatusOr<toml::table> parsed = ParseTomlText(toml_text, source);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->get("policy")) return Status::InvalidInput(source + ": no [policy.NAME] tables");
  PolicySet set;
  FG_RETURN_IF_ERROR(AppendPolicies(*parsed, source, &set));
  return set;
}

StatusOr<PolicySet> PresetsAndPoliciesOf(const std::string& toml_text, const std::string& source) {
  StatusOr<toml::table> parsed = ParseTomlText(toml_text, source);
  if (!parsed.ok()) return parsed.status();
  PolicySet set = PresetPolicies();
  FG_RETURN_IF_ERROR(AppendPolicies(*parsed, source, &set));
  return set;
}

StatusOr<PolicySet> PresetsAndPoliciesOfFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open the policy file");
  std::stringstream text;
  text << in.rdbuf();
  return PresetsAndPoliciesOf(text.str(), path);
}

namespace {

// The policy files this process has parsed, by path (PoliciesOfFile).
struct PolicyFileCache {
  std::mutex mutex;
  std::map<std::string, StatusOr<PolicySet>> sets;
};

PolicyFileCache& PolicyFiles() {
  static PolicyFileCache* cache = new PolicyFileCache;  // never destroyed: no exit-order issue
  return *cache;
}

}  // namespace

StatusOr<PolicySet> PoliciesOfFile(const std::string& path) {
  PolicyFileCache& cache = PolicyFiles();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto found = cache.sets.find(path);
  if (found == cache.sets.end()) found = cache.sets.emplace(path, PresetsAndPoliciesOfFile(path)).first;
  return found->second;
}

void RememberPoliciesOfFile(const std::string& path, const PolicySet& set) {
  PolicyFileCache& cache = PolicyFiles();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.sets.erase(path);
  cache.sets.emplace(path, set);
}

StatusOr<DtypePolicy> FindPolicyIn(const std::string& name, const std::string& policy_file) {
  if (policy_file.empty()) return FindPolicy(name);
  StatusOr<PolicySet> set = PoliciesOfFile(policy_file);
  if (!set.ok()) return set.status();
  StatusOr<DtypePolicy> policy = FindPolicy(name, *set);
  if (!policy.ok()) return Status::InvalidInput(policy_file + ": " + policy.status().message());
  return policy;
}

std::string DtypePolicy::ToleranceProfileName() const {
  if (!tolerance.empty()) return tolerance;
  if (!based_on.empty()) return based_on;
  for (const DtypePolicy& preset : PresetPolicies()) {
    if (preset.name == name) return name;
  }
  return ImpliedToleranceProfile(*this);
}

bool DtypePolicy::InFp32Module(const std::string& path) const {
  if (fp32_modules.empty() || path.empty()) return false;
  std::string prefix = path;  // the path itself, then each ancestor: "a.b.c", "a.b", "a"
  while (true) {
    for (const std::string& glob : fp32_modules) {
      if (fnmatch(glob.c_str(), prefix.c_str(), 0) == 0) return true;
    }
    const size_t dot = prefix.rfind('.');
    if (dot == std::string::npos) return false;
    prefix.resize(dot);
  }
}

bool DtypePolicy::KeepsWeightInFp32(const std::string& weight_path) const {
  return InFp32Module(ModuleOfWeight(weight_path)) ||
         std::find(fp32_modules.begin(), fp32_modules.end(), weight_path) != fp32_modules.end();
}

bool DtypePolicy::StoresInFp8(bool linear_or_conv_weight) const {
  return Fp8Storage(storage) && (!fp8_linear_conv_only || linear_or_conv_weight);
}

std::string DtypePolicy::ToToml() const {
  auto quoted = [](const std::string& s) { return "\"" + s + "\""; };
  std::ostringstream out;
  out << "[policy." << name << "]\n";
  if (!based_on.empty()) out << "based_on = " << quoted(based_on) << "\n";
  if (!tolerance.empty()) out << "tolerance = " << quoted(tolerance) << "\n";
  out << "storage = " << quoted(WeightStorageName(storage)) << "\n";
  out << "compute = " << quoted(DtypeName(compute)) << "\n";
  if (!fp32_islands.empty()) {
    out << "fp32_islands = [";
    const char* sep = "";
    for (ModuleKind kind : fp32_islands) out << sep << quoted(ModuleKindName(kind)), sep = ", ";
    out << "]\n";
  }
  if (!fp32_modules.empty()) {
    out << "fp32_modules = [";
    const char* sep = "";
    for (const std::string& glob : fp32_modules) out << sep << quoted(glob), sep = ", ";
    out << "]\n";
  }
  if (fp8_linear_conv_only) out << "fp8_weights = \"linear-conv\"\n";
  if (emulate_fp16) out << "emulate_fp16 = true\n";
  if (allow_tf32) out << "allow_tf32 = true\n";
  if (fp16_reduced_precision_reduction) out << "fp16_reduced_precision_reduction = true\n";
  if (bf16_reduced_precision_reduction) out << "bf16_reduced_precision_reduction = true\n";
  if (!attention_backend.empty()) out << "attention_backend = " << quoted(attention_backend) << "\n";
  if (accumulation_block != DtypePolicy().accumulation_block) {
    out << "accumulation_block = " << accumulation_block << "\n";
  }
  if (!fallback.empty()) out << "fallback = " << quoted(fallback) << "\n";
  return out.str();
}

std::string ModuleOfWeight(const std::string& weight_name) {
  const size_t dot = weight_name.rfind('.');
  return dot == std::string::npos ? "" : weight_name.substr(0, dot);
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
