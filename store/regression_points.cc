#include "store/regression_points.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <new>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <sys/mman.h>

#include <nlohmann/json.hpp>

#include "store/packed_points.h"

namespace framegate {
namespace {

struct SpecFacts {
  std::string cell_id;
  int family = 0;  // index into Specs::families
  int device = 0;  // index into Specs::devices
};

// Interns strings: equal strings get one index.
class Interned {
 public:
  int Index(const std::string& text) {
    auto [it, added] = index_.try_emplace(text, static_cast<int>(names_.size()));
    if (added) names_.push_back(text);
    return it->second;
  }
  const std::vector<std::string>& names() const { return names_; }
  std::vector<std::string> TakeNames() { return std::move(names_); }

 private:
  std::unordered_map<std::string, int> index_;
  std::vector<std::string> names_;
};

struct Specs {
  std::unordered_map<std::string, int> index;  // cell id -> facts
  std::vector<SpecFacts> facts;
  Interned families, devices;
};

// Sets *family to "reference:tiny cuda fp16 seed=3" (the device index dropped).
void SetFamily(std::string_view pipeline, std::string_view device, std::string_view policy, int64_t seed,
               std::string_view fault, std::string* family) {
  family->assign(pipeline).append(" ").append(device.substr(0, device.find(':')));
  family->append(" ").append(policy).append(" seed=").append(std::to_string(seed));
  if (!fault.empty()) family->append(" fault=").append(fault);
}

Status LoadSpecs(SqliteDb& db, Specs* specs) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare("SELECT cell_id, pipeline, device, policy, seed, fault FROM cell_specs");
  if (!stmt.ok()) return stmt.status();
  std::string family, device;  // reused: no allocation per row once interned
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    device.assign(stmt->TextView(2));
    SetFamily(stmt->TextView(1), device, stmt->TextView(3), stmt->Int(4), stmt->TextView(5), &family);
    SpecFacts facts{stmt->Text(0), specs->families.Index(family), specs->devices.Index(device)};
    specs->index.emplace(facts.cell_id, static_cast<int>(specs->facts.size()));
    specs->facts.push_back(std::move(facts));
  }
}

// The fingerprint text of the run at `stmt`'s row (LoadRuns' columns 4, 5 and 8..11:
// libtorch_version, cuda_version, host, blas, fingerprint JSON, the devices' drivers).
std::string RowFingerprint(const SqliteStatement& stmt) {
  std::map<std::string, std::string> fields = {{"libtorch_version", stmt.Text(4)},
                                               {"cuda_version", stmt.Text(5)},
                                               {"host", stmt.Text(8)},
                                               {"blas", stmt.Text(9)},
                                               {"driver", stmt.Text(11)}};
  const nlohmann::json extra = nlohmann::json::parse(stmt.Text(10), nullptr, /*allow_exceptions=*/false);
  if (extra.is_object()) {
    for (const auto& [key, value] : extra.items()) {
      fields[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }
  return FingerprintText(fields);
}

Status LoadRuns(SqliteDb& db, const std::string& since, const BaselineChoice& baseline,
                std::vector<SeriesRun>* runs) {
  StatusOr<SqliteStatement> stmt = db.Prepare(
      "SELECT run_id, started_at, git_sha, tags, libtorch_version, cuda_version, "
      "started_at >= ?1, instr(',' || tags || ',', ',' || ?2 || ',') > 0, host, blas, fingerprint, "
      "(SELECT coalesce(group_concat(DISTINCT driver), '') FROM devices d WHERE d.run_id = runs.run_id) "
      "FROM runs "
      "WHERE started_at >= ?1 OR run_id = ?3 OR instr(',' || tags || ',', ',' || ?2 || ',') "
      "> 0 ORDER BY started_at, run_id");
  if (!stmt.ok()) return stmt.status();
  const bool tag = baseline.kind == BaselineChoice::Kind::kTag;
  const bool run = baseline.kind == BaselineChoice::Kind::kRun;
  stmt->Bind(1, since).Bind(2, tag ? baseline.name : std::string("\x01"));
  stmt->Bind(3, run ? baseline.name : std::string());
  Interned environments;
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    SeriesRun r;
    r.run_id = stmt->Text(0);
    r.started_at = stmt->Text(1);
    r.git_sha = stmt->Text(2);
    r.tags = stmt->Text(3);
    r.fingerprint = RowFingerprint(*stmt);
    r.environment = environments.Index(r.fingerprint);
    r.in_window = stmt->Int(6) != 0;
    r.tagged = stmt->Int(7) != 0;
    runs->push_back(std::move(r));
  }
}

// For one run: the model index of each interned device (its devices' names, or the device
// string itself when the run did not record the device).
Status LoadModels(SqliteStatement& stmt, const std::string& run_id, const Specs& specs, Interned* models,
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
  for (const std::string& device : specs.devices.names()) {
    auto found = names.find(device);
    const std::string model = found != names.end() && !found->second.empty() ? found->second : device;
    by_device->push_back(models->Index(model));
  }
  return Status::Ok();
}

// A point of a run resolved to its cell spec (index into Specs::facts): what a run gives a
// series point, in 48 bytes (the window's 300k of them are all held at once).
struct RawPoint {
  int spec = 0;
  CellStatus status = CellStatus::kPass;
  double latency = 0, min_psnr = 0, mean_ssim = 0, rel_l2 = 0;
  int64_t recorded = 0;
};

// Reads the points of runs [begin, end) through `db` into (*out)[run]: a run's packed_points
// blob when it has one, else its series_points rows (one range scan); points without a
// spec (not written by this store) are dropped. Per point, without hashing in the common
// case: the cell at position i of a run is usually the cell at position i of the previous
// run (both come in cell id order).
Status ReadRunPoints(SqliteDb& db, const std::vector<SeriesRun>& runs, size_t begin, size_t end,
                     const Specs& specs, std::vector<std::vector<RawPoint>>* out) {
  StatusOr<SqliteStatement> packed = db.Prepare("SELECT points FROM packed_points WHERE run_id = ?");
  if (!packed.ok()) return packed.status();
  StatusOr<SqliteStatement> rows = db.Prepare(kRunPointsSql);
  if (!rows.ok()) return rows.status();
  struct Slot {  // a position's cell id (16 hex digits; other ids are looked up each time)
    std::array<char, 16> id{};
    int spec = -2;  // -2: empty
  };
  std::vector<Slot> slots;
  std::string last_status_name;  // most points repeat the previous point's status
  CellStatus last_status = CellStatus::kUnresolved;
  std::vector<RawPoint>* run_points = nullptr;
  auto add = [&](size_t position, const PackedPoint& point) {
    if (position >= slots.size()) slots.resize(position + 1);
    Slot& slot = slots[position];
    const bool cacheable = point.cell_id.size() == slot.id.size();
    int spec;
    if (cacheable && slot.spec != -2 &&
        std::memcmp(slot.id.data(), point.cell_id.data(), slot.id.size()) == 0) {
      spec = slot.spec;
    } else {
      auto found = specs.index.find(std::string(point.cell_id));
      spec = found == specs.index.end() ? -1 : found->second;
      if (cacheable) {
        std::memcpy(slot.id.data(), point.cell_id.data(), slot.id.size());
        slot.spec = spec;
      }
    }
    if (spec < 0) return;
    if (point.status != last_status_name) {
      last_status_name = std::string(point.status);
      last_status = ParseStatus(last_status_name).value_or(CellStatus::kUnresolved);
    }
    run_points->push_back({spec, last_status, point.latency_median_s, point.min_psnr, point.mean_ssim,
                           point.rel_l2, point.cell_row});
  };
  for (size_t run = begin; run < end; ++run) {
    run_points = &(*out)[run];
    run_points->reserve(slots.size());  // most runs hold the cells of the run before
    StatusOr<bool> has_pack = packed->Bind(1, runs[run].run_id).Step();
    if (!has_pack.ok()) return has_pack.status();
    if (*has_pack) {
      StatusOr<PackedPointsReader> reader =
          PackedPointsReader::Open(packed->BlobView(0), db.path() + ": run " + runs[run].run_id);
      if (!reader.ok()) return reader.status();
      PackedPoint point;
      for (size_t position = 0;; ++position) {
        StatusOr<bool> more = reader->Next(&point);
        if (!more.ok()) return more.status();
        if (!*more) break;
        add(position, point);
      }
      packed->Reset();
      continue;
    }
    packed->Reset();
    SqliteStatement& row_of = rows->Bind(1, runs[run].run_id);
    for (size_t position = 0;; ++position) {
      StatusOr<bool> row = row_of.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      add(position, PointOfRow(row_of));
    }
    row_of.Reset();
  }
  return Status::Ok();
}

}  // namespace

static_assert(std::is_trivially_destructible_v<SeriesPoint>, "SeriesPointArray frees without destroying");
void SeriesPointsFree::operator()(SeriesPoint* points) const { std::free(points); }

SeriesPointArray AllocateSeriesPoints(size_t count) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bytes = std::max<size_t>(count * sizeof(SeriesPoint), 1);
  const bool huge = bytes >= kHugePage;
  // aligned_alloc wants a multiple of the alignment.
  void* memory = huge ? std::aligned_alloc(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage)
                      : std::malloc(bytes);
  if (memory == nullptr) throw std::bad_alloc();
  if (huge) (void)madvise(memory, bytes, MADV_HUGEPAGE);  // advice only: fine when refused
  auto* points = static_cast<SeriesPoint*>(memory);
  std::uninitialized_default_construct_n(points, count);
  return SeriesPointArray(points);
}

std::string FingerprintText(const std::map<std::string, std::string>& fields) {
  std::string text;
  for (const auto& [key, value] : fields) {
    if (!value.empty()) text.append(key).append("=").append(value).append("\n");
  }
  return text;
}

std::vector<std::string> FingerprintChanges(const std::string& before, const std::string& after) {
  auto parse = [](const std::string& text) {
    std::map<std::string, std::string> fields;
    size_t begin = 0;
    while (begin < text.size()) {
      const size_t end = text.find('\n', begin);
      const std::string line = text.substr(begin, end - begin);
      const size_t eq = line.find('=');
      fields[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
      begin = end == std::string::npos ? text.size() : end + 1;
    }
    return fields;
  };
  std::map<std::string, std::string> a = parse(before), b = parse(after);
  std::vector<std::string> changes;
  for (const auto& [key, value] : b) {
    auto old = a.find(key);
    const std::string was = old == a.end() ? "(none)" : old->second;
    if (was != value) changes.push_back(key + ": " + was + " -> " + value);
  }
  for (const auto& [key, value] : a) {
    if (!b.count(key)) changes.push_back(key + ": " + value + " -> (none)");
  }
  return changes;
}

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

StatusOr<SeriesData> LoadSeries(SqliteDb& db, const std::string& since, const BaselineChoice& baseline) {
  SeriesData data;
  FG_RETURN_IF_ERROR(LoadRuns(db, since, baseline, &data.runs));
  Specs specs;
  FG_RETURN_IF_ERROR(LoadSpecs(db, &specs));
  StatusOr<SqliteStatement> devices = db.Prepare("SELECT device, name FROM devices WHERE run_id = ?");
  if (!devices.ok()) return devices.status();
  Interned models;
  std::vector<std::vector<int>> run_models(data.runs.size());  // [run][device] -> model
  for (size_t r = 0; r < data.runs.size(); ++r) {
    FG_RETURN_IF_ERROR(LoadModels(*devices, data.runs[r].run_id, specs, &models, &run_models[r]));
  }
  // The runs' points: the older half through this connection and, at the same time, the
  // newer half through a second read-only one when the store is a file (both cores). The
  // second reads its own snapshot: only a run still being written can show more cells.
  std::vector<std::vector<RawPoint>> raw(data.runs.size());
  const size_t n = data.runs.size();
  std::unique_ptr<SqliteDb> second;
  if (!db.in_memory() && n >= 2) {
    StatusOr<std::unique_ptr<SqliteDb>> opened = SqliteDb::Open(db.path(), SqliteDb::Mode::kReadOnly);
    if (opened.ok()) second = std::move(*opened);  // else: one connection does it all
  }
  const size_t split = second ? n / 2 : n;
  Status newer_half;
  std::thread worker;
  if (second) {
    worker = std::thread([&] {
      newer_half =
          second->ReadTransaction([&] { return ReadRunPoints(*second, data.runs, split, n, specs, &raw); });
    });
  }
  const Status older_half = ReadRunPoints(db, data.runs, 0, split, specs, &raw);
  if (worker.joinable()) worker.join();
  FG_RETURN_IF_ERROR(older_half);
  FG_RETURN_IF_ERROR(newer_half);

  // Points to series, run by run, oldest first: each series' points come out in time order.
  // (spec, model) -> series and (family, model) are flat tables. A first pass makes the
  // series and counts their points, the second fills one array, series after series.
  const size_t model_count = std::max<size_t>(models.names().size(), 1);
  std::vector<int> series_at(specs.facts.size() * model_count, -1);
  std::vector<char> family_on_model(specs.families.names().size() * model_count, 0);
  std::vector<size_t> start;  // per series: its point count, then where its next point goes
  auto series_of = [&](size_t run, const RawPoint& p) -> int& {
    const SpecFacts& facts = specs.facts[static_cast<size_t>(p.spec)];
    const size_t model = static_cast<size_t>(run_models[run][static_cast<size_t>(facts.device)]);
    return series_at[static_cast<size_t>(p.spec) * model_count + model];
  };
  for (size_t run = 0; run < n; ++run) {
    for (const RawPoint& p : raw[run]) {
      int& series = series_of(run, p);
      if (series < 0) {
        const SpecFacts& facts = specs.facts[static_cast<size_t>(p.spec)];
        const int model = run_models[run][static_cast<size_t>(facts.device)];
        series = static_cast<int>(data.series.size());
        data.series.push_back({facts.cell_id, model, facts.family, facts.device, {}});
        family_on_model[static_cast<size_t>(facts.family) * model_count + static_cast<size_t>(model)] = 1;
        start.push_back(0);
      }
      ++start[static_cast<size_t>(series)];
    }
  }
  size_t total = 0;
  for (size_t count : start) total += count;
  data.point_array = AllocateSeriesPoints(total);
  SeriesPoint* points = data.point_array.get();
  for (size_t i = 0, at = 0; i < data.series.size(); ++i) {
    data.series[i].points = PointSpan(points + at, start[i]);
    const size_t count = start[i];
    start[i] = at;  // from here: where the series' next point goes
    at += count;
  }
  for (size_t run = 0; run < n; ++run) {
    for (const RawPoint& p : raw[run]) {
      SeriesPoint& point = points[start[static_cast<size_t>(series_of(run, p))]++];
      point.run = static_cast<int>(run);
      point.status = p.status;
      point.latency = p.latency;
      point.min_psnr = p.min_psnr;
      point.mean_ssim = p.mean_ssim;
      point.rel_l2 = p.rel_l2;
      point.recorded = p.recorded;
    }
    std::vector<RawPoint>().swap(raw[run]);
  }
  for (size_t f = 0; f < specs.families.names().size(); ++f) {
    std::vector<std::string> on;
    for (size_t m = 0; m < models.names().size(); ++m) {
      if (family_on_model[f * model_count + m]) on.push_back(models.names()[m]);
    }
    std::sort(on.begin(), on.end());
    if (!on.empty()) data.family_models[specs.families.names()[f]] = std::move(on);
  }
  data.device_count = static_cast<int>(specs.devices.names().size());
  data.models = models.TakeNames();
  data.families = specs.families.TakeNames();
  return data;
}

}  // namespace framegate
