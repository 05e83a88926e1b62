// TOML -> MatrixDefinition: every key and value checked, errors at file:line:col.
#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "checks/tolerance.h"
#include "harness/name_rules.h"
#include "harness/number_limits.h"
#include "harness/sha256.h"
#include "harness/toml_source.h"
#include "matrix/cell_keys.h"
#include "matrix/device_discovery.h"
#include "matrix/matrix_definition.h"
#include "matrix/unsupported.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/fault_cases.h"
#include "pipelines/pipeline_config.h"

namespace framegate {
namespace {

std::string Join(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& w : words) joined += (joined.empty() ? "" : ", ") + w;
  return joined;
}

std::string TypeName(const toml::node& node) {
  std::ostringstream out;
  out << node.type();
  return out.str();
}

// Reads one matrix file; every error names `source` and the node's line:column.
class MatrixReader {
 public:
  // `policies`: the presets and the matrix's own [policy.NAME] tables, which
  // `policy_file` defines (the file cells name so that their process can read them).
  MatrixReader(std::string source, std::string base_dir, PolicySet policies, std::string policy_file)
      : source_(std::move(source)),
        base_dir_(std::move(base_dir)),
        policies_(std::move(policies)),
        policy_file_(std::move(policy_file)) {}

  std::string Where(const toml::source_region& r) const { return TomlPlace(source_, r); }
  Status Error(const toml::source_region& r, const std::string& problem) const {
    return Status::InvalidInput(Where(r) + ": " + problem);
  }
  Status UnknownKey(const toml::key& key, const std::string& table,
                    const std::vector<std::string>& known) const {
    return Error(key.source(), "unknown key '" + std::string(key.str()) + "' in " + table +
                                   " (known: " + Join(known) + ")");
  }

  // One identity value (`key` is singular: "policy") into `cell`. A device may also be
  // "cuda", "cpu:*" or "all" (in axes they expand, in entries they match a group of devices).
  Status ReadKeyValue(const std::string& key, const toml::node& node, Cell* cell) const;
  StatusOr<std::string> ReadString(const std::string& what, const toml::node& node) const;
  // A number inside `limit` (harness/number_limits.h: the CLI's bounds too).
  StatusOr<int64_t> ReadInteger(const IntegerLimit& limit, const toml::node& node) const;
  StatusOr<double> ReadReal(const RealLimit& limit, const toml::node& node) const;
  StatusOr<std::vector<std::string>> ReadRequirements(const toml::node& node) const;
  // A tolerance profile name (checks/tolerances.toml).
  StatusOr<std::string> ReadToleranceProfile(const toml::node& node) const;
  Status ReadAxes(const toml::table& axes, MatrixDefinition* def) const;
  // An array of tables: [[include]], [[exclude]] or [[xfail]].
  Status ReadEntries(const std::string& kind, const toml::node& node, std::vector<CellPattern>* out) const;
  Status ReadEntry(const std::string& kind, const toml::table& table, CellPattern* out) const;
  Status ReadSettings(const toml::table& root, MatrixDefinition* def) const;
  Status ReadTolerance(const toml::table& table, MatrixDefinition* def) const;

 private:
  Status ReadPipeline(const std::string& value, const toml::node& node, Cell* cell) const;
  std::string source_;
  std::string base_dir_;
  PolicySet policies_;
  std::string policy_file_;
};

StatusOr<int64_t> MatrixReader::ReadInteger(const IntegerLimit& limit, const toml::node& node) const {
  const std::optional<int64_t> v = node.value_exact<int64_t>();
  if (!v) return Error(node.source(), LimitText(limit) + ", not " + TypeName(node));
  const Status inside = CheckNumber(limit, *v);
  if (!inside.ok()) return Error(node.source(), inside.message());
  return *v;
}

StatusOr<double> MatrixReader::ReadReal(const RealLimit& limit, const toml::node& node) const {
  const std::optional<double> v = node.is_number() ? node.value<double>() : std::nullopt;
  if (!v) return Error(node.source(), LimitText(limit) + ", not " + TypeName(node));
  const Status inside = CheckNumber(limit, *v);  // NaN and infinities are outside
  if (!inside.ok()) return Error(node.source(), inside.message());
  return *v;
}

StatusOr<std::string> MatrixReader::ReadString(const std::string& what, const toml::node& node) const {
  const std::optional<std::string> value = node.value_exact<std::string>();
  if (!value) return Error(node.source(), what + " must be a string, not " + TypeName(node));
  return *value;
}

Status MatrixReader::ReadPipeline(const std::string& value, const toml::node& node, Cell* cell) const {
  if (FindReferenceSize(value).ok()) {
    cell->size = value;
    cell->model_dir.clear();
    return Status::Ok();
  }
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(value).is_absolute() || base_dir_.empty() ? fs::path(value) : fs::path(base_dir_) / value;
  std::error_code ec;
  if (fs::is_regular_file(dir / "model.toml", ec)) {
    cell->model_dir = dir.lexically_normal().string();
    // The folder's name is the pipeline's name ("model:NAME", Cell::Pipeline()).
    const std::string pipeline = cell->Pipeline();
    const Status named = CheckName("pipeline name", pipeline.substr(pipeline.find(':') + 1));
    if (!named.ok()) return Error(node.source(), named.message());
    return Status::Ok();
  }
  if (value.find('/') == std::string::npos && !fs::exists(dir, ec)) {
    std::vector<std::string> sizes;
    for (const ReferenceSize& s : ReferenceSizes()) sizes.push_back(s.name);
    return Error(node.source(),
                 "unknown pipeline '" + value + "' (a size: " + Join(sizes) + "; or a model package folder)");
  }
  return Error(node.source(),
               "model package folder '" + value + "' (" + dir.string() + ") has no model.toml");
}

Status MatrixReader::ReadKeyValue(const std::string& key, const toml::node& node, Cell* cell) const {
  if (key == "seed" || key == "steps") {
    const IntegerLimit& limit = key == "seed" ? kSeedLimit : kStepsLimit;
    StatusOr<int64_t> v = ReadInteger(limit, node);
    if (!v.ok()) return v.status();
    if (key == "seed") cell->seed = static_cast<uint64_t>(*v);
    if (key == "steps") cell->steps = static_cast<int>(*v);
    return Status::Ok();
  }
  if (key == "guidance") {
    StatusOr<double> v = ReadReal(kGuidanceLimit, node);
    if (!v.ok()) return v.status();
    cell->guidance = *v;
    return Status::Ok();
  }
  StatusOr<std::string> value = ReadString(key, node);
  if (!value.ok()) return value.status();
  const std::string& v = *value;
  if (key == "pipeline") return ReadPipeline(v, node, cell);
  if (key == "device") {
    const bool gpu =
        v.size() > 5 && v.rfind("cuda:", 0) == 0 && v.find_first_not_of("0123456789", 5) == std::string::npos;
    const bool kernel_path = !CpuKernelPathOf(v).empty() || v == "cpu:*";
    if (v != "cpu" && v != "cuda" && v != "all" && !gpu && !kernel_path)
      return Error(node.source(), "unknown device '" + v +
                                      "' (known: cpu, cpu:avx512, cpu:avx2, cpu:default, "
                                      "cpu:* = every CPU kernel path found, cuda:N, "
                                      "cuda = every GPU found, all = every device found)");
    cell->device = v;
  } else if (key == "policy") {
    const StatusOr<DtypePolicy> policy = FindPolicy(v, policies_);
    if (!policy.ok()) return Error(node.source(), policy.status().message());
    cell->policy = v;
    cell->policy_file = FindPolicy(v).ok() ? "" : policy_file_;
  } else if (key == "fault") {
    if (!ParseFaultCase(v)) {
      std::vector<std::string> known = {"none"};
      for (const FaultCaseInfo& info : FaultCases()) known.push_back(info.name);
      return Error(node.source(), "unknown fault case '" + v + "' (known: " + Join(known) + ")");
    }
    cell->fault = v == "none" ? "" : v;
  } else if (key == "sampler") {
    if (!ParseSamplerKind(v)) return Error(node.source(), "unknown sampler '" + v + "' (known: ddim, euler)");
    cell->sampler = v;
  }
  return Status::Ok();
}

StatusOr<std::string> MatrixReader::ReadToleranceProfile(const toml::node& node) const {
  StatusOr<std::string> name = ReadString("a tolerance profile", node);
  if (!name.ok()) return name.status();
  const StatusOr<ToleranceProfile> profile = FindToleranceProfile(*name);
  if (!profile.ok()) return Error(node.source(), profile.status().message());
  return *name;
}

StatusOr<std::vector<std::string>> MatrixReader::ReadRequirements(const toml::node& node) const {
  const toml::array* array = node.as_array();
  if (!array) return Error(node.source(), "requires must be an array of strings, not " + TypeName(node));
  std::vector<std::string> out;
  for (const toml::node& element : *array) {
    StatusOr<std::string> name = ReadString("a requirement", element);
    if (!name.ok()) return name.status();
    const auto& known = KnownRequirements();
    if (std::find(known.begin(), known.end(), *name) == known.end())
      return Error(element.source(), "unknown requirement '" + *name + "' (known: " + Join(known) + ")");
    if (std::find(out.begin(), out.end(), *name) == out.end()) out.push_back(*name);
  }
  return out;
}

// The axis names: the plural of each identity key ("steps" and "guidance" stay).
std::string AxisName(const std::string& key) {
  if (key == "policy") return "policies";
  if (key == "steps" || key == "guidance") return key;
  return key + "s";
}

Status MatrixReader::ReadAxes(const toml::table& axes, MatrixDefinition* def) const {
  std::vector<std::string> known;
  for (const std::string& key : IdentityKeys()) known.push_back(AxisName(key));
  for (const auto& [name, node] : axes) {
    if (std::find(known.begin(), known.end(), std::string(name.str())) == known.end())
      return UnknownKey(name, "[axes]", known);
  }
  for (const std::string& key : IdentityKeys()) {
    const std::string name = AxisName(key);
    const toml::node* node = axes.get(name);
    if (!node) {
      if (key == "pipeline" || key == "device" || key == "policy")
        return Error(axes.source(), "[axes] needs '" + name + "'");
      continue;
    }
    const toml::array* array = node->as_array();
    if (!array) return Error(node->source(), "axis '" + name + "' must be an array, not " + TypeName(*node));
    if (array->empty()) return Error(node->source(), "axis '" + name + "' is empty");
    MatrixAxis axis{key, {}};
    std::set<std::string> seen;  // the values so far, as KeyValue spells them
    for (const toml::node& element : *array) {
      Cell value;
      FG_RETURN_IF_ERROR(ReadKeyValue(key, element, &value));
      if (!seen.insert(KeyValue(value, key)).second)
        return Error(element.source(), "duplicate value in axis '" + name + "'");
      axis.values.push_back(value);
    }
    def->axes.push_back(axis);
  }
  return Status::Ok();
}

Status MatrixReader::ReadEntry(const std::string& kind, const toml::table& table, CellPattern* out) const {
  out->where = Where(table.source());
  std::vector<std::string> known = IdentityKeys();
  if (kind == "include") known.insert(known.end(), {"requires", "tolerance"});
  if (kind == "xfail") known.push_back("reason");
  for (const auto& [name, node] : table) {
    const std::string key(name.str());
    if (std::find(known.begin(), known.end(), key) == known.end())
      return UnknownKey(name, "[[" + kind + "]]", known);
    if (IsIdentityKey(key)) {
      FG_RETURN_IF_ERROR(ReadKeyValue(key, node, &out->values));
      out->keys.push_back(key);
    } else if (key == "requires") {
      StatusOr<std::vector<std::string>> r = ReadRequirements(node);
      if (!r.ok()) return r.status();
      out->requirements = *r;
    } else if (key == "tolerance") {
      StatusOr<std::string> profile = ReadToleranceProfile(node);
      if (!profile.ok()) return profile.status();
      out->tolerance = *profile;
    } else {
      StatusOr<std::string> reason = ReadString(key, node);
      if (!reason.ok()) return reason.status();
      if (reason->empty()) return Error(node.source(), "reason must not be empty");
      out->reason = *reason;
    }
  }
  if (kind == "xfail" && out->reason.empty()) return Error(table.source(), "[[xfail]] needs a reason");
  if (kind == "exclude" && out->keys.empty())
    return Error(table.source(), "[[exclude]] needs at least one of " + Join(IdentityKeys()));
  return Status::Ok();
}

Status MatrixReader::ReadEntries(const std::string& kind, const toml::node& node,
                                 std::vector<CellPattern>* out) const {
  const toml::array* array = node.as_array();
  if (!array) return Error(node.source(), kind + " must be an array of tables ([[" + kind + "]])");
  for (const toml::node& element : *array) {
    const toml::table* table = element.as_table();
    if (!table) return Error(element.source(), kind + " entries must be tables, not " + TypeName(element));
    CellPattern pattern;
    FG_RETURN_IF_ERROR(ReadEntry(kind, *table, &pattern));
    out->push_back(pattern);
  }
  return Status::Ok();
}

Status MatrixReader::ReadTolerance(const toml::table& table, MatrixDefinition* def) const {
  for (const auto& [name, node] : table) {
    const std::string policy(name.str());
    const StatusOr<DtypePolicy> known = FindPolicy(policy, policies_);
    if (!known.ok()) return Error(name.source(), "[tolerance]: " + known.status().message());
    StatusOr<std::string> profile = ReadToleranceProfile(node);
    if (!profile.ok()) return profile.status();
    def->tolerance[policy] = *profile;
  }
  return Status::Ok();
}

Status MatrixReader::ReadSettings(const toml::table& root, MatrixDefinition* def) const {
  MatrixSpec& s = def->settings;
  for (const auto& [name, node] : root) {
    const std::string key(name.str());
    if (key == "name" || key == "description") {
      StatusOr<std::string> text = ReadString(key, node);
      if (!text.ok()) return text.status();
      (key == "name" ? s.name : s.description) = *text;
    } else if (key == "repeats" || key == "warmup") {
      StatusOr<int64_t> v = ReadInteger(key == "repeats" ? kRepeatsLimit : kWarmupLimit, node);
      if (!v.ok()) return v.status();
      (key == "repeats" ? s.repeats : s.warmup) = static_cast<int>(*v);
    } else if (key == "timeout") {
      StatusOr<double> v = ReadReal(kTimeoutLimit, node);
      if (!v.ok()) return v.status();
      s.timeout_seconds = *v;
    } else if (key == "requires") {
      StatusOr<std::vector<std::string>> r = ReadRequirements(node);
      if (!r.ok()) return r.status();
      def->requirements = *r;
    } else if (key == "axes") {
      if (!node.is_table()) return Error(node.source(), "axes must be a table ([axes])");
      FG_RETURN_IF_ERROR(ReadAxes(*node.as_table(), def));
    } else if (key == "tolerance") {
      if (!node.is_table()) return Error(node.source(), "tolerance must be a table ([tolerance])");
      FG_RETURN_IF_ERROR(ReadTolerance(*node.as_table(), def));
    } else if (key == "policy") {
      continue;  // [policy.NAME] tables: read before the axes (PresetsAndPoliciesOf)
    } else if (key == "include" || key == "exclude" || key == "xfail") {
      auto& entries = key == "include" ? def->include : key == "exclude" ? def->exclude : def->xfail;
      FG_RETURN_IF_ERROR(ReadEntries(key, node, &entries));
    } else {
      return UnknownKey(name, "the matrix",
                        {"name", "description", "repeats", "warmup", "timeout", "requires", "axes",
                         "tolerance", "policy", "include", "exclude", "xfail"});
    }
  }
  if (def->axes.empty()) return Status::InvalidInput(source_ + ":1:1: the matrix needs an [axes] table");
  return Status::Ok();
}

}  // namespace

StatusOr<MatrixDefinition> ParseMatrixDefinition(const std::string& toml_text, const std::string& source,
                                                 const std::string& base_dir) {
  StatusOr<toml::table> parsed = ParseTomlText(toml_text, source);
  if (!parsed.ok()) return parsed.status();
  const toml::table& root = *parsed;
  MatrixDefinition def;
  def.settings.source = source;
  def.settings.sha256 = Sha256Hex(toml_text);
  StatusOr<PolicySet> policies = PresetsAndPoliciesOf(toml_text, source);
  if (!policies.ok()) return policies.status();
  // Shipped matrices (no base_dir) define no policies of their own; a file's cells name
  // it by absolute path, so that a cell's process finds it from any folder.
  const std::string policy_file =
      base_dir.empty() ? source : std::filesystem::absolute(source).lexically_normal().string();
  // The cells' process resolves their policies from this text, not from a second read of
  // the file (which may have changed or gone since).
  RememberPoliciesOfFile(policy_file, *policies);
  FG_RETURN_IF_ERROR(
      MatrixReader(source, base_dir, std::move(*policies), policy_file).ReadSettings(root, &def));
  if (def.settings.name.empty()) {
    def.settings.name = std::filesystem::path(source).stem().string();
  }
  return def;
}

}  // namespace framegate
