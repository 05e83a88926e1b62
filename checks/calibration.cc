#include "checks/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "harness/toml_source.h"

namespace framegate {
namespace {

// The metrics a calibration bounds (NamedMetrics() names, also the calibration file's keys)
// and whether each is a minimum (PSNR, similarities) or a maximum (errors).
const std::vector<ToleranceBound>& CalibratedMetrics() {
  static const std::vector<ToleranceBound> metrics = {
      {"min_psnr", true, 0}, {"mean_ssim", true, 0},        {"min_ssim", true, 0},      {"max_abs", false, 0},
      {"rel_l2", false, 0},  {"temporal_rel_l2", false, 0}, {"latent_cosine", true, 0},
  };
  return metrics;
}

const ToleranceBound* FindMetric(const std::string& name) {
  for (const ToleranceBound& m : CalibratedMetrics()) {
    if (name == m.metric) return &m;
  }
  return nullptr;
}

std::string Number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void WriteMetrics(const std::vector<NamedMetric>& metrics, std::ostringstream& out) {
  for (const NamedMetric& m : metrics) out << m.name << " = " << Number(m.value) << "\n";
}

// The metric keys of `table` (other keys are the caller's); Corrupt on a bad one.
Status ReadMetrics(const toml::table& table, const std::string& source,
                   const std::set<std::string>& other_keys, std::vector<NamedMetric>* out) {
  for (const ToleranceBound& m : CalibratedMetrics()) {
    const toml::node* v = table.get(m.metric);
    if (v == nullptr) continue;
    const std::optional<double> number = v->value<double>();
    if (!number)
      return Status::Corrupt(TomlPlace(source, v->source()) + ": " + m.metric + " must be a number");
    out->push_back({m.metric, *number});
  }
  for (const auto& [key, v] : table) {
    const std::string k(key.str());
    if (!FindMetric(k) && !other_keys.count(k))
      return Status::Corrupt(TomlPlace(source, v.source()) + ": unknown key '" + k + "'");
  }
  return Status::Ok();
}

Status ReadStringMap(const toml::table& root, const char* key, const std::string& source,
                     std::map<std::string, std::string>* out) {
  const toml::node* node = root.get(key);
  if (node == nullptr) return Status::Ok();
  if (!node->is_table())
    return Status::Corrupt(TomlPlace(source, node->source()) + ": " + key + " must be a table");
  for (const auto& [name, v] : *node->as_table()) {
    const std::optional<std::string> text = v.value<std::string>();
    if (!text) return Status::Corrupt(TomlPlace(source, v.source()) + ": " + key + " values must be strings");
    (*out)[std::string(name.str())] = *text;
  }
  return Status::Ok();
}

Status ReadPolicies(const toml::table& root, const std::string& source, Calibration* c) {
  const toml::node* node = root.get("policy");
  if (node == nullptr) return Status::Ok();
  if (!node->is_table())
    return Status::Corrupt(TomlPlace(source, node->source()) + ": policy must be a table");
  for (const auto& [name, v] : *node->as_table()) {
    const toml::table* t = v.as_table();
    if (t == nullptr) return Status::Corrupt(TomlPlace(source, v.source()) + ": policy tables only");
    PolicyCalibration p;
    FG_RETURN_IF_ERROR(ReadMetrics(*t, source, {"seeds", "not_calibrated"}, &p.worst));
    p.not_calibrated = t->get("not_calibrated") ? (*t)["not_calibrated"].value_or(std::string()) : "";
    if (const toml::array* seeds = (*t)["seeds"].as_array()) {
      for (const toml::node& seed : *seeds) {
        const std::optional<int64_t> s = seed.value<int64_t>();
        if (!s || *s < 0)
          return Status::Corrupt(TomlPlace(source, seed.source()) + ": seeds are integers >= 0");
        p.seeds.push_back(static_cast<uint64_t>(*s));
      }
    }
    c->policies[std::string(name.str())] = p;
  }
  return Status::Ok();
}

}  // namespace

void KeepWorst(const ComparisonMetrics& metrics, std::vector<NamedMetric>* worst) {
  for (const NamedMetric& m : NamedMetrics(metrics)) {
    const ToleranceBound* known = FindMetric(m.name);
    if (known == nullptr) continue;  // fp64_error_ratio
    auto kept =
        std::find_if(worst->begin(), worst->end(), [&](const NamedMetric& w) { return w.name == m.name; });
    if (kept == worst->end()) {
      worst->push_back(m);
      continue;
    }
    const double e_new = ErrorOf(*known, m.value), e_old = ErrorOf(*known, kept->value);
    if (std::isnan(e_new) || (!std::isnan(e_old) && e_new > e_old)) kept->value = m.value;
  }
}

double CalibratedBound(const std::string& metric, double reference, double noise, double multiplier) {
  const ToleranceBound* m = FindMetric(metric);
  if (m == nullptr) return std::numeric_limits<double>::quiet_NaN();
  const double noise_error = std::max(ErrorOf(*m, noise), kCalibrationNoiseMinimum);
  return ValueOfError(*m, ErrorTimes(*m, ErrorOf(*m, reference), multiplier) + noise_error);
}

double StepBudget(const Calibration& c, const std::string& device) {
  if (!(c.noise_step_rel_l2 >= 0)) return std::numeric_limits<double>::quiet_NaN();
  for (const std::string& run : c.noise_runs) {
    if (run.substr(0, run.find(' ')) == device)
      return c.multiplier * c.noise_step_rel_l2 + kCalibrationNoiseMinimum;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

StatusOr<ToleranceProfile> CalibratedProfile(const Calibration& c, const std::string& policy) {
  const auto found = c.policies.find(policy);
  if (found == c.policies.end()) return Status::NotFound("policy '" + policy + "' is not calibrated");
  if (!found->second.not_calibrated.empty())
    return Status::NotFound("policy '" + policy + "' was not calibrated: " + found->second.not_calibrated);
  ToleranceProfile profile;
  profile.name = "calibration";
  for (const NamedMetric& worst : found->second.worst) {
    const ToleranceBound* m = FindMetric(worst.name);
    if (m == nullptr || std::isnan(worst.value)) continue;
    double noise = ValueOfError(*m, 0.0);  // no noise measured
    for (const NamedMetric& n : c.noise_floor) {
      if (n.name == worst.name) noise = n.value;
    }
    profile.bounds.push_back(
        {worst.name, m->is_min, CalibratedBound(worst.name, worst.value, noise, c.multiplier)});
  }
  return profile;
}

std::string CalibrationToToml(const Calibration& c) {
  std::ostringstream out;
  out << "# framegate calibration (framegate calibrate): measured on this model; the verdict\n"
      << "# bounds each metric's error by multiplier x the policy's worst + the noise floor.\n"
      << "format_version = 1\n"
      << "pipeline = " << Quoted(c.pipeline) << "\nweights = " << Quoted(c.weights)
      << "\nfault = " << Quoted(c.fault) << "\nconfig = " << Quoted(c.config)
      << "\nframegate_version = " << Quoted(c.framegate_version) << "\ncreated_at = " << Quoted(c.created_at)
      << "\nmultiplier = " << Number(c.multiplier) << "\n\n[model_sha256]\n";
  for (const auto& [file, sha] : c.model_sha256) out << Quoted(file) << " = " << Quoted(sha) << "\n";
  out << "\n[golden_sha256]\n";
  for (const auto& [file, sha] : c.golden_sha256) out << Quoted(file) << " = " << Quoted(sha) << "\n";
  out << "\n[noise_floor]\nruns = [";
  for (size_t i = 0; i < c.noise_runs.size(); ++i) out << (i ? ", " : "") << Quoted(c.noise_runs[i]);
  out << "]\n";
  if (!std::isnan(c.noise_step_rel_l2)) out << "step_rel_l2 = " << Number(c.noise_step_rel_l2) << "\n";
  WriteMetrics(c.noise_floor, out);
  for (const auto& [name, p] : c.policies) {
    out << "\n[policy." << Quoted(name) << "]\nseeds = [";
    for (size_t i = 0; i < p.seeds.size(); ++i) out << (i ? ", " : "") << p.seeds[i];
    out << "]\n";
    if (!p.not_calibrated.empty()) out << "not_calibrated = " << Quoted(p.not_calibrated) << "\n";
    WriteMetrics(p.worst, out);
  }
  return out.str();
}

StatusOr<Calibration> ParseCalibration(const std::string& text, const std::string& source) {
  StatusOr<toml::table> parsed = ParseTomlText(text, source);
  if (!parsed.ok()) return Status::Corrupt(parsed.status().message());
  const toml::table& root = *parsed;
  if (root["format_version"].value<int64_t>() != std::optional<int64_t>(1))
    return Status::Corrupt(source + ": not a framegate calibration (format_version = 1 expected)");
  Calibration c;
  c.source = source;
  static const std::set<std::string> kTop = {
      "format_version", "pipeline",   "weights",      "fault",         "config",      "framegate_version",
      "created_at",     "multiplier", "model_sha256", "golden_sha256", "noise_floor", "policy"};
  for (const auto& [key, v] : root) {
    if (!kTop.count(std::string(key.str())))
      return Status::Corrupt(TomlPlace(source, v.source()) + ": unknown key '" + std::string(key.str()) +
                             "'");
  }
  for (auto [key, field] : {std::pair<const char*, std::string*>{"pipeline", &c.pipeline},
                            {"weights", &c.weights},
                            {"fault", &c.fault},
                            {"config", &c.config},
                            {"framegate_version", &c.framegate_version},
                            {"created_at", &c.created_at}}) {
    const std::optional<std::string> value = root[key].value<std::string>();
    if (!value) return Status::Corrupt(source + ": " + key + " must be a string");
    *field = *value;
  }
  const std::optional<double> multiplier = root["multiplier"].value<double>();
  if (!multiplier || !(*multiplier >= 1))
    return Status::Corrupt(source + ": multiplier must be a number >= 1");
  c.multiplier = *multiplier;
  FG_RETURN_IF_ERROR(ReadStringMap(root, "model_sha256", source, &c.model_sha256));
  FG_RETURN_IF_ERROR(ReadStringMap(root, "golden_sha256", source, &c.golden_sha256));
  if (const toml::table* noise = root["noise_floor"].as_table()) {
    FG_RETURN_IF_ERROR(ReadMetrics(*noise, source, {"runs", "step_rel_l2"}, &c.noise_floor));
    if (const toml::node* step = noise->get("step_rel_l2")) {
      const std::optional<double> v = step->value<double>();
      if (!v || !(*v >= 0))
        return Status::Corrupt(TomlPlace(source, step->source()) + ": step_rel_l2 must be a number >= 0");
      c.noise_step_rel_l2 = *v;
    }
    if (const toml::array* runs = (*noise)["runs"].as_array()) {
      for (const toml::node& run : *runs) c.noise_runs.push_back(run.value_or(std::string()));
    }
  }
  FG_RETURN_IF_ERROR(ReadPolicies(root, source, &c));
  return c;
}

StatusOr<Calibration> ReadCalibrationFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": no calibration");
  std::stringstream text;
  text << in.rdbuf();
  return ParseCalibration(text.str(), path);
}

StatusOr<ToleranceProfile> ModelTomlProfile(const std::string& model_toml_path, const std::string& policy) {
  std::ifstream in(model_toml_path);
  if (!in) return Status::NotFound(model_toml_path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<std::vector<ToleranceProfile>> profiles =
      ParseToleranceSection(text.str(), model_toml_path, "tolerance");
  if (!profiles.ok()) return profiles.status();
  for (ToleranceProfile& p : *profiles) {
    if (p.name == policy) {
      p.name = "model.toml [tolerance." + policy + "]";
      return p;
    }
  }
  return Status::NotFound(model_toml_path + ": no [tolerance." + policy + "]");
}

}  // namespace framegate
