#include "harness/cell_result_json.h"

#include <cmath>
#include <limits>

namespace framegate {
namespace {

using nlohmann::json;

// JSON has no NaN or infinity: they are written as the strings "NaN", "Infinity" and
// "-Infinity", except an infinite PSNR, which is null (as `framegate metrics` promises).
json Number(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "Infinity" : "-Infinity";
}
json Psnr(double v) { return std::isinf(v) && v > 0 ? json(nullptr) : Number(v); }

double ReadNumber(const json& v, double null_value) {
  if (v.is_null()) return null_value;
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    throw std::invalid_argument("'" + text + "' is not a number");
  }
  return v.get<double>();
}
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

json CountToJson(const NonfiniteCount& c) { return {{"nan", c.nan}, {"inf", c.inf}}; }
NonfiniteCount CountFromJson(const json& j) {
  return {j.at("nan").get<int64_t>(), j.at("inf").get<int64_t>()};
}

FrameDefect DefectFromName(const std::string& name) {
  for (FrameDefect d : {FrameDefect::kNonfinite, FrameDefect::kBlack, FrameDefect::kWhite,
                        FrameDefect::kUniform, FrameDefect::kFrozen}) {
    if (name == FrameDefectName(d)) return d;
  }
  if (name != "none") throw std::invalid_argument("unknown frame defect '" + name + "'");
  return FrameDefect::kNone;
}

json HealthToJson(const FrameHealth& h) {
  json steps = json::array();
  for (const NonfiniteCount& c : h.step_latents) steps.push_back(CountToJson(c));
  json frames = json::array();
  for (FrameDefect d : h.frames) frames.push_back(FrameDefectName(d));
  return {{"step_latents", steps},
          {"first_nonfinite_step", h.first_nonfinite_step},
          {"decoded", CountToJson(h.decoded)},
          {"frames", frames},
          {"defect", FrameDefectName(h.defect)},
          {"defect_frames", h.defect_frames}};
}

FrameHealth HealthFromJson(const json& j) {
  FrameHealth h;
  for (const json& c : j.at("step_latents")) h.step_latents.push_back(CountFromJson(c));
  h.first_nonfinite_step = j.at("first_nonfinite_step").get<int>();
  h.decoded = CountFromJson(j.at("decoded"));
  for (const json& f : j.at("frames")) h.frames.push_back(DefectFromName(f.get<std::string>()));
  h.defect = DefectFromName(j.at("defect").get<std::string>());
  h.defect_frames = j.at("defect_frames").get<int>();
  return h;
}

json TimingsToJson(const CellTimings& t) {
  return {{"warmup", t.warmup},
          {"load_seconds", t.load_seconds},
          {"generation_seconds", t.generation_seconds},
          {"step_seconds", t.step_seconds},
          {"decode_seconds", t.decode_seconds},
          {"peak_rss_bytes", t.peak_rss_bytes},
          {"peak_device_bytes", t.peak_device_bytes}};
}

CellTimings TimingsFromJson(const json& j) {
  CellTimings t;
  t.warmup = j.at("warmup").get<int>();
  t.load_seconds = j.at("load_seconds").get<double>();
  t.generation_seconds = j.at("generation_seconds").get<std::vector<double>>();
  t.step_seconds = j.at("step_seconds").get<std::vector<double>>();
  t.decode_seconds = j.at("decode_seconds").get<double>();
  t.peak_rss_bytes = j.at("peak_rss_bytes").get<int64_t>();
  t.peak_device_bytes = j.at("peak_device_bytes").get<int64_t>();
  return t;
}

ComparisonMetrics MetricsFromJson(const json& j) {
  ComparisonMetrics m;
  for (const json& f : j.at("frames")) {
    m.video.frames.push_back({ReadNumber(f.at("psnr"), kInf), ReadNumber(f.at("ssim"), kNaN)});
  }
  m.video.min_psnr = ReadNumber(j.at("min_psnr"), kInf);
  m.video.mean_ssim = ReadNumber(j.at("mean_ssim"), kNaN);
  m.video.min_ssim = ReadNumber(j.at("min_ssim"), kNaN);
  m.video.max_abs = ReadNumber(j.at("max_abs"), kNaN);
  m.video.rel_l2 = ReadNumber(j.at("rel_l2"), kNaN);
  m.video.temporal_rel_l2 = ReadNumber(j.at("temporal_rel_l2"), kNaN);
  m.latent_cosine = ReadNumber(j.at("latent_cosine"), kNaN);
  if (j.contains("fp64_error_ratio")) {
    m.fp64_error_ratio = ReadNumber(j.at("fp64_error_ratio"), kNaN);
  }
  m.video.ssim_measured = j.value("ssim_measured", true);
  return m;
}

CellStatus StatusFromJson(const json& j) {
  const std::string name = j.get<std::string>();
  const std::optional<CellStatus> status = ParseStatus(name);
  if (!status) throw std::invalid_argument("unknown status '" + name + "'");
  return *status;
}

}  // namespace

json MetricsToJson(const ComparisonMetrics& m) {
  json frames = json::array();
  for (const FrameScores& f : m.video.frames) {
    frames.push_back({{"psnr", Psnr(f.psnr)}, {"ssim", Number(f.ssim)}});
  }
  json j = {{"frames", frames}};
  for (const NamedMetric& n : NamedMetrics(m)) {
    j[n.name] = n.name == "min_psnr" ? Psnr(n.value) : Number(n.value);
  }
  if (!m.video.ssim_measured) j["ssim_measured"] = false;
  return j;
}

json AdviceToJson(const Advice& a) {
  json runs = json::array();
  for (const AdviceRun& run : a.runs) {
    json entry = {{"islands", run.islands}, {"status", StatusName(run.status)}, {"reason", run.reason}};
    if (run.seed) entry["seed"] = *run.seed;
    runs.push_back(std::move(entry));
  }
  return {{"status_before", StatusName(a.status_before)},
          {"status_after", StatusName(a.status_after)},
          {"islands", a.islands},
          {"policy_name", a.policy_name},
          {"policy_toml", a.policy_toml},
          {"fp32_weight_fraction", Number(a.fp32_weight_fraction)},
          {"culprit", a.culprit},
          {"culprit_weight_fraction", Number(a.culprit_weight_fraction)},
          {"note", a.note},
          {"verified", a.verified},
          {"runs", runs}};
}

Advice AdviceFromJson(const json& j) {
  Advice a;
  a.status_before = StatusFromJson(j.at("status_before"));
  a.status_after = StatusFromJson(j.at("status_after"));
  a.islands = j.at("islands").get<std::vector<std::string>>();
  a.policy_name = j.at("policy_name").get<std::string>();
  a.policy_toml = j.at("policy_toml").get<std::string>();
  a.fp32_weight_fraction = ReadNumber(j.at("fp32_weight_fraction"), kNaN);
  a.culprit = j.value("culprit", "");
  a.culprit_weight_fraction =
      j.contains("culprit_weight_fraction") ? ReadNumber(j.at("culprit_weight_fraction"), kNaN) : 0.0;
  a.note = j.value("note", "");
  a.verified = j.value("verified", true);
  for (const json& run : j.at("runs")) {
    a.runs.push_back({run.at("islands").get<std::vector<std::string>>(), StatusFromJson(run.at("status")),
                      run.at("reason").get<std::string>()});
    if (run.contains("seed")) a.runs.back().seed = run.at("seed").get<uint64_t>();
  }
  return a;
}

json ReplayToJson(const StepReplay& p) {
  json steps = json::array(), norms = json::array();
  for (double e : p.step_rel_l2) steps.push_back(Number(e));
  for (const std::vector<double>& step : p.module_norms) {
    json row = json::array();
    for (double n : step) row.push_back(Number(n));
    norms.push_back(row);
  }
  return {{"step_rel_l2", steps},
          {"decode_rel_l2", Number(p.decode_rel_l2)},
          {"decode_violation", p.decode_violation},
          {"decode_min_psnr", Number(p.decode_min_psnr)},
          {"decode_psnr_bound", Number(p.decode_psnr_bound)},
          {"step_budget", Number(p.step_budget)},
          {"first_nonfinite_step", p.first_nonfinite_step},
          {"digest", p.digest},
          {"modules", p.modules},
          {"module_norms", norms},
          {"seconds", Number(p.seconds)}};
}

StepReplay ReplayFromJson(const json& j) {
  StepReplay p;
  for (const json& e : j.at("step_rel_l2")) p.step_rel_l2.push_back(ReadNumber(e, kNaN));
  p.decode_rel_l2 = ReadNumber(j.at("decode_rel_l2"), kNaN);
  p.decode_violation = j.at("decode_violation").get<std::string>();
  p.decode_min_psnr = ReadNumber(j.at("decode_min_psnr"), kNaN);
  p.decode_psnr_bound = ReadNumber(j.at("decode_psnr_bound"), kNaN);
  if (j.contains("step_budget")) p.step_budget = ReadNumber(j.at("step_budget"), kNaN);
  p.first_nonfinite_step = j.at("first_nonfinite_step").get<int>();
  p.digest = j.at("digest").get<std::string>();
  p.modules = j.at("modules").get<std::vector<std::string>>();
  for (const json& row : j.at("module_norms")) {
    p.module_norms.emplace_back();
    for (const json& n : row) p.module_norms.back().push_back(ReadNumber(n, kNaN));
  }
  p.seconds = ReadNumber(j.at("seconds"), kNaN);
  return p;
}

json CellToJson(const Cell& c) {
  json j = {{"cell_id", c.Id()}, {"pipeline", c.Pipeline()}};
  VisitCellFields(c, [&](const CellField& field, const auto& value) { j[field.name] = value; });
  if (!c.model_dir.empty()) j["size"] = nullptr;  // a package's cell has no reference size
  return j;
}

StatusOr<Cell> CellFromJson(const json& j) {
  try {
    Cell c;
    // A key left out (an older writer) keeps the default; the id check below catches an
    // identity field that was lost.
    VisitCellFields(c, [&](const CellField& field, auto& value) {
      const auto v = j.find(field.name);
      if (v != j.end() && !v->is_null()) v->get_to(value);
    });
    if (j.at("cell_id").get<std::string>() != c.Id()) {
      return Status::InvalidInput("cell_id does not match the cell's fields");
    }
    return c;
  } catch (const std::exception& e) {
    return Status::InvalidInput(std::string("cell JSON: ") + e.what());
  }
}

json CellResultToJson(const CellResult& r) {
  const Cell& c = r.cell;
  json probes = json::array();
  for (const ModuleProbe& p : r.probes) {
    probes.push_back({{"module", p.module},
                      {"dtype", p.dtype},
                      {"absmax", Number(p.absmax)},
                      {"overflow_fraction", Number(p.overflow_fraction)},
                      {"underflow_fraction", Number(p.underflow_fraction)},
                      {"headroom_bits", Number(p.headroom_bits)},
                      {"sqnr_db", Number(p.sqnr_db)}});
  }
  json first = {{"found", r.first_nonfinite.found}};
  if (r.first_nonfinite.found) {
    first["step"] = r.first_nonfinite.step;
    first["module"] = r.first_nonfinite.module;
    first["op"] = r.first_nonfinite.op;
    first["nan"] = r.first_nonfinite.count.nan;
    first["inf"] = r.first_nonfinite.count.inf;
  }
  json producer = nullptr;
  if (r.producer.attempted()) {
    const ErrorProducer& p = r.producer;
    producer = {{"found", p.found},
                {"module", p.module},
                {"op", p.op},
                {"isolated_error", Number(p.isolated_error)},
                {"predicted_error", Number(p.predicted_error)},
                {"note", p.note}};
    if (!p.norm_module.empty()) {
      producer["norm_module"] = p.norm_module;
      producer["norm_op"] = p.norm_op;
    }
  }
  json j = CellToJson(c);
  const json rest = {{"policy_used", r.policy_used.empty() ? c.policy : r.policy_used},
                     {"status", StatusName(r.status)},
                     {"reason", r.reason},
                     {"error_class", r.error_class},
                     {"error_module", r.error_module},
                     {"error_op", r.error_op},
                     {"error_float32_origin", r.error_float32_origin},
                     {"judged_by", r.judged_by},
                     {"metrics", r.metrics ? MetricsToJson(*r.metrics) : json(nullptr)},
                     {"health", HealthToJson(r.health)},
                     {"first_nonfinite", first},
                     {"producer", producer},
                     {"probes", probes},
                     {"observed", r.observed},
                     {"advice", r.advice ? AdviceToJson(*r.advice) : json(nullptr)},
                     {"timings", TimingsToJson(r.timings)},
                     {"golden", r.golden},
                     {"artifacts_dir", r.artifacts_dir},
                     {"repro", r.repro}};
  j.update(rest);
  if (!r.replays.empty()) {
    json& replays = j["replays"] = json::array();
    for (const StepReplay& p : r.replays) replays.push_back(ReplayToJson(p));
  }
  return j;
}

StatusOr<CellResult> CellResultFromJson(const json& j) {
  try {
    CellResult r;
    StatusOr<Cell> cell = CellFromJson(j);
    if (!cell.ok()) return cell.status();
    r.cell = *cell;
    r.policy_used = j.at("policy_used").get<std::string>();
    const std::string status = j.at("status").get<std::string>();
    const std::optional<CellStatus> parsed = ParseStatus(status);
    if (!parsed) return Status::InvalidInput("unknown status '" + status + "'");
    r.status = *parsed;
    r.reason = j.at("reason").get<std::string>();
    r.error_class = j.at("error_class").get<std::string>();
    if (!j.at("metrics").is_null()) r.metrics = MetricsFromJson(j.at("metrics"));
    r.health = HealthFromJson(j.at("health"));
    const json& first = j.at("first_nonfinite");
    r.first_nonfinite.found = first.at("found").get<bool>();
    if (r.first_nonfinite.found) {
      r.first_nonfinite.step = first.at("step").get<int>();
      r.first_nonfinite.module = first.at("module").get<std::string>();
      r.first_nonfinite.op = first.value("op", "");
      r.first_nonfinite.count = CountFromJson(first);
    }
    r.error_module = j.value("error_module", "");
    r.error_op = j.value("error_op", "");
    r.error_float32_origin = j.value("error_float32_origin", "");
    r.observed = j.value("observed", "");
    r.judged_by = j.value("judged_by", "");
    if (j.contains("producer") && !j.at("producer").is_null()) {
      const json& p = j.at("producer");
      r.producer.found = p.at("found").get<bool>();
      r.producer.module = p.at("module").get<std::string>();
      r.producer.op = p.at("op").get<std::string>();
      r.producer.isolated_error = ReadNumber(p.at("isolated_error"), kNaN);
      r.producer.predicted_error = ReadNumber(p.at("predicted_error"), kNaN);
      r.producer.note = p.at("note").get<std::string>();
      r.producer.norm_module = p.value("norm_module", "");
      r.producer.norm_op = p.value("norm_op", "");
    }
    if (j.contains("advice") && !j.at("advice").is_null()) r.advice = AdviceFromJson(j.at("advice"));
    for (const json& p : j.at("probes")) {
      r.probes.push_back({p.at("module").get<std::string>(), p.at("dtype").get<std::string>(),
                          ReadNumber(p.at("absmax"), kNaN), ReadNumber(p.at("overflow_fraction"), kNaN),
                          ReadNumber(p.at("underflow_fraction"), kNaN),
                          ReadNumber(p.at("headroom_bits"), kInf),
                          p.contains("sqnr_db") ? ReadNumber(p.at("sqnr_db"), kInf) : kNaN});
    }
    r.timings = TimingsFromJson(j.at("timings"));
    r.golden = j.at("golden").get<std::string>();
    r.artifacts_dir = j.at("artifacts_dir").get<std::string>();
    r.repro = j.at("repro").get<std::string>();
    if (j.contains("replays")) {
      for (const json& p : j.at("replays")) r.replays.push_back(ReplayFromJson(p));
    }
    return r;
  } catch (const std::exception& e) {
    return Status::InvalidInput(std::string("cell result JSON: ") + e.what());
  }
}

}  // namespace framegate
