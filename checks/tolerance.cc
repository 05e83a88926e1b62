#include "checks/tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "harness/toml_source.h"

#include "tolerances_toml.h"

namespace framegate {
namespace {

// The keys of a profile: TOML key -> metric and direction.
struct BoundKey {
  const char* key;
  const char* metric;
  bool is_min;
};
constexpr BoundKey kBoundKeys[] = {
    {"min_psnr", "min_psnr", true},
    {"min_mean_ssim", "mean_ssim", true},
    {"min_ssim", "min_ssim", true},
    {"max_abs", "max_abs", false},
    {"max_rel_l2", "rel_l2", false},
    {"max_temporal_rel_l2", "temporal_rel_l2", false},
    {"min_latent_cosine", "latent_cosine", true},
    {"max_fp64_ratio", "fp64_error_ratio", false},
};

std::string Format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string ToleranceViolation::Reason() const {
  if (std::isnan(value)) return bound.metric + " nan (not a number)";
  return bound.metric + " " + Format(value) + (bound.is_min ? " < " : " > ") + Format(bound.bound);
}

namespace {

// The [NAME] tables of `profiles` (the value of a [profile] or [tolerance] section).
StatusOr<std::vector<ToleranceProfile>> ParseProfileTables(const toml::table& profiles,
                                                           const std::string& source) {
  const auto where = [&](const toml::node& n) { return TomlPlace(source, n.source()) + ": "; };
  std::vector<ToleranceProfile> out;
  for (const auto& [name, table] : profiles) {
    if (!table.is_table()) return Status::InvalidInput(where(table) + "profile must be a table");
    ToleranceProfile profile;
    profile.name = std::string(name.str());
    for (const BoundKey& k : kBoundKeys) {
      const toml::node* v = table.as_table()->get(k.key);
      if (v == nullptr) continue;
      const std::optional<double> number = v->value<double>();
      if (!number) {
        return Status::InvalidInput(where(*v) + "profile '" + profile.name + "': " + k.key +
                                    " must be a number");
      }
      profile.bounds.push_back({k.metric, k.is_min, *number});
    }
    for (const auto& [key, v] : *table.as_table()) {
      bool known = false;
      for (const BoundKey& k : kBoundKeys) known |= key.str() == k.key;
      if (!known) {
        return Status::InvalidInput(where(v) + "profile '" + profile.name + "': unknown key '" +
                                    std::string(key.str()) + "'");
      }
    }
    out.push_back(std::move(profile));
  }
  return out;
}

}  // namespace

StatusOr<std::vector<ToleranceProfile>> ParseToleranceProfiles(const std::string& text,
                                                               const std::string& source) {
  StatusOr<toml::table> parsed = ParseTomlText(text, source);
  if (!parsed.ok()) return parsed.status();
  std::vector<ToleranceProfile> profiles;
  for (const auto& [top, node] : *parsed) {
    if (top.str() != "profile" || !node.is_table()) {
      return Status::InvalidInput(TomlPlace(source, node.source()) + ": unknown key '" +
                                  std::string(top.str()) + "' (expected [profile.NAME] tables)");
    }
    StatusOr<std::vector<ToleranceProfile>> some = ParseProfileTables(*node.as_table(), source);
    if (!some.ok()) return some.status();
    profiles.insert(profiles.end(), some->begin(), some->end());
  }
  return profiles;
}

StatusOr<std::vector<ToleranceProfile>> ParseToleranceSection(const std::string& text,
                                                              const std::string& source,
                                                              const std::string& section) {
  StatusOr<toml::table> parsed = ParseTomlText(text, source);
  if (!parsed.ok()) return parsed.status();
  const toml::node* node = parsed->get(section);
  if (node == nullptr) return std::vector<ToleranceProfile>{};
  if (!node->is_table())
    return Status::InvalidInput(TomlPlace(source, node->source()) + ": " + section + " must be a table of [" +
                                section + ".NAME] tables");
  return ParseProfileTables(*node->as_table(), source);
}

const std::vector<ToleranceProfile>& ShippedToleranceProfiles() {
  static const std::vector<ToleranceProfile> profiles = [] {
    StatusOr<std::vector<ToleranceProfile>> parsed =
        ParseToleranceProfiles(kShippedTolerancesToml, "checks/tolerances.toml");
    if (!parsed.ok()) {
      std::fprintf(stderr, "framegate: internal error: %s\n", parsed.status().message().c_str());
      std::abort();
    }
    return *parsed;
  }();
  return profiles;
}

StatusOr<ToleranceProfile> FindToleranceProfile(const std::string& name) {
  std::string known;
  for (const ToleranceProfile& p : ShippedToleranceProfiles()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  return Status::InvalidInput("unknown tolerance profile '" + name + "' (known: " + known + ")");
}

std::optional<ToleranceViolation> FirstViolation(const ToleranceProfile& profile,
                                                 const ComparisonMetrics& metrics) {
  for (const NamedMetric& m : NamedMetrics(metrics)) {
    if (!metrics.video.ssim_measured && (m.name == "mean_ssim" || m.name == "min_ssim")) continue;
    for (const ToleranceBound& b : profile.bounds) {
      if (b.metric != m.name) continue;
      const bool ok = b.is_min ? m.value >= b.bound : m.value <= b.bound;  // NaN: false
      if (!ok) return ToleranceViolation{b, m.value};
    }
  }
  return std::nullopt;
}

ToleranceProfile AllowingErrorTimes(const ToleranceProfile& profile, double factor) {
  ToleranceProfile wider = profile;
  char name[64];
  std::snprintf(name, sizeof name, " x%g", factor);
  wider.name += name;
  for (ToleranceBound& b : wider.bounds)
    b.bound = ValueOfError(b, ErrorTimes(b, ErrorOf(b, b.bound), factor));
  return wider;
}

double ErrorOf(const ToleranceBound& bound, double value) {
  if (bound.metric == "min_psnr") return std::pow(10.0, -value / 20);  // +inf dB (exact) -> 0
  return bound.is_min ? 1 - value : value;
}

double ValueOfError(const ToleranceBound& bound, double error) {
  if (bound.metric == "min_psnr") return -20 * std::log10(error);
  return bound.is_min ? std::max(1 - error, 0.0) : error;
}

double ErrorTimes(const ToleranceBound& bound, double error, double factor) {
  const bool similarity = bound.is_min && bound.metric != "min_psnr";  // its distance is an error squared
  return (similarity ? factor * factor : factor) * error;
}

double MetricValue(const ComparisonMetrics& metrics, const std::string& name) {
  for (const NamedMetric& m : NamedMetrics(metrics)) {
    if (m.name == name) return m.value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace framegate
