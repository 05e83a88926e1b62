#include "harness/store/regression_points.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <string_view>

namespace framegate {
namespace {

// Cell ids are 16 hex digits (Cell::Id()); keys by value avoid hashing strings per row.
// Other ids (from a migrated v1 file) get numbers above 2^64 - 2^32 from `others`.
class CellKeys {
 public:
  uint64_t Key(std::string_view id) {
    uint64_t key = 0;
    bool hex = id.size() == 16;
    for (size_t i = 0; hex && i < 16; ++i) {
      const char c = id[i];
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      hex = digit >= 0;
      key = key << 4 | static_cast<uint64_t>(digit < 0 ? 0 : digit);
    }
    if (hex) return key;
    auto [it, added] = others_.try_emplace(std::string(id), ~uint64_t{0} - others_.size());
    return it->second;
  }

 private:
  std::unordered_map<std::string, uint64_t> others_;
};

struct SpecFacts {
  std::string cell_id, family;
  int device = 0;  // index into the interned device strings
};

struct Specs {
  CellKeys keys;
  std::unordered_map<uint64_t, int> index;  // cell key -> facts
  std::vector<SpecFacts> facts;
  std::vector<std::string> devices;  // interned device strings
};

// "reference:tiny cuda fp16 seed=3" (the device index dropped).
std::string Family(const std::string& pipeline, const std::string& device,
                   const std::string& policy, int64_t seed, const std::string& fault) {
  const std::string kind = device.substr(0, device.find(':'));
  std::string family = pipeline + " " + kind + " " + policy + " seed=" + std::to_string(seed);
  if (!fault.empty()) family += " fault=" + fault;
  return family;
}

Status LoadSpecs(SqliteDb& db, Specs* specs) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare("SELECT cell_id, pipeline, device, policy, seed, fault FROM cell_specs");
  if (!stmt.ok()) return stmt.status();
  std::map<std::string, int> devices;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    const std::string device = stmt->Text(2);
    auto [d, added] = devices.try_emplace(device, static_cast<int>(specs->devices.size()));
    if (added) specs->devices.push_back(device);
    specs->index[specs->keys.Key(stmt->TextView(0))] = static_cast<int>(specs->facts.size());
    specs->facts.push_back(
        {stmt->Text(0),
         Family(stmt->Text(1), device, stmt->Text(3), stmt->Int(4), stmt->Text(5)), d->second});
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

// For one run: the model index of each interned device (its devices' names, or the device
// string itself when the run did not record the device).
Status LoadModels(SqliteStatement& stmt, const std::string& run_id, const Specs& specs,
                  std::map<std::string, int>* model_index, std::vector<std::string>* models,
                  std::vector<int>* by_device) {
  std::map<std::string, std::string> names;
  stmt.Bind(1, run_id);
  for (;;) {
    StatusOr<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    names[stmt.Text(0)] = stmt.Text(1);
  }
  stmt.Reset();
  by_device->clear();
  for (const std::string& device : specs.devices) {
    auto found = names.find(device);
    const std::string model =
        found != names.end() && !found->second.empty() ? found->second : device;
    auto [it, added] = model_index->try_emplace(model, static_cast<int>(models->size()));
    if (added) models->push_back(model);
    by_device->push_back(it->second);
  }
  return Status::Ok();
}

// The smallest cells.id of the loaded runs: the scan starts there.
StatusOr<int64_t> FirstCellRow(SqliteDb& db, const std::vector<SeriesRun>& runs) {
  StatusOr<SqliteStatement> stmt = db.Prepare("SELECT min(id) FROM cells WHERE run_id = ?");
  if (!stmt.ok()) return stmt.status();
  int64_t first = INT64_MAX;
  for (const SeriesRun& run : runs) {
    StatusOr<bool> row = stmt->Bind(1, run.run_id).Step();
    if (!row.ok()) return row.status();
    if (!stmt->IsNull(0)) first = std::min(first, stmt->Int(0));
    stmt->Reset();
  }
  return first;
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
  Specs specs;
  FG_RETURN_IF_ERROR(LoadSpecs(db, &specs));
  StatusOr<SqliteStatement> devices =
      db.Prepare("SELECT device, name FROM devices WHERE run_id = ?");
  if (!devices.ok()) return devices.status();
  std::map<std::string, int> model_index;
  std::vector<std::string> models;
  std::vector<std::vector<int>> run_models(data.runs.size());  // [run][device] -> model
  std::unordered_map<std::string, int> run_index;
  for (size_t r = 0; r < data.runs.size(); ++r) {
    run_index[data.runs[r].run_id] = static_cast<int>(r);
    FG_RETURN_IF_ERROR(LoadModels(*devices, data.runs[r].run_id, specs, &model_index, &models,
                                  &run_models[r]));
  }
  StatusOr<int64_t> first = FirstCellRow(db, data.runs);
  if (!first.ok()) return first.status();
  // One pass over the cells table from the window's first row, in rowid order (cells of a
  // run are mostly contiguous): sequential reads instead of a seek per cell.
  StatusOr<SqliteStatement> cells = db.Prepare(
      "SELECT c.run_id, c.cell_id, c.status, c.latency_median_s, m.min_psnr, m.mean_ssim, "
      "m.rel_l2 FROM cells c LEFT JOIN metrics m ON m.cell_row = c.id WHERE c.id >= ?");
  if (!cells.ok()) return cells.status();
  cells->Bind(1, *first);
  // Per row, without hashing in the common case: the cell at position i of a run is
  // usually the cell at position i of the previous run (runs record their matrix in the
  // same order), and (spec, model) -> series is a flat table.
  const size_t model_count = std::max<size_t>(models.size(), 1);
  std::vector<int> series_at(specs.facts.size() * model_count, -1);
  std::vector<uint64_t> slot_key;
  std::vector<int> slot_spec;
  size_t position = 0;
  std::string last_run;
  int run = -1;
  bool sorted = true;
  std::vector<int> last_point_run;
  for (;;) {
    StatusOr<bool> row = cells->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (cells->TextView(0) != last_run) {
      last_run = std::string(cells->TextView(0));
      auto found = run_index.find(last_run);
      run = found == run_index.end() ? -1 : found->second;
      position = 0;
    }
    if (run < 0) continue;  // a run outside the window
    const uint64_t key = specs.keys.Key(cells->TextView(1));
    if (position >= slot_key.size()) {
      slot_key.resize(position + 1, ~uint64_t{0});
      slot_spec.resize(position + 1, -1);
    }
    if (slot_key[position] != key || slot_spec[position] < 0) {
      auto spec = specs.index.find(key);
      slot_key[position] = key;
      slot_spec[position] = spec == specs.index.end() ? -1 : spec->second;
    }
    const int spec = slot_spec[position++];
    if (spec < 0) continue;  // no spec: not written by this store
    const SpecFacts& facts = specs.facts[static_cast<size_t>(spec)];
    const int model = run_models[static_cast<size_t>(run)][static_cast<size_t>(facts.device)];
    int& series = series_at[static_cast<size_t>(spec) * model_count + static_cast<size_t>(model)];
    if (series < 0) {
      series = static_cast<int>(data.series.size());
      data.series.push_back({facts.cell_id, models[static_cast<size_t>(model)], facts.family, {}});
      data.series.back().points.reserve(data.runs.size());
      last_point_run.push_back(-1);
      data.family_models[facts.family].push_back(models[static_cast<size_t>(model)]);
    }
    SeriesPoint point;
    point.run = run;
    point.status = ParseStatus(cells->TextView(2)).value_or(CellStatus::kUnresolved);
    point.latency = cells->Real(3);
    point.min_psnr = cells->Real(4);
    point.mean_ssim = cells->Real(5);
    point.rel_l2 = cells->Real(6);
    sorted = sorted && last_point_run[static_cast<size_t>(series)] <= run;
    last_point_run[static_cast<size_t>(series)] = run;
    data.series[static_cast<size_t>(series)].points.push_back(point);
  }
  if (!sorted) {  // runs were written out of time order (a merge): put points in run order
    for (Series& s : data.series) {
      std::stable_sort(s.points.begin(), s.points.end(),
                       [](const SeriesPoint& a, const SeriesPoint& b) { return a.run < b.run; });
    }
  }
  for (auto& [family, names] : data.family_models) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  return data;
}

}  // namespace framegate
