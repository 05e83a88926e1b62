#include "harness/store/regression_points.h"

#include <cmath>
#include <ctime>

namespace framegate {
namespace {

struct SpecFacts {
  std::string family, device;
};

// "reference:tiny cuda fp16 seed=3" (the device index dropped).
std::string Family(const std::string& pipeline, const std::string& device,
                   const std::string& policy, int64_t seed, const std::string& fault) {
  const std::string kind = device.substr(0, device.find(':'));
  std::string family = pipeline + " " + kind + " " + policy + " seed=" + std::to_string(seed);
  if (!fault.empty()) family += " fault=" + fault;
  return family;
}

StatusOr<std::unordered_map<std::string, SpecFacts>> LoadSpecs(SqliteDb& db) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare("SELECT cell_id, pipeline, device, policy, seed, fault FROM cell_specs");
  if (!stmt.ok()) return stmt.status();
  std::unordered_map<std::string, SpecFacts> specs;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return specs;
    specs[stmt->Text(0)] = {
        Family(stmt->Text(1), stmt->Text(2), stmt->Text(3), stmt->Int(4), stmt->Text(5)),
        stmt->Text(2)};
  }
}

Status LoadRuns(SqliteDb& db, const std::string& since, const BaselineChoice& baseline,
                std::vector<SeriesRun>* runs) {
  StatusOr<SqliteStatement> stmt = db.Prepare(
      "SELECT run_id, started_at, git_sha, tags, libtorch_version, cuda_version, "
      "started_at >= ?1, instr(',' || tags || ',', ',' || ?2 || ',') > 0 FROM runs "
      "WHERE started_at >= ?1 OR run_id = ?3 OR instr(',' || tags || ',', ',' || ?2 || ',') "
      "> 0 ORDER BY started_at, run_id");
  if (!stmt.ok()) return stmt.status();
  const bool tag = baseline.kind == BaselineChoice::Kind::kTag;
  const bool run = baseline.kind == BaselineChoice::Kind::kRun;
  stmt->Bind(1, since).Bind(2, tag ? baseline.name : std::string("\x01"));
  stmt->Bind(3, run ? baseline.name : std::string());
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    SeriesRun r;
    r.run_id = stmt->Text(0);
    r.started_at = stmt->Text(1);
    r.git_sha = stmt->Text(2);
    r.tags = stmt->Text(3);
    r.environment = r.git_sha + "|" + stmt->Text(4) + "|" + stmt->Text(5);
    r.in_window = stmt->Int(6) != 0;
    r.tagged = stmt->Int(7) != 0;
    runs->push_back(std::move(r));
  }
}

// device -> model name for one run.
StatusOr<std::map<std::string, std::string>> LoadModels(SqliteStatement& stmt,
                                                        const std::string& run_id) {
  std::map<std::string, std::string> models;
  stmt.Bind(1, run_id);
  for (;;) {
    StatusOr<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    models[stmt.Text(0)] = stmt.Text(1);
  }
  stmt.Reset();
  return models;
}

}  // namespace

std::string DaysBefore(const std::string& iso, int days) {
  std::tm tm{};
  if (iso.size() < 10 || strptime(iso.substr(0, 10).c_str(), "%Y-%m-%d", &tm) == nullptr) {
    return "";
  }
  const std::time_t t = timegm(&tm) - static_cast<std::time_t>(days) * 86400;
  std::tm out;
  gmtime_r(&t, &out);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", &out);
  return text;
}

bool IsIsoDate(const std::string& since) {
  std::tm tm{};
  const char* end = since.size() >= 10 ? strptime(since.c_str(), "%Y-%m-%d", &tm) : nullptr;
  return end != nullptr && end == since.c_str() + 10;
}

StatusOr<BaselineChoice> ResolveBaseline(SqliteDb& db, const std::string& baseline) {
  if (baseline == "last-good") return BaselineChoice{};
  StatusOr<SqliteStatement> stmt = db.Prepare(
      "SELECT (SELECT count(*) FROM runs WHERE run_id = ?1), (SELECT count(*) FROM runs "
      "WHERE instr(',' || tags || ',', ',' || ?1 || ',') > 0)");
  if (!stmt.ok()) return stmt.status();
  StatusOr<bool> row = stmt->Bind(1, baseline).Step();
  if (!row.ok()) return row.status();
  if (stmt->Int(0) > 0) return BaselineChoice{BaselineChoice::Kind::kRun, baseline};
  if (stmt->Int(1) > 0) return BaselineChoice{BaselineChoice::Kind::kTag, baseline};
  return Status::InvalidInput(db.path() + ": --baseline '" + baseline +
                              "' is not last-good, a run id or a tag of any run");
}

StatusOr<std::string> NewestRunStart(SqliteDb& db) {
  StatusOr<SqliteStatement> stmt = db.Prepare("SELECT coalesce(max(started_at), '') FROM runs");
  if (!stmt.ok()) return stmt.status();
  StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return stmt->Text(0);
}

StatusOr<SeriesData> LoadSeries(SqliteDb& db, const std::string& since,
                                const BaselineChoice& baseline) {
  SeriesData data;
  FG_RETURN_IF_ERROR(LoadRuns(db, since, baseline, &data.runs));
  StatusOr<std::unordered_map<std::string, SpecFacts>> specs = LoadSpecs(db);
  if (!specs.ok()) return specs.status();
  StatusOr<SqliteStatement> devices =
      db.Prepare("SELECT device, name FROM devices WHERE run_id = ?");
  StatusOr<SqliteStatement> cells = db.Prepare(
      "SELECT c.cell_id, c.status, c.latency_median_s, m.min_psnr, m.mean_ssim, m.rel_l2 "
      "FROM cells c LEFT JOIN metrics m ON m.cell_row = c.id WHERE c.run_id = ?");
  if (!devices.ok()) return devices.status();
  if (!cells.ok()) return cells.status();
  std::unordered_map<std::string, size_t> index;  // cell_id + '\n' + model -> series
  std::map<std::string, std::map<std::string, bool>> family_models;
  for (size_t r = 0; r < data.runs.size(); ++r) {
    StatusOr<std::map<std::string, std::string>> models = LoadModels(*devices, data.runs[r].run_id);
    if (!models.ok()) return models.status();
    cells->Bind(1, data.runs[r].run_id);
    for (;;) {
      StatusOr<bool> row = cells->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      const std::string cell_id = cells->Text(0);
      const SpecFacts& spec = (*specs)[cell_id];
      auto model_it = models->find(spec.device);
      const std::string model = model_it != models->end() && !model_it->second.empty()
                                    ? model_it->second
                                    : spec.device;
      auto [it, added] = index.try_emplace(cell_id + '\n' + model, data.series.size());
      if (added) {
        data.series.push_back({cell_id, model, spec.family, {}});
        family_models[spec.family][model] = true;
      }
      SeriesPoint point;
      point.run = static_cast<int>(r);
      point.status = ParseStatus(cells->Text(1)).value_or(CellStatus::kUnresolved);
      point.latency = cells->Real(2);
      point.min_psnr = cells->Real(3);
      point.mean_ssim = cells->Real(4);
      point.rel_l2 = cells->Real(5);
      data.series[it->second].points.push_back(point);
    }
    cells->Reset();
  }
  for (const auto& [family, models] : family_models) {
    for (const auto& [model, unused] : models) data.family_models[family].push_back(model);
  }
  return data;
}

}  // namespace framegate
