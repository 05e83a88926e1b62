#include "store/run_compare.h"

#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

#include "store/cell_rows.h"
#include "store/mann_whitney.h"
#include "store/regression_points.h"

namespace framegate {
namespace {

struct AccuracyMetric {
  const char* name;
  bool higher_is_better;
  double (*value)(const ComparisonMetrics&);
  int history_column;  // in the noise query
};

const AccuracyMetric kAccuracyMetrics[] = {
    {"min_psnr", true, [](const ComparisonMetrics& m) { return m.video.min_psnr; }, 0},
    {"mean_ssim", true, [](const ComparisonMetrics& m) { return m.video.mean_ssim; }, 1},
    {"rel_l2", false, [](const ComparisonMetrics& m) { return m.video.rel_l2; }, 2},
};

double Floor(const AccuracyMetric& metric, double a) {
  if (std::string(metric.name) == "min_psnr") return kPsnrFloorDb;
  if (std::string(metric.name) == "mean_ssim") return kSsimFloor;
  return kRelL2RelativeFloor * std::fabs(a);
}

// The metric values of each cell over the runs of B's matrix in the kNoiseDays days
// before B, per device model: loaded once, only when a change needs a noise band.
class NoiseHistory {
 public:
  NoiseHistory(SqliteDb& db, RunInfo b, int per_cell) : db_(db), b_(std::move(b)), per_cell_(per_cell) {}

  // Standard deviation of metric `column` (0 min_psnr, 1 mean_ssim, 2 rel_l2) of the cell
  // on that device model, over its last `per_cell` results; 0 with fewer than 3.
  StatusOr<double> Sigma(const std::string& cell_id, const std::string& model, int column) {
    if (!loaded_) FG_RETURN_IF_ERROR(Load());
    auto found = values_.find(cell_id + '\n' + model);
    if (found == values_.end()) return 0.0;
    std::vector<double> v;
    for (const auto& point : found->second) {  // newest run first
      if (std::isfinite(point[static_cast<size_t>(column)])) v.push_back(point[static_cast<size_t>(column)]);
      if (static_cast<int>(v.size()) == per_cell_) break;
    }
    if (v.size() < 3) return 0.0;
    double mean = 0, sum_sq = 0;
    for (double x : v) mean += x / static_cast<double>(v.size());
    for (double x : v) sum_sq += (x - mean) * (x - mean);
    return std::sqrt(sum_sq / static_cast<double>(v.size() - 1));
  }

 private:
  static constexpr int kNoiseDays = 30;

  Status Load() {
    loaded_ = true;
    StatusOr<SqliteStatement> runs = db_.Prepare(
        "SELECT run_id FROM runs WHERE started_at < ?1 AND started_at >= ?2 AND run_id <> ?3 "
        "AND matrix_sha256 = ?4 ORDER BY started_at DESC, run_id DESC");
    StatusOr<SqliteStatement> cells = db_.Prepare(
        "SELECT c.cell_id, s.device, m.min_psnr, m.mean_ssim, m.rel_l2 FROM cells c "
        "JOIN cell_specs s ON s.cell_id = c.cell_id JOIN metrics m ON m.cell_row = c.id "
        "WHERE c.run_id = ?");
    StatusOr<SqliteStatement> devices = db_.Prepare("SELECT device, name FROM devices WHERE run_id = ?");
    if (!runs.ok()) return runs.status();
    if (!cells.ok()) return cells.status();
    if (!devices.ok()) return devices.status();
    SqliteBinder(*runs) << b_.started_at << DaysBefore(b_.started_at, kNoiseDays) << b_.run_id
                        << b_.matrix_sha256;
    std::vector<std::string> run_ids;
    for (StatusOr<bool> row = runs->Step(); row.ok() && *row; row = runs->Step()) {
      run_ids.push_back(runs->Text(0));
    }
    for (const std::string& run_id : run_ids) {
      std::map<std::string, std::string> names;
      devices->Bind(1, run_id);
      for (StatusOr<bool> row = devices->Step(); row.ok() && *row; row = devices->Step()) {
        names[devices->Text(0)] = devices->Text(1);
      }
      devices->Reset();
      cells->Bind(1, run_id);
      for (;;) {
        StatusOr<bool> row = cells->Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        auto name = names.find(cells->Text(1));
        values_[cells->Text(0) + '\n' + (name == names.end() ? "" : name->second)].push_back(
            {cells->Real(2), cells->Real(3), cells->Real(4)});
      }
      cells->Reset();
    }
    return Status::Ok();
  }

  SqliteDb& db_;
  RunInfo b_;
  int per_cell_;
  bool loaded_ = false;
  std::unordered_map<std::string, std::vector<std::array<double, 3>>> values_;
};

std::map<std::string, std::string> DeviceNames(const RunRecord& run) {
  std::map<std::string, std::string> names;
  for (const DeviceInfo& d : run.devices) names[d.device] = d.name;
  return names;
}

CellChange BaseChange(ChangeKind kind, const CellResult& a, const CellResult& b) {
  CellChange change;
  change.kind = kind;
  change.cell_id = b.cell.Id();
  change.label = b.cell.Label();
  change.status_a = StatusName(a.status);
  change.status_b = StatusName(b.status);
  change.reason_b = b.reason;
  return change;
}

std::optional<CellChange> StatusChange(const CellResult& a, const CellResult& b) {
  if (a.status == b.status) return std::nullopt;
  const bool fail_a = IsFailure(a.status), fail_b = IsFailure(b.status);
  ChangeKind kind = ChangeKind::kStatusChanged;
  if (!fail_a && fail_b) kind = ChangeKind::kNewlyFailing;
  if (fail_a && !fail_b) kind = ChangeKind::kNewlyPassing;
  return BaseChange(kind, a, b);
}

std::optional<CellChange> LatencyChange(const CellResult& a, const CellResult& b,
                                        const CompareOptions& options) {
  const std::vector<double>& ra = a.timings.generation_seconds;
  const std::vector<double>& rb = b.timings.generation_seconds;
  if (ra.empty() || rb.empty()) return std::nullopt;
  const double median_a = Median(ra), median_b = Median(rb);
  const double effect = median_b / median_a - 1;
  const MannWhitneyResult test = MannWhitneyU(ra, rb);
  if (!(test.p_value < options.alpha) || !(std::fabs(effect) >= options.min_effect)) {
    return std::nullopt;
  }
  CellChange change = BaseChange(effect > 0 ? ChangeKind::kSlower : ChangeKind::kFaster, a, b);
  change.metric = "latency_median_s";
  change.value_a = median_a;
  change.value_b = median_b;
  change.p_value = test.p_value;
  change.repeats_a = static_cast<int>(ra.size());
  change.repeats_b = static_cast<int>(rb.size());
  return change;
}

// Accuracy changes of one cell beyond its noise band.
Status AccuracyChanges(const CellResult& a, const CellResult& b, const std::string& device_name,
                       NoiseHistory& noise, std::vector<CellChange>* changes) {
  if (!a.metrics || !b.metrics) return Status::Ok();
  for (const AccuracyMetric& metric : kAccuracyMetrics) {
    const double va = metric.value(*a.metrics), vb = metric.value(*b.metrics);
    if (std::isnan(va) || std::isnan(vb) || va == vb) continue;
    bool worse = metric.higher_is_better ? vb < va : vb > va;
    double band = 0;
    if (std::isfinite(va) && std::isfinite(vb)) {
      band = Floor(metric, va);
      if (std::fabs(vb - va) <= band) continue;
      StatusOr<double> sigma = noise.Sigma(b.cell.Id(), device_name, metric.history_column);
      if (!sigma.ok()) return sigma.status();
      band = std::max(band, 3 * *sigma);
      if (std::fabs(vb - va) <= band) continue;
    }  // a PSNR going to or from +inf (identical frames) always counts
    CellChange change = BaseChange(worse ? ChangeKind::kAccuracyWorse : ChangeKind::kAccuracyBetter, a, b);
    change.metric = metric.name;
    change.value_a = va;
    change.value_b = vb;
    change.band = band;
    changes->push_back(change);
  }
  return Status::Ok();
}

}  // namespace

const char* ChangeKindName(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kNewlyFailing:
      return "newly_failing";
    case ChangeKind::kNewlyPassing:
      return "newly_passing";
    case ChangeKind::kStatusChanged:
      return "status_changed";
    case ChangeKind::kAccuracyWorse:
      return "accuracy_worse";
    case ChangeKind::kAccuracyBetter:
      return "accuracy_better";
    case ChangeKind::kSlower:
      return "slower";
    case ChangeKind::kFaster:
      return "faster";
    case ChangeKind::kOnlyInA:
      return "only_in_a";
    case ChangeKind::kOnlyInB:
      return "only_in_b";
  }
  return "unknown";
}

bool IsRegression(ChangeKind kind) {
  return kind == ChangeKind::kNewlyFailing || kind == ChangeKind::kAccuracyWorse ||
         kind == ChangeKind::kSlower;
}

int RunComparison::regressions() const {
  int count = 0;
  for (const CellChange& change : changes) count += IsRegression(change.kind);
  return count;
}

StatusOr<RunComparison> CompareRuns(ResultStore& store, const std::string& run_a, const std::string& run_b,
                                    const CompareOptions& options) {
  StatusOr<RunRecord> a = store.LoadRun(run_a);
  if (!a.ok()) return a.status();
  StatusOr<RunRecord> b = store.LoadRun(run_b);
  if (!b.ok()) return b.status();
  NoiseHistory noise(store.db(), b->info, options.noise_history);
  RunComparison out;
  out.a = a->info;
  out.b = b->info;
  std::map<std::string, const CellResult*> in_a;
  for (const CellResult& r : a->cells) in_a[r.cell.Id()] = &r;
  const std::map<std::string, std::string> names_b = DeviceNames(*b);
  for (const CellResult& rb : b->cells) {
    auto found = in_a.find(rb.cell.Id());
    if (found == in_a.end()) {
      out.changes.push_back(BaseChange(ChangeKind::kOnlyInB, rb, rb));
      continue;
    }
    const CellResult& ra = *found->second;
    in_a.erase(found);
    ++out.cells_compared;
    if (std::optional<CellChange> c = StatusChange(ra, rb)) out.changes.push_back(*c);
    auto name = names_b.find(rb.cell.device);
    FG_RETURN_IF_ERROR(
        AccuracyChanges(ra, rb, name == names_b.end() ? "" : name->second, noise, &out.changes));
    if (std::optional<CellChange> c = LatencyChange(ra, rb, options)) out.changes.push_back(*c);
  }
  for (const auto& [id, ra] : in_a) {
    out.changes.push_back(BaseChange(ChangeKind::kOnlyInA, *ra, *ra));
  }
  return out;
}

}  // namespace framegate
