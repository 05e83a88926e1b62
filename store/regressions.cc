#include "store/regressions.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "store/regression_points.h"
#include "store/series_analysis.h"

namespace framegate {
namespace {

// A metric followed over runs. `relative` < 0 means "use --min-effect".
struct ValueTrack {
  const char* name;
  bool higher_is_worse;
  double relative, absolute;            // violation threshold
  double step_relative, step_absolute;  // floor of the noise used for step detection
  double (*value)(const SeriesPoint&);
};
constexpr double kPsnrCapDb = 100;  // +inf PSNR (identical frames) counts as 100 dB

const ValueTrack kValueTracks[] = {
    {"latency_median_s", true, -1, 0, 0.005, 0, [](const SeriesPoint& p) { return p.latency; }},
    {"min_psnr", false, 0, 0.5, 0, 0.02,
     [](const SeriesPoint& p) { return std::min(p.min_psnr, kPsnrCapDb); }},
    {"mean_ssim", false, 0, 0.005, 0, 1e-4, [](const SeriesPoint& p) { return p.mean_ssim; }},
    {"rel_l2", true, -1, 0, 0.005, 0, [](const SeriesPoint& p) { return p.rel_l2; }},
};

// One flagged series, before grouping.
struct Flag {
  RegressionFinding finding;  // cell_ids/models hold this series only
  std::string model;
};

class SeriesJudge {
 public:
  SeriesJudge(const SeriesData& data, const BaselineChoice& baseline, const RegressionOptions& options)
      : data_(data), baseline_(baseline), options_(options) {}

  // Appends the series' flags; returns its FlakyCell when it is flaky (then nothing else).
  void Judge(const Series& s, std::vector<Flag>* flags, std::vector<FlakyCell>* flaky) const {
    std::vector<const SeriesPoint*> window;
    int base = -1;  // index in s.points of the baseline point (run/tag baselines)
    for (size_t i = 0; i < s.points.size(); ++i) {
      const SeriesRun& run = data_.runs[static_cast<size_t>(s.points[i].run)];
      if (IsBaselinePoint(run)) base = static_cast<int>(i);
      if (run.in_window) window.push_back(&s.points[i]);
    }
    if (window.empty()) return;
    const int flips = Flips(window);
    if (flips >= 2) {
      flaky->push_back(Flaky(s, window, flips));
      return;
    }
    const SeriesPoint* base_point = base >= 0 ? &s.points[static_cast<size_t>(base)] : nullptr;
    if (baseline_.kind != BaselineChoice::Kind::kLastGood && base_point == nullptr) return;
    const std::vector<const SeriesPoint*> after = AfterBaseline(window, base_point);
    JudgeStatus(s, after, base_point, flags);
    for (const ValueTrack& track : kValueTracks) JudgeValues(s, after, base_point, track, flags);
  }

 private:
  bool IsBaselinePoint(const SeriesRun& run) const {
    if (baseline_.kind == BaselineChoice::Kind::kRun) return run.run_id == baseline_.name;
    return baseline_.kind == BaselineChoice::Kind::kTag && run.tagged;
  }
  const std::string& Model(const Series& s) const { return data_.models[static_cast<size_t>(s.model)]; }
  const std::string& Family(const Series& s) const { return data_.families[static_cast<size_t>(s.family)]; }
  const SeriesRun& RunOf(const SeriesPoint* p) const { return data_.runs[static_cast<size_t>(p->run)]; }
  // The window points after the baseline point (all of them for last-good).
  std::vector<const SeriesPoint*> AfterBaseline(const std::vector<const SeriesPoint*>& window,
                                                const SeriesPoint* base) const {
    if (base == nullptr) return window;
    std::vector<const SeriesPoint*> after;
    for (const SeriesPoint* p : window) {
      if (p->run > base->run) after.push_back(p);
    }
    return after;
  }

  // Pass/fail flips between consecutive runs of the same environment (no code change).
  int Flips(const std::vector<const SeriesPoint*>& window) const {
    int flips = 0;
    for (size_t i = 1; i < window.size(); ++i) {
      if (IsFailure(window[i]->status) != IsFailure(window[i - 1]->status) &&
          RunOf(window[i]).environment == RunOf(window[i - 1]).environment) {
        ++flips;
      }
    }
    return flips;
  }

  FlakyCell Flaky(const Series& s, const std::vector<const SeriesPoint*>& window, int flips) const {
    FlakyCell f{Family(s), s.cell_id, Model(s), "", flips};
    for (const SeriesPoint* p : window) {
      f.statuses += IsFailure(p->status) ? 'F' : (p->status == CellStatus::kPass ? 'P' : 'U');
    }
    return f;
  }

  Flag MakeFlag(const Series& s, const char* kind, const char* track, const SeriesPoint* first,
                int streak) const {
    Flag flag;
    flag.model = Model(s);
    RegressionFinding& f = flag.finding;
    f.kind = kind;
    f.track = track;
    f.family = Family(s);
    f.cell_ids = {s.cell_id};
    f.models = {Model(s)};
    f.devices = 1;
    f.consecutive = streak;
    f.pending = streak < options_.min_consecutive;
    f.last_run = RunOf(s.points.empty() ? first : &s.points.back()).run_id;
    if (first != nullptr) {
      f.since_run = RunOf(first).run_id;
      f.since_git_sha = RunOf(first).git_sha;
      f.since_started_at = RunOf(first).started_at;
    }
    return flag;
  }

  void JudgeStatus(const Series& s, const std::vector<const SeriesPoint*>& points, const SeriesPoint* base,
                   std::vector<Flag>* flags) const {
    int streak = 0;
    while (streak < static_cast<int>(points.size()) &&
           IsFailure(points[points.size() - 1 - static_cast<size_t>(streak)]->status)) {
      ++streak;
    }
    if (streak == 0) return;
    const bool good_before =
        base != nullptr ? !IsFailure(base->status) : streak < static_cast<int>(points.size());
    if (!good_before) return;  // failing all along: not a new regression
    const SeriesPoint* first = points[points.size() - static_cast<size_t>(streak)];
    Flag flag = MakeFlag(s, "failing", "status", first, streak);
    flag.finding.last_status = StatusName(points.back()->status);
    flags->push_back(flag);
  }

  // False when no finding is possible: every violation (and every creeping change) moves
  // the series by more than max(relative x |level|, absolute) between two values in
  // [min, max] of its passing points (and the baseline's), so a spread below that bound
  // can flag nothing. Skips the analysis for the series whose values did not move.
  static bool CanViolate(const std::vector<const SeriesPoint*>& points, const SeriesPoint* base,
                         const ValueTrack& track, double relative) {
    double lo = INFINITY, hi = -INFINITY;
    auto include = [&](const SeriesPoint* p) {
      const double v = track.value(*p);
      if (IsFailure(p->status) || !std::isfinite(v)) return;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    };
    for (const SeriesPoint* p : points) include(p);
    if (base != nullptr) include(base);
    if (!(hi > lo)) return false;
    const double level = lo > 0 || hi < 0 ? std::min(std::fabs(lo), std::fabs(hi)) : 0.0;
    return hi - lo > std::max(relative * level, track.absolute);
  }

  void JudgeValues(const Series& s, const std::vector<const SeriesPoint*>& points, const SeriesPoint* base,
                   const ValueTrack& track, std::vector<Flag>* flags) const {
    const double sign = track.higher_is_worse ? 1 : -1;
    const double relative = track.relative < 0 ? options_.min_effect : track.relative;
    if (!CanViolate(points, base, track, relative)) return;  // most series: nothing moved
    std::vector<double> x;
    std::vector<const SeriesPoint*> at;
    for (const SeriesPoint* p : points) {
      const double v = track.value(*p);
      if (IsFailure(p->status) || !std::isfinite(v)) continue;
      x.push_back(sign * v);
      at.push_back(p);
    }
    if (x.empty()) return;
    ViolationRule rule;
    rule.relative = relative;
    rule.absolute = track.absolute;
    rule.sigma = NoiseSigma(x);
    Streak streak;
    if (base != nullptr) {
      const double b = track.value(*base);
      if (IsFailure(base->status) || !std::isfinite(b)) return;
      streak = {TrailingViolations(x, 0, sign * b, rule), sign * b};
    } else {
      streak = TrailingStreak(x, rule);
    }
    if (streak.length > 0) {
      Flag flag =
          MakeFlag(s, "worse", track.name, at[x.size() - static_cast<size_t>(streak.length)], streak.length);
      flag.finding.baseline = sign * streak.reference;
      flag.finding.current = sign * x.back();
      flags->push_back(flag);
      return;
    }
    JudgeCreeping(s, x, at, track, rule, sign, flags);
  }

  void JudgeCreeping(const Series& s, const std::vector<double>& x, const std::vector<const SeriesPoint*>& at,
                     const ValueTrack& track, const ViolationRule& rule, double sign,
                     std::vector<Flag>* flags) const {
    const double floor = std::max(track.step_relative * std::fabs(Median(x)), track.step_absolute);
    const std::vector<int> steps = StepChanges(x, std::max(rule.sigma, floor));
    if (steps.size() < 2) return;
    const int n = static_cast<int>(x.size());
    const double first = Mean(x, 0, steps.front()), last = Mean(x, steps.back(), n);
    if (n - steps.back() < options_.min_consecutive || !rule.Violates(last, first)) return;
    Flag flag = MakeFlag(s, "creeping", track.name, at[static_cast<size_t>(steps.front())], n - steps.back());
    flag.finding.pending = false;
    flag.finding.baseline = sign * first;
    flag.finding.current = sign * last;
    int begin = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const int end = k + 1 < steps.size() ? steps[k + 1] : n;
      const SeriesRun& run = RunOf(at[static_cast<size_t>(steps[k])]);
      flag.finding.steps.push_back(
          {run.run_id, run.git_sha, sign * Mean(x, begin, steps[k]), sign * Mean(x, steps[k], end)});
      begin = steps[k];
    }
    flags->push_back(flag);
  }

  const SeriesData& data_;
  const BaselineChoice& baseline_;
  const RegressionOptions& options_;
};

// Merges flags of one (kind, track, family, pending) into one finding per group.
std::vector<RegressionFinding> Group(const std::vector<Flag>& flags, const SeriesData& data) {
  std::map<std::string, std::vector<const Flag*>> groups;
  for (const Flag& f : flags) {
    const RegressionFinding& x = f.finding;
    groups[std::string(x.pending ? "1" : "0") + x.kind + "|" + x.track + "|" + x.family].push_back(&f);
  }
  std::vector<RegressionFinding> out;
  for (const auto& [key, members] : groups) {
    RegressionFinding g = members.front()->finding;
    std::set<std::string> cells, models;
    std::vector<double> baselines, currents;
    for (const Flag* f : members) {
      cells.insert(f->finding.cell_ids.front());
      models.insert(f->model);
      baselines.push_back(f->finding.baseline);
      currents.push_back(f->finding.current);
      g.consecutive = std::min(g.consecutive, f->finding.consecutive);
      if (f->finding.since_started_at < g.since_started_at) {
        g.since_run = f->finding.since_run;
        g.since_git_sha = f->finding.since_git_sha;
        g.since_started_at = f->finding.since_started_at;
      }
    }
    g.cell_ids.assign(cells.begin(), cells.end());
    g.models.assign(models.begin(), models.end());
    g.clean_models.clear();
    auto all = data.family_models.find(g.family);
    if (all != data.family_models.end()) {
      for (const std::string& m : all->second) {
        if (!models.count(m)) g.clean_models.push_back(m);
      }
    }
    g.devices = static_cast<int>(members.size());
    g.baseline = Median(baselines);
    g.current = Median(currents);
    out.push_back(g);
  }
  auto rank = [](const RegressionFinding& f) {
    return 10 * f.pending + (f.kind == "failing" ? 0 : f.kind == "worse" ? 1 : 2);
  };
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  return out;
}

// The newest failure's reason, for status findings (read for these few cells only).
Status FillReasons(SqliteDb& db, std::vector<Flag>* flags) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare("SELECT status, reason FROM cells WHERE run_id = ? AND cell_id = ?");
  if (!stmt.ok()) return stmt.status();
  for (Flag& flag : *flags) {
    RegressionFinding& f = flag.finding;
    if (f.track != "status") continue;
    StatusOr<bool> row = stmt->Bind(1, f.last_run).Bind(2, f.cell_ids.front()).Step();
    if (!row.ok()) return row.status();
    if (*row) {
      f.last_status = stmt->Text(0);
      f.last_reason = stmt->Text(1);
    }
    stmt->Reset();
  }
  return Status::Ok();
}

}  // namespace

int RegressionReport::regressions() const {
  int count = 0;
  for (const RegressionFinding& f : findings) count += !f.pending;
  return count;
}

StatusOr<RegressionReport> FindRegressions(ResultStore& store, const RegressionOptions& options) {
  SqliteDb& db = store.db();
  if (!options.since.empty() && !IsIsoDate(options.since)) {
    return Status::InvalidInput("--since '" + options.since + "': expected a date YYYY-MM-DD");
  }
  StatusOr<BaselineChoice> baseline = ResolveBaseline(db, options.baseline);
  if (!baseline.ok()) return baseline.status();
  RegressionReport report;
  report.baseline = options.baseline;
  std::vector<Flag> flags;
  Status status = db.ReadTransaction([&]() -> Status {
    report.since = options.since;
    if (report.since.empty()) {
      StatusOr<std::string> newest = NewestRunStart(db);
      if (!newest.ok()) return newest.status();
      report.since = DaysBefore(*newest, kDefaultWindowDays);
    }
    StatusOr<SeriesData> data = LoadSeries(db, report.since, *baseline);
    if (!data.ok()) return data.status();
    for (const SeriesRun& r : data->runs) report.runs += r.in_window;
    report.series = static_cast<int>(data->series.size());
    SeriesJudge judge(*data, *baseline, options);
    for (const Series& s : data->series) judge.Judge(s, &flags, &report.flaky);
    FG_RETURN_IF_ERROR(FillReasons(db, &flags));
    report.findings = Group(flags, *data);
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return report;
}

}  // namespace framegate
