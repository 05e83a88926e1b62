#include "store/cell_history.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/cell_result_json.h"
#include "harness/printf.h"

namespace framegate {
namespace {

const char* const kFilterKeys[] = {"cell_id", "pipeline", "size",    "device", "policy",
                                   "seed",    "fault",    "sampler", "steps"};

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// `text` of a measured value `v`; "-" when it was not measured (NaN).
std::string OrDash(double v, const std::string& text) { return std::isnan(v) ? "-" : text; }

}  // namespace

StatusOr<std::vector<std::string>> MatchCellIds(ResultStore& store, const std::string& filter,
                                                int max_cells) {
  std::string where;
  std::vector<std::string> values;
  std::istringstream terms(filter);
  for (std::string term; std::getline(terms, term, ',');) {
    const size_t eq = term.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidInput("--filter '" + filter + "': term '" + term + "' is not KEY=VALUE");
    }
    const std::string key = term.substr(0, eq);
    bool known = false;
    for (const char* k : kFilterKeys) known = known || key == k;
    if (!known) {
      return Status::InvalidInput("--filter '" + filter + "': unknown key '" + key +
                                  "' (cell_id, pipeline, size, device, policy, seed, fault, "
                                  "sampler, steps)");
    }
    where += std::string(where.empty() ? " WHERE " : " AND ") + key + " GLOB ?";
    values.push_back(term.substr(eq + 1));
  }
  if (values.empty()) return Status::InvalidInput("--filter is empty");
  StatusOr<SqliteStatement> stmt =
      store.db().Prepare("SELECT cell_id FROM cell_specs" + where + " ORDER BY cell_id LIMIT ?");
  if (!stmt.ok()) return stmt.status();
  SqliteBinder bind(*stmt);
  for (const std::string& v : values) bind << v;
  bind << max_cells;
  std::vector<std::string> ids;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return ids;
    ids.push_back(stmt->Text(0));
  }
}

nlohmann::json HistoryToJson(const std::string& cell_id, const std::vector<HistoryPoint>& points) {
  nlohmann::json history = nlohmann::json::array();
  for (const HistoryPoint& p : points) {
    const CellResult& r = p.result;
    history.push_back({{"run_id", p.run_id},
                       {"started_at", p.started_at},
                       {"git_sha", p.git_sha},
                       {"host", p.host},
                       {"tags", p.tags},
                       {"device_name", p.device_name},
                       {"status", StatusName(r.status)},
                       {"reason", r.reason},
                       {"policy_used", r.policy_used},
                       {"metrics", r.metrics ? MetricsToJson(*r.metrics) : nlohmann::json()},
                       {"latency_median_s", Number(p.latency_median_s)},
                       {"generation_seconds", r.timings.generation_seconds}});
  }
  const std::string label = points.empty() ? "" : points.back().result.cell.Label();
  return {{"cell_id", cell_id}, {"label", label}, {"history", history}};
}

std::string FormatHistory(const std::string& cell_id, const std::vector<HistoryPoint>& points) {
  std::ostringstream out;
  out << cell_id << "  " << (points.empty() ? "" : points.back().result.cell.Label()) << "  ("
      << points.size() << " run" << (points.size() == 1 ? "" : "s") << ")\n";
  char line[320];
  std::snprintf(line, sizeof(line), "  %-20s %-26s %-12s %-22s %-13s %9s %9s %10s %10s %s\n", "started_at",
                "run_id", "git_sha", "device", "status", "min_psnr", "mean_ssim", "rel_l2", "latency_s",
                "repeats");
  out << line;
  for (const HistoryPoint& p : points) {
    const std::optional<ComparisonMetrics>& m = p.result.metrics;
    const double nan = std::nan("");
    const double psnr = m ? m->video.min_psnr : nan;
    const double ssim = m ? m->video.mean_ssim : nan;
    const double rel_l2 = m ? m->video.rel_l2 : nan;
    std::snprintf(line, sizeof(line), "  %-20s %-26s %-12s %-22s %-13s %9s %9s %10s %10s %zu\n",
                  p.started_at.c_str(), p.run_id.c_str(), p.git_sha.substr(0, 12).c_str(),
                  (p.device_name.empty() ? p.result.cell.device : p.device_name).substr(0, 22).c_str(),
                  StatusName(p.result.status),
                  std::isinf(psnr) ? "inf" : OrDash(psnr, Printf("%.3f", psnr)).c_str(),
                  OrDash(ssim, Printf("%.5f", ssim)).c_str(), OrDash(rel_l2, Printf("%.3g", rel_l2)).c_str(),
                  OrDash(p.latency_median_s, Printf("%.4f", p.latency_median_s)).c_str(),
                  p.result.timings.generation_seconds.size());
    out << line;
  }
  return out.str();
}

}  // namespace framegate
