#include "store/regressions.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include "store/regression_accept.h"
#include "store/regression_points.h"
#include "store/series_analysis.h"

namespace framegate {
namespace {

// A metric followed over runs. `relative` < 0 means "use --min-effect". relative and
// absolute are the run/tag baselines' violation thresholds; floor_relative and
// floor_absolute the smallest shift the change-point rule counts (last-good), the floors
// `compare` uses for a noiseless series.
struct ValueTrack {
  const char* name;
  bool higher_is_worse;
  double relative, absolute;            // violation threshold
  double step_relative, step_absolute;  // floor of the noise used for step detection
  double (*value)(const SeriesPoint&);
  double floor_relative, floor_absolute;
  // The environment test's value when it differs (latency: divided by the neighbours'
  // load instead of the whole run's); nullptr: `value`.
  double (*environment_value)(const SeriesPoint&) = nullptr;
};
constexpr double kPsnrCapDb = 100;  // +inf PSNR (identical frames) counts as 100 dB
// A one-night change is shown as pending when it is this many standard errors out.
constexpr double kPendingZ = 5;
// How many runs a failing streak may begin off the fingerprint change and still be
// labelled environment. (Value tracks test the fingerprint change's own night instead:
// JudgeEnvironment.)
constexpr size_t kEnvironmentSlack = 2;

const ValueTrack kValueTracks[] = {
    {"latency_median_s", true, -1, 0, 0.005, 0, [](const SeriesPoint& p) { return p.latency / p.load; }, -1,
     0, [](const SeriesPoint& p) { return p.latency / p.neighbour_load; }},
    {"min_psnr", false, 0, 0.5, 0, 0.02,
     [](const SeriesPoint& p) { return std::min(p.min_psnr, kPsnrCapDb); }, 0, 0.01},
    {"mean_ssim", false, 0, 0.005, 0, 1e-4, [](const SeriesPoint& p) { return p.mean_ssim; }, 0, 1e-4},
    {"rel_l2", true, -1, 0, 0.005, 0, [](const SeriesPoint& p) { return p.rel_l2; }, 0.01, 0},
};

// Which family of tests a flag's p-value belongs to: each family has its own FDR control.
// Status and run/tag-baseline flags are not tested (kNone: kept as they are).
enum class Test { kNone, kShift, kEnvironment };

// One flagged series, before grouping. `p` is the change's p-value (the FDR control of
// its `test` family confirms it or not).
struct Flag {
  RegressionFinding finding;  // cell_ids/models hold this series only
  std::string model;
  SeriesAlert alert;
  Test test = Test::kNone;
  double p = 0;
};

// Every series judged: the flags and flaky cells in series order, and the counts of the
// FDR controls: `tests` the value tests (series x track with enough points),
// `environment_tests` those with a fingerprint change in the window.
struct JudgedSeries {
  std::vector<Flag> flags;
  std::vector<FlakyCell> flaky;
  size_t tests = 0, environment_tests = 0;
  int accepted_series = 0;
};

class SeriesJudge {
 public:
  // Appends what it finds to *out.
  SeriesJudge(const SeriesData& data, const BaselineChoice& baseline, const RegressionOptions& options,
              const Acceptances& accepted, JudgedSeries* out)
      : data_(data), baseline_(baseline), options_(options), accepted_(accepted), out_(*out) {}

  // Appends the series' flags, or its FlakyCell when it is flaky (then nothing else).
  void Judge(const Series& s) {
    std::vector<const SeriesPoint*> window;
    int base = -1;  // index in s.points of the baseline point (run/tag baselines)
    const std::string accepted_since = accepted_.Since(s.cell_id);
    if (!accepted_since.empty()) ++out_.accepted_series;
    for (size_t i = 0; i < s.points.size(); ++i) {
      const SeriesRun& run = data_.runs[static_cast<size_t>(s.points[i].run)];
      if (IsBaselinePoint(run)) base = static_cast<int>(i);
      // An accepted change: the series is judged from its new level on.
      if (run.in_window && run.started_at >= accepted_since) window.push_back(&s.points[i]);
    }
    if (window.empty()) return;
    const int flips = Flips(window);
    if (flips >= 2) {
      out_.flaky.push_back(Flaky(s, window, flips));
      return;
    }
    const SeriesPoint* base_point = base >= 0 ? &s.points[static_cast<size_t>(base)] : nullptr;
    if (baseline_.kind != BaselineChoice::Kind::kLastGood && base_point == nullptr) return;
    const std::vector<const SeriesPoint*> after = AfterBaseline(window, base_point);
    JudgeStatus(s, after, base_point, &out_.flags);
    for (const ValueTrack& track : kValueTracks) JudgeValues(s, after, base_point, track, &out_.flags);
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

  // Pass/fail flips between consecutive runs of the same environment fingerprint.
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
    SeriesAlert& a = flag.alert;
    a.kind = "regression";
    a.change = kind;
    a.confirmed = !f.pending;
    a.track = track;
    a.cell_id = s.cell_id;
    a.model = Model(s);
    a.family = Family(s);
    a.since_run = f.since_run;
    a.since_started_at = f.since_started_at;
    a.since_git_sha = f.since_git_sha;
    a.last_run = f.last_run;
    a.nights = streak;
    a.confidence = f.pending ? 0 : 1;
    return flag;
  }

  // Marks the flag "environment" when the run's fingerprint changed where the change
  // began: between the point before `first` and `first`, or up to kEnvironmentSlack runs
  // either side (under heavy noise the change point is found a night or two off).
  void LabelEnvironment(const std::vector<const SeriesPoint*>& points, size_t first, Flag* flag) const {
    const size_t from = first > kEnvironmentSlack ? first - kEnvironmentSlack : 1;
    for (size_t i = std::max<size_t>(from, 1); i <= first + kEnvironmentSlack && i < points.size(); ++i) {
      const SeriesRun& before = RunOf(points[i - 1]);
      const SeriesRun& after = RunOf(points[i]);
      if (before.environment == after.environment) continue;
      flag->alert.kind = "environment";
      flag->alert.changed = FingerprintChanges(before.fingerprint, after.fingerprint);
      flag->finding.alert = "environment";
      return;
    }
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
    const size_t first_index = points.size() - static_cast<size_t>(streak);
    Flag flag = MakeFlag(s, "failing", "status", points[first_index], streak);
    flag.finding.last_status = StatusName(points.back()->status);
    flag.alert.baseline = 0;
    flag.alert.current = 1;
    if (base == nullptr) LabelEnvironment(points, first_index, &flag);
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
                   const ValueTrack& track, std::vector<Flag>* flags) {
    if (base == nullptr) {
      JudgeShift(s, points, track, flags);
      return;
    }
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
    const double b = track.value(*base);
    if (IsFailure(base->status) || !std::isfinite(b)) return;
    const int length = TrailingViolations(x, 0, sign * b, rule);
    if (length == 0) return;
    Flag flag = MakeFlag(s, "worse", track.name, at[x.size() - static_cast<size_t>(length)], length);
    flag.finding.baseline = b;
    flag.finding.current = sign * x.back();
    FillMagnitude(flag.finding.baseline, flag.finding.current, rule.sigma, &flag.alert);
    flags->push_back(flag);
  }

  static void FillMagnitude(double baseline, double current, double sigma, SeriesAlert* a) {
    a->baseline = baseline;
    a->current = current;
    a->relative = baseline != 0 ? current / baseline - 1 : 0;
    a->sigmas = sigma > 0 ? std::fabs(current - baseline) / sigma : INFINITY;
  }

  // last-good: the newest level shift of the series (NewestShift), worse or better, its
  // p-value left to the FDR control across all series (FindRegressions).
  void JudgeShift(const Series& s, const std::vector<const SeriesPoint*>& points, const ValueTrack& track,
                  std::vector<Flag>* flags) {
    const double sign = track.higher_is_worse ? 1 : -1;
    std::vector<double>& x = shift_values_;
    std::vector<size_t>& at = shift_at_;  // index in points of x[i]
    x.clear();
    at.clear();
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < points.size(); ++i) {
      const double v = track.value(*points[i]);
      if (IsFailure(points[i]->status) || !std::isfinite(v)) continue;
      x.push_back(sign * v);
      at.push_back(i);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    ShiftRule rule;
    rule.confirm = options_.confirm_values;
    if (static_cast<int>(x.size()) < rule.min_before + 1) return;
    ++out_.tests;
    const double level = lo > 0 || hi < 0 ? std::min(std::fabs(lo), std::fabs(hi)) : 0.0;
    const double relative = track.floor_relative < 0 ? options_.min_effect : track.floor_relative;
    rule.floor = std::max(relative * level, track.floor_absolute);
    // A fingerprint change in the window gets its own test at the night it happened
    // (counted for its FDR control whether or not the series moved), and the rule below
    // judges the newest environment only: no before segment spans the change, so a driver
    // or LibTorch update is never a code regression.
    const size_t env_from = EnvironmentStart(points, at, at.size());
    const size_t env_begin = env_from > 0 ? EnvironmentBefore(points, at, env_from, rule) : 0;
    const bool env_tested = env_from - env_begin >= static_cast<size_t>(rule.min_before);
    out_.environment_tests += env_tested;
    if (!(hi - lo > rule.floor)) return;  // most series: nothing moved
    const double sigma = NoiseSigma(x);
    if (env_tested) {
      std::vector<double> y;  // the test's own values, when the track has them
      if (track.environment_value != nullptr) {
        for (size_t i : at) y.push_back(sign * track.environment_value(*points[i]));
      }
      const std::vector<double>& values = y.empty() ? x : y;
      JudgeEnvironment(s, points, values, at, track, y.empty() ? sigma : NoiseSigma(y), rule, env_begin,
                       env_from, flags);
    }
    if (env_from > 0) {
      x.erase(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(env_from));
      at.erase(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(env_from));
    }
    Shift worse, better;
    NewestShifts(x, sigma, rule, &worse, &better);
    const bool is_worse = worse.found() && (!better.found() || worse.z >= better.z);
    if (!is_worse && !better.found()) {
      if (!JudgePending(s, points, x, at, track, sigma, rule, flags)) {
        JudgeCreeping(s, points, x, at, track, sign, sigma, flags);
      }
      return;
    }
    const Shift& shift = is_worse ? worse : better;
    const double to_value = is_worse ? sign : -sign;
    const int n = static_cast<int>(x.size());
    Flag flag = MakeFlag(s, is_worse ? "worse" : "better", track.name,
                         points[at[static_cast<size_t>(shift.start)]], n - shift.start);
    flag.finding.pending = false;
    flag.finding.alert = is_worse ? "regression" : "improvement";
    flag.alert.kind = flag.finding.alert;
    flag.finding.baseline = to_value * shift.before;
    flag.finding.current = to_value * shift.after;
    FillMagnitude(flag.finding.baseline, flag.finding.current, sigma, &flag.alert);
    flag.p = shift.p;
    flag.test = Test::kShift;
    flags->push_back(flag);
  }

  // The index in `at` of the first point of the newest environment among at[0..end)
  // (the points of `points` they index); 0 when they all share one.
  size_t EnvironmentStart(const std::vector<const SeriesPoint*>& points, const std::vector<size_t>& at,
                          size_t end) const {
    for (size_t i = end; i-- > 1;) {
      if (RunOf(points[at[i]]).environment != RunOf(points[at[i - 1]]).environment) return i;
    }
    return 0;
  }

  // The first index of the environment test's before segment for a change at `from`: up
  // to max_before points of the environment before it (the test needs min_before).
  size_t EnvironmentBefore(const std::vector<const SeriesPoint*>& points, const std::vector<size_t>& at,
                           size_t from, const ShiftRule& rule) const {
    const size_t max_before = static_cast<size_t>(rule.max_before);
    return std::max(EnvironmentStart(points, at, from), from > max_before ? from - max_before : size_t{0});
  }

  // The environment test: the points since the fingerprint changed (x[from..], one night
  // is enough: the night is known, nothing is searched) against the median of x[begin,
  // from), the environment before. z as NewestShift's, two-sided p, controlled apart from
  // the regression tests (environment_fdr). Never a regression: kind "environment", the
  // changed fields named.
  void JudgeEnvironment(const Series& s, const std::vector<const SeriesPoint*>& points,
                        const std::vector<double>& x, const std::vector<size_t>& at, const ValueTrack& track,
                        double sigma, const ShiftRule& rule, size_t begin, size_t from,
                        std::vector<Flag>* flags) const {
    std::vector<double> before(x.begin() + static_cast<std::ptrdiff_t>(begin),
                               x.begin() + static_cast<std::ptrdiff_t>(from));
    const double level = Median(before);
    const double na = static_cast<double>(x.size() - from), nb = static_cast<double>(before.size());
    const double after = Mean(x, static_cast<int>(from), static_cast<int>(x.size()));
    const double shift = after - level;
    if (!(std::fabs(shift) > rule.floor)) return;
    const double noise = std::max(sigma, SampleStddev(before));
    const double se = noise * std::sqrt(1 / na + (M_PI / 2) / nb);
    const double sign = track.higher_is_worse ? 1 : -1;
    Flag flag =
        MakeFlag(s, shift > 0 ? "worse" : "better", track.name, points[at[from]], static_cast<int>(na));
    flag.finding.pending = false;
    flag.finding.alert = flag.alert.kind = "environment";
    flag.alert.changed =
        FingerprintChanges(RunOf(points[at[from - 1]]).fingerprint, RunOf(points[at[from]]).fingerprint);
    flag.finding.baseline = sign * level;
    flag.finding.current = sign * after;
    FillMagnitude(flag.finding.baseline, flag.finding.current, sigma, &flag.alert);
    flag.p = se > 0 ? std::erfc(std::fabs(shift) / se / std::sqrt(2.0)) : 0.0;
    flag.test = Test::kEnvironment;
    flags->push_back(flag);
  }

  // One night past the floor and far outside the noise: shown as pending, never counted.
  // Returns whether it added one.
  bool JudgePending(const Series& s, const std::vector<const SeriesPoint*>& points,
                    const std::vector<double>& x, const std::vector<size_t>& at, const ValueTrack& track,
                    double sigma, ShiftRule rule, std::vector<Flag>* flags) const {
    if (rule.confirm <= 1) return false;
    // Necessary (skips the search for most series): the newest point exceeds the lowest of
    // the points its before segment takes by more than the floor and kPendingZ x sigma
    // (the median of before is at least that lowest, the standard error at least sigma).
    const size_t n = x.size();
    if (n < 2) return false;
    const double lowest = *std::min_element(
        x.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(n, static_cast<size_t>(rule.max_before) + 1)),
        x.end() - 1);
    if (!(x.back() - lowest > rule.floor) || x.back() - lowest < kPendingZ * sigma) return false;
    rule.confirm = 1;
    const Shift one = NewestShift(x, sigma, rule);
    if (!one.found() || one.start != static_cast<int>(x.size()) - 1 || one.z < kPendingZ) return false;
    const double sign = track.higher_is_worse ? 1 : -1;
    Flag flag = MakeFlag(s, "worse", track.name, points[at.back()], 1);
    flag.finding.baseline = sign * one.before;
    flag.finding.current = sign * one.after;
    FillMagnitude(flag.finding.baseline, flag.finding.current, sigma, &flag.alert);
    flags->push_back(flag);
    return true;
  }

  // Two or more level shifts (binary segmentation) that together move the series past
  // the floor while the newest-shift rule found none; its p-value is the first level
  // against the last, and goes through the same FDR control.
  void JudgeCreeping(const Series& s, const std::vector<const SeriesPoint*>& points,
                     const std::vector<double>& x, const std::vector<size_t>& at, const ValueTrack& track,
                     double sign, double sigma, std::vector<Flag>* flags) const {
    ViolationRule rule;
    rule.relative = track.relative < 0 ? options_.min_effect : track.relative;
    rule.absolute = track.absolute;
    rule.sigma = sigma;
    // A creeping change moves the series by more than the threshold between two of its
    // values: a smaller spread can flag nothing (most series; skips the segmentation).
    const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
    if (!(*hi - *lo > rule.Threshold(std::min(std::fabs(*lo), std::fabs(*hi))))) return;
    const double floor = std::max(track.step_relative * std::fabs(Median(x)), track.step_absolute);
    // The classic (not robust) spread of the run-to-run differences without the two
    // largest (the steps a creeping change is made of): heavy-tailed load noise makes the
    // robust sigma split noise into "steps" (bench/alert_quality.py's A/A).
    std::vector<double> diffs;
    for (size_t i = 1; i < x.size(); ++i) diffs.push_back(x[i] - x[i - 1]);
    std::sort(diffs.begin(), diffs.end(), [](double a, double b) { return std::fabs(a) < std::fabs(b); });
    diffs.resize(diffs.size() > 2 ? diffs.size() - 2 : 0);
    const double noise = std::max({sigma, floor, SampleStddev(diffs) / std::sqrt(2.0)});
    const std::vector<int> steps = StepChanges(x, noise);
    if (steps.size() < 2) return;
    const int n = static_cast<int>(x.size());
    const double first = Mean(x, 0, steps.front()), last = Mean(x, steps.back(), n);
    if (n - steps.back() < options_.confirm_values || !rule.Violates(last, first)) return;
    Flag flag =
        MakeFlag(s, "creeping", track.name, points[at[static_cast<size_t>(steps.front())]], n - steps.back());
    flag.finding.pending = false;
    flag.finding.baseline = sign * first;
    flag.finding.current = sign * last;
    FillMagnitude(flag.finding.baseline, flag.finding.current, sigma, &flag.alert);
    const double n1 = steps.front(), n2 = n - steps.back();
    const double z = (last - first) / (noise * std::sqrt(1 / n1 + 1 / n2));
    flag.p = 0.5 * std::erfc(z / std::sqrt(2.0));
    flag.test = Test::kShift;
    int begin = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const int end = k + 1 < steps.size() ? steps[k + 1] : n;
      const SeriesRun& run = RunOf(points[at[static_cast<size_t>(steps[k])]]);
      flag.finding.steps.push_back(
          {run.run_id, run.git_sha, sign * Mean(x, begin, steps[k]), sign * Mean(x, steps[k], end)});
      begin = steps[k];
    }
    flags->push_back(flag);
  }

  const SeriesData& data_;
  const BaselineChoice& baseline_;
  const RegressionOptions& options_;
  const Acceptances& accepted_;
  JudgedSeries& out_;
  // JudgeShift's values and their indices, kept between series (no allocation per series).
  std::vector<double> shift_values_;
  std::vector<size_t> shift_at_;
};

// Merges flags of one (kind, track, family, pending) into one finding per group.
std::vector<RegressionFinding> Group(const std::vector<Flag>& flags, const SeriesData& data) {
  std::map<std::string, std::vector<const Flag*>> groups;
  for (const Flag& f : flags) {
    const RegressionFinding& x = f.finding;
    groups[std::string(x.pending ? "1" : "0") + x.alert + "|" + x.kind + "|" + x.track + "|" + x.family]
        .push_back(&f);
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
    return 100 * f.pending +
           10 * (f.alert == "regression"    ? 0
                 : f.alert == "environment" ? 1
                                            : 2) +
           (f.kind == "failing" ? 0
            : f.kind == "worse" ? 1
                                : 2);
  };
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  return out;
}

// Load normalization. On a shared machine a night is slower or faster as a whole (the
// recorded A/A nights of bench/alert_quality.py move 30% together) and, within the night,
// with the load of the minutes each cell ran in: cells recorded one after the other
// correlate 0.93-0.95 there, the first and the last 0.3. Two load factors per point, each
// over the cells of the same device in the run, of latency / that cell's own median
// latency, and only where the run has kMinLoadCells or more timed cells on the device:
//   load            the median over all of them: what the regression rule divides by;
//   neighbour_load  the median over the kLoadNeighbours cells recorded nearest before and
//                   after it (series_points.cell_row; at the ends, more on one side),
//                   itself left out: what the environment test divides by.
// The neighbours follow the load closer (more changes found) but also make a cell that
// ran slow for three nights a change: bench/alert_quality.py's A/A real history has one
// such episode. So the regression rule, which searches every night of thousands of
// series, keeps the whole run's; the environment test, one known night, takes the
// neighbours' (docs/store.md, "The alert rule", has the numbers). A change that moves
// every cell of a device alike is load (not seen here).
constexpr size_t kMinLoadCells = 5;
constexpr size_t kLoadNeighbours = 4;  // even: the median of the two middle ones
static_assert(kMinLoadCells > kLoadNeighbours && kLoadNeighbours % 2 == 0, "a full window in every run");

void SetLoadFactors(SeriesData* data) {
  struct Ratio {
    int64_t recorded;
    double ratio;
    SeriesPoint* point;
  };
  const size_t devices = static_cast<size_t>(std::max(data->device_count, 1));
  std::vector<std::vector<Ratio>> runs(data->runs.size() * devices);
  std::vector<double> values;
  auto timed = [](const SeriesPoint& p) {
    return !IsFailure(p.status) && std::isfinite(p.latency) && p.latency > 0;
  };
  for (Series& s : data->series) {
    values.clear();
    for (const SeriesPoint& p : s.points) {
      if (timed(p)) values.push_back(p.latency);
    }
    if (values.size() < 3) continue;
    const double median = Median(values);
    for (SeriesPoint& p : s.points) {
      if (!timed(p)) continue;
      runs[static_cast<size_t>(p.run) * devices + static_cast<size_t>(s.device)].push_back(
          {p.recorded, p.latency / median, &p});
    }
  }
  // Only the environment test reads neighbour_load: without a fingerprint change in the
  // loaded runs (most nights), neither the sort nor the windows are needed.
  bool environment_changed = false;
  for (size_t i = 1; i < data->runs.size(); ++i) {
    environment_changed = environment_changed || data->runs[i].environment != data->runs[i - 1].environment;
  }
  std::vector<double> near;
  for (std::vector<Ratio>& run : runs) {
    if (run.size() < kMinLoadCells) continue;
    near.clear();
    for (const Ratio& r : run) near.push_back(r.ratio);
    const double whole = Median(near);
    for (Ratio& r : run) r.point->load = whole;
    if (!environment_changed) continue;
    std::stable_sort(run.begin(), run.end(),
                     [](const Ratio& a, const Ratio& b) { return a.recorded < b.recorded; });
    const size_t n = run.size();
    for (size_t i = 0; i < n; ++i) {
      // The window of kLoadNeighbours + 1 cells around i, moved inward at the ends; i
      // itself left out (no allocation: this runs once per point of the window).
      const size_t first =
          std::min(i > kLoadNeighbours / 2 ? i - kLoadNeighbours / 2 : 0, n - 1 - kLoadNeighbours);
      std::array<double, kLoadNeighbours> neighbours;
      size_t k = 0;
      for (size_t j = first; j <= first + kLoadNeighbours; ++j) {
        if (j != i) neighbours[k++] = run[j].ratio;
      }
      std::sort(neighbours.begin(), neighbours.end());
      run[i].point->neighbour_load =
          0.5 * (neighbours[kLoadNeighbours / 2 - 1] + neighbours[kLoadNeighbours / 2]);
    }
  }
}

// The FDR control of one test family: its flags get their Benjamini-Hochberg q-value over
// every test of the family judged (`tests`); those above `fdr` are dropped. Other flags
// are kept as they are.
void ControlFalseDiscoveries(Test family, size_t tests, double fdr, std::vector<Flag>* flags) {
  std::vector<double> p;
  std::vector<size_t> tested;
  for (size_t i = 0; i < flags->size(); ++i) {
    if ((*flags)[i].test != family) continue;
    p.push_back((*flags)[i].p);
    tested.push_back(i);
  }
  const std::vector<double> q = BenjaminiHochberg(p, tests);
  std::vector<bool> drop(flags->size(), false);
  for (size_t k = 0; k < tested.size(); ++k) {
    Flag& f = (*flags)[tested[k]];
    f.alert.confidence = 1 - q[k];
    f.alert.confirmed = q[k] <= fdr;
    drop[tested[k]] = !f.alert.confirmed;
  }
  std::vector<Flag> kept;
  for (size_t i = 0; i < flags->size(); ++i) {
    if (!drop[i]) kept.push_back(std::move((*flags)[i]));
  }
  *flags = std::move(kept);
}

// Judges data.series in contiguous slices, one thread each (series are independent), and
// joins the slices in order: the same result as one thread (options.judge_threads).
constexpr size_t kJudgeThreads = 8;
constexpr size_t kSeriesPerThread = 2000;  // below this a thread costs more than it saves
JudgedSeries JudgeAll(const SeriesData& data, const BaselineChoice& baseline,
                      const RegressionOptions& options, const Acceptances& accepted) {
  const size_t n = data.series.size();
  const size_t wanted =
      options.judge_threads > 0
          ? static_cast<size_t>(options.judge_threads)
          : std::min<size_t>({std::thread::hardware_concurrency(), n / kSeriesPerThread, kJudgeThreads});
  const size_t threads = std::max<size_t>(std::min(wanted, n), 1);
  std::vector<JudgedSeries> slices(threads);
  auto judge_slice = [&](size_t k) {
    SeriesJudge judge(data, baseline, options, accepted, &slices[k]);
    for (size_t i = n * k / threads; i < n * (k + 1) / threads; ++i) judge.Judge(data.series[i]);
  };
  std::vector<std::thread> workers;
  for (size_t k = 1; k < threads; ++k) workers.emplace_back(judge_slice, k);
  judge_slice(0);
  for (std::thread& w : workers) w.join();
  JudgedSeries all = std::move(slices[0]);
  for (size_t k = 1; k < threads; ++k) {
    JudgedSeries& slice = slices[k];
    std::move(slice.flags.begin(), slice.flags.end(), std::back_inserter(all.flags));
    std::move(slice.flaky.begin(), slice.flaky.end(), std::back_inserter(all.flaky));
    all.tests += slice.tests;
    all.environment_tests += slice.environment_tests;
    all.accepted_series += slice.accepted_series;
  }
  return all;
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
  for (const RegressionFinding& f : findings) count += !f.pending && f.alert == "regression";
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
    SetLoadFactors(&*data);
    for (const SeriesRun& r : data->runs) report.runs += r.in_window;
    report.series = static_cast<int>(data->series.size());
    StatusOr<std::vector<Acceptance>> accepted = LoadAcceptances(db);
    if (!accepted.ok()) return accepted.status();
    const Acceptances acceptances(std::move(*accepted));
    JudgedSeries judged = JudgeAll(*data, *baseline, options, acceptances);
    flags = std::move(judged.flags);
    report.flaky = std::move(judged.flaky);
    report.accepted = judged.accepted_series;
    ControlFalseDiscoveries(Test::kShift, judged.tests, options.fdr, &flags);
    ControlFalseDiscoveries(Test::kEnvironment, judged.environment_tests, options.environment_fdr, &flags);
    FG_RETURN_IF_ERROR(FillReasons(db, &flags));
    for (const Flag& f : flags) report.alerts.push_back(f.alert);
    for (const FlakyCell& c : report.flaky) {
      SeriesAlert a;
      a.kind = a.change = "flaky";
      a.track = "status";
      a.cell_id = c.cell_id;
      a.model = c.model;
      a.family = c.family;
      a.nights = static_cast<int>(c.statuses.size());
      report.alerts.push_back(a);
    }
    report.findings = Group(flags, *data);
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return report;
}

}  // namespace framegate
