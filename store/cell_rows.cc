#include "store/cell_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/cell_result_json.h"
#include "store/schema.h"

namespace framegate {

namespace {

// Where a Cell field is kept: cell_specs holds the id's fields once per cell id (with
// `pipeline` and the reference `size`); cells holds the rest per run (a package's folder
// is host-specific: the id keeps only its basename).
bool InCellSpecs(const CellField& field) {
  return field.role == CellField::kIdentity || field.name == std::string("size");
}

// "p.a, p.b, ..." for the Cell fields kept in cell_specs (specs) or cells (!specs).
std::string CellFieldColumns(bool specs, const std::string& prefix) {
  std::string columns;
  VisitCellFields(Cell{}, [&](const CellField& field, const auto&) {
    if (InCellSpecs(field) == specs) columns += (columns.empty() ? "" : ", ") + prefix + field.name;
  });
  return columns;
}

int CellFieldCount(bool specs) {
  int n = 0;
  VisitCellFields(Cell{}, [&](const CellField& field, const auto&) { n += InCellSpecs(field) == specs; });
  return n;
}

std::string Placeholders(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += i ? ", ?" : "?";
  return text;
}

// The columns after a cell's fields in cells, in CellRowWriter's and ReadCellColumns'
// order (latency_median_s, written last, is read third: run_rows.cc reads it there).
constexpr const char* kCellResultColumns =
    "policy_used, status, reason, error_class, error_module, error_op, golden, artifacts_dir, "
    "repro, observed, judged_by, first_nonfinite_step, decoded_nan, decoded_inf, "
    "frame_defects, defect, defect_frames, nonfinite_found, nonfinite_step, nonfinite_module, "
    "nonfinite_op, nonfinite_nan, nonfinite_inf, producer_module, producer_op, producer_error, "
    "producer_predicted, producer_note, warmup, load_seconds, decode_seconds, "
    "peak_rss_bytes, peak_device_bytes";
constexpr int kCellResultColumnCount = 33;

std::string WithPrefix(const std::string& columns, const std::string& prefix) {
  std::string text = prefix;
  for (char c : columns) text += c == ' ' ? " " + prefix : std::string(1, c);
  return text;
}

const std::string& CellSelectColumnsText() {
  static const std::string text = "c.id, c.cell_id, c.latency_median_s, " + CellFieldColumns(true, "s.") +
                                  ", " + CellFieldColumns(false, "c.") + ", " +
                                  WithPrefix(kCellResultColumns, "c.");
  return text;
}

}  // namespace

const char* const kCellSelectColumns = CellSelectColumnsText().c_str();

const char* const kMetricSelectColumns =
    "m.cell_row, m.min_psnr, m.mean_ssim, m.min_ssim, m.max_abs, m.rel_l2, "
    "m.temporal_rel_l2, m.latent_cosine, m.has_fp64_ref, m.fp64_error_ratio";

const char* const kAdviceSelectColumns =
    "a.cell_row, a.status_before, a.status_after, a.islands, a.policy_name, a.policy_toml, "
    "a.fp32_weight_fraction, a.runs, a.note, a.verified";

namespace {

constexpr const char* kInsertAdvice =
    "INSERT INTO advice (cell_row, status_before, status_after, islands, policy_name, "
    "policy_toml, fp32_weight_fraction, runs, note, verified) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

std::string JoinDefects(const std::vector<FrameDefect>& frames) {
  std::string text;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i) text += ',';
    text += FrameDefectName(frames[i]);
  }
  return text;
}

FrameDefect DefectNamed(const std::string& name) {
  for (FrameDefect d : {FrameDefect::kNonfinite, FrameDefect::kBlack, FrameDefect::kWhite,
                        FrameDefect::kUniform, FrameDefect::kFrozen}) {
    if (name == FrameDefectName(d)) return d;
  }
  return FrameDefect::kNone;
}

std::vector<FrameDefect> SplitDefects(const std::string& text) {
  std::vector<FrameDefect> frames;
  if (text.empty()) return frames;
  std::istringstream in(text);
  for (std::string name; std::getline(in, name, ',');) frames.push_back(DefectNamed(name));
  return frames;
}

std::vector<std::string> ParseRequirements(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const nlohmann::json& item : j) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

Status Prepared(SqliteDb& db, const std::string& sql, std::optional<SqliteStatement>* out) {
  StatusOr<SqliteStatement> stmt = db.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  out->emplace(std::move(*stmt));
  return Status::Ok();
}

// A Cell field's value in a bound statement and back from a row.
void BindField(SqliteBinder& bind, const std::string& value) { bind << value; }
void BindField(SqliteBinder& bind, uint64_t value) { bind << static_cast<int64_t>(value); }
void BindField(SqliteBinder& bind, int value) { bind << value; }
void BindField(SqliteBinder& bind, double value) { bind << value; }
void BindField(SqliteBinder& bind, const std::vector<std::string>& value) {
  bind << nlohmann::json(value).dump();
}
void ReadField(const SqliteStatement& row, int i, std::string* value) { *value = row.Text(i); }
void ReadField(const SqliteStatement& row, int i, uint64_t* value) {
  *value = static_cast<uint64_t>(row.Int(i));
}
void ReadField(const SqliteStatement& row, int i, int* value) { *value = static_cast<int>(row.Int(i)); }
void ReadField(const SqliteStatement& row, int i, double* value) { *value = row.Real(i); }
void ReadField(const SqliteStatement& row, int i, std::vector<std::string>* value) {
  *value = ParseRequirements(row.Text(i));
}

}  // namespace

Status ReadCellColumns(const SqliteStatement& row, int first, const std::string& db_path, CellResult* r) {
  // After id, cell_id and latency_median_s: the cell_specs fields, then the cells fields
  // (CellSelectColumnsText).
  int i = first + 3;
  for (const bool specs : {true, false}) {
    VisitCellFields(r->cell, [&](const CellField& field, auto& value) {
      if (InCellSpecs(field) == specs) ReadField(row, i++, &value);
    });
  }
  r->policy_used = row.Text(i++);
  const std::string status = row.Text(i++);
  std::optional<CellStatus> parsed = ParseStatus(status);
  if (!parsed) {
    return Status::Corrupt(db_path + ": cell " + row.Text(first + 1) + " has status '" + status +
                           "', unknown to this framegate");
  }
  r->status = *parsed;
  r->reason = row.Text(i++);
  r->error_class = row.Text(i++);
  r->error_module = row.Text(i++);
  r->error_op = row.Text(i++);
  r->golden = row.Text(i++);
  r->artifacts_dir = row.Text(i++);
  r->repro = row.Text(i++);
  r->observed = row.Text(i++);
  r->judged_by = row.Text(i++);
  FrameHealth& h = r->health;
  h.first_nonfinite_step = static_cast<int>(row.Int(i++));
  h.decoded = {row.Int(i), row.Int(i + 1)};
  i += 2;
  h.frames = SplitDefects(row.Text(i++));
  h.defect = DefectNamed(row.Text(i++));
  h.defect_frames = static_cast<int>(row.Int(i++));
  FirstNonfinite& f = r->first_nonfinite;
  f.found = row.Int(i++) != 0;
  f.step = static_cast<int>(row.Int(i++));
  f.module = row.Text(i++);
  f.op = row.Text(i++);
  f.count = {row.Int(i), row.Int(i + 1)};
  i += 2;
  ErrorProducer& p = r->producer;
  p.module = row.Text(i++);
  p.op = row.Text(i++);
  p.found = !p.module.empty();
  p.isolated_error = row.IsNull(i) ? 0 : row.Real(i);
  ++i;
  p.predicted_error = row.IsNull(i) ? 0 : row.Real(i);
  ++i;
  p.note = row.Text(i++);
  CellTimings& t = r->timings;
  t.warmup = static_cast<int>(row.Int(i++));
  t.load_seconds = row.Real(i++);
  t.decode_seconds = row.Real(i++);
  t.peak_rss_bytes = row.Int(i++);
  t.peak_device_bytes = row.Int(i++);
  return Status::Ok();
}

void ReadMetricColumns(const SqliteStatement& row, int first, std::optional<ComparisonMetrics>* metrics) {
  if (row.IsNull(first)) {
    metrics->reset();
    return;
  }
  ComparisonMetrics m;
  int i = first + 1;
  m.video.min_psnr = row.Real(i++);
  m.video.mean_ssim = row.Real(i++);
  m.video.min_ssim = row.Real(i++);
  m.video.max_abs = row.Real(i++);
  m.video.rel_l2 = row.Real(i++);
  m.video.temporal_rel_l2 = row.Real(i++);
  m.latent_cosine = row.Real(i++);
  if (row.Int(i++) != 0) m.fp64_error_ratio = row.Real(i);
  *metrics = m;
}

Status ReadAdviceColumns(const SqliteStatement& row, int first, const std::string& db_path,
                         CellResult* result) {
  if (row.IsNull(first)) {
    result->advice.reset();
    return Status::Ok();
  }
  // Through AdviceFromJson, so that the store and the JSON read one form of the runs.
  const int i = first + 1;
  try {
    nlohmann::json j = {{"status_before", row.Text(i)},
                        {"status_after", row.Text(i + 1)},
                        {"islands", nlohmann::json::parse(row.Text(i + 2))},
                        {"policy_name", row.Text(i + 3)},
                        {"policy_toml", row.Text(i + 4)},
                        {"fp32_weight_fraction", row.Real(i + 5)},
                        {"runs", nlohmann::json::parse(row.Text(i + 6))},
                        {"note", row.Text(i + 7)},
                        {"verified", row.Int(i + 8) != 0}};
    result->advice = AdviceFromJson(j);
  } catch (const std::exception& e) {
    return Status::Corrupt(db_path + ": cell " + result->cell.Id() +
                           " has an advice row that does not read: " + e.what());
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CellRowWriter>> CellRowWriter::Prepare(SqliteDb& db) {
  std::unique_ptr<CellRowWriter> w(new CellRowWriter());
  w->db_ = &db;
  FG_RETURN_IF_ERROR(Prepared(db,
                              "INSERT OR IGNORE INTO cell_specs (cell_id, pipeline, " +
                                  CellFieldColumns(true, "") + ") VALUES (" +
                                  Placeholders(2 + CellFieldCount(true)) + ")",
                              &w->insert_spec_));
  FG_RETURN_IF_ERROR(Prepared(db, "DELETE FROM cells WHERE run_id = ? AND cell_id = ?", &w->delete_cell_));
  FG_RETURN_IF_ERROR(Prepared(db,
                              "INSERT INTO cells (run_id, cell_id, " + CellFieldColumns(false, "") + ", " +
                                  kCellResultColumns + ", latency_median_s) VALUES (" +
                                  Placeholders(3 + CellFieldCount(false) + kCellResultColumnCount) + ")",
                              &w->insert_cell_));
  FG_RETURN_IF_ERROR(Prepared(db,
                              "INSERT INTO metrics (cell_row, min_psnr, mean_ssim, min_ssim, "
                              "max_abs, rel_l2, temporal_rel_l2, latent_cosine, has_fp64_ref, "
                              "fp64_error_ratio) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              &w->insert_metrics_));
  FG_RETURN_IF_ERROR(Prepared(db, "INSERT INTO samples (cell_row, kind, idx, value) VALUES (?, ?, ?, ?)",
                              &w->insert_sample_));
  FG_RETURN_IF_ERROR(Prepared(db,
                              "INSERT INTO probes (cell_row, idx, module, dtype, absmax, "
                              "overflow_fraction, underflow_fraction, headroom_bits, sqnr_db) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              &w->insert_probe_));
  FG_RETURN_IF_ERROR(Prepared(db, kInsertAdvice, &w->insert_advice_));
  return w;
}

StatusOr<int64_t> CellRowWriter::Write(const std::string& run_id, const CellResult& r) {
  const Cell& c = r.cell;
  const std::string cell_id = c.Id();
  SqliteBinder spec(*insert_spec_);
  spec << cell_id << c.Pipeline();
  VisitCellFields(c, [&](const CellField& field, const auto& value) {
    if (InCellSpecs(field)) BindField(spec, value);
  });
  FG_RETURN_IF_ERROR(insert_spec_->Run());
  FG_RETURN_IF_ERROR(delete_cell_->Bind(1, run_id).Bind(2, cell_id).Run());

  SqliteStatement& row = *insert_cell_;
  SqliteBinder bind(row);
  bind << run_id << cell_id;
  VisitCellFields(c, [&](const CellField& field, const auto& value) {
    if (!InCellSpecs(field)) BindField(bind, value);
  });
  bind << (r.policy_used.empty() ? c.policy : r.policy_used) << std::string(StatusName(r.status)) << r.reason
       << r.error_class << r.error_module << r.error_op << r.golden << r.artifacts_dir << r.repro
       << r.observed << r.judged_by;
  const FrameHealth& h = r.health;
  bind << h.first_nonfinite_step << h.decoded.nan << h.decoded.inf << JoinDefects(h.frames)
       << std::string(FrameDefectName(h.defect)) << h.defect_frames;
  const FirstNonfinite& f = r.first_nonfinite;
  bind << static_cast<int>(f.found) << f.step << f.module << f.op << f.count.nan << f.count.inf;
  const ErrorProducer& p = r.producer;
  bind << (p.found ? p.module : std::string()) << p.op << p.isolated_error << p.predicted_error << p.note;
  const CellTimings& t = r.timings;
  bind << t.warmup << t.load_seconds << t.decode_seconds << t.peak_rss_bytes << t.peak_device_bytes
       << Median(r.timings.generation_seconds);
  FG_RETURN_IF_ERROR(row.Run());
  const int64_t cell_row = db_->LastInsertRowId();

  if (r.metrics) {
    const ComparisonMetrics& m = *r.metrics;
    SqliteStatement& mrow = *insert_metrics_;
    mrow.Bind(1, cell_row).Bind(2, m.video.min_psnr).Bind(3, m.video.mean_ssim);
    mrow.Bind(4, m.video.min_ssim).Bind(5, m.video.max_abs).Bind(6, m.video.rel_l2);
    mrow.Bind(7, m.video.temporal_rel_l2).Bind(8, m.latent_cosine);
    mrow.Bind(9, static_cast<int64_t>(m.fp64_error_ratio.has_value()));
    if (m.fp64_error_ratio) {
      mrow.Bind(10, *m.fp64_error_ratio);
    } else {
      mrow.BindNull(10);
    }
    FG_RETURN_IF_ERROR(mrow.Run());
  }
  FG_RETURN_IF_ERROR(WriteSamples(cell_row, r));
  SqliteStatement& probe = *insert_probe_;
  for (size_t k = 0; k < r.probes.size(); ++k) {
    const ModuleProbe& p = r.probes[k];
    probe.Bind(1, cell_row).Bind(2, static_cast<int64_t>(k)).Bind(3, p.module);
    probe.Bind(4, p.dtype).Bind(5, p.absmax).Bind(6, p.overflow_fraction);
    probe.Bind(7, p.underflow_fraction).Bind(8, p.headroom_bits).Bind(9, p.sqnr_db);
    FG_RETURN_IF_ERROR(probe.Run());
  }
  if (r.advice) FG_RETURN_IF_ERROR(WriteAdvice(cell_row, *r.advice));
  return cell_row;
}

Status CellRowWriter::WriteAdvice(int64_t cell_row, const Advice& a) {
  const nlohmann::json j = AdviceToJson(a);  // islands and runs in the JSON report's form
  // A reason from an exception may hold bytes that are not UTF-8: replaced, never thrown.
  auto text = [](const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  SqliteBinder bind(*insert_advice_);
  bind << cell_row << std::string(StatusName(a.status_before)) << std::string(StatusName(a.status_after))
       << text(j.at("islands")) << a.policy_name << a.policy_toml << a.fp32_weight_fraction
       << text(j.at("runs")) << a.note << static_cast<int64_t>(a.verified ? 1 : 0);
  return insert_advice_->Run();
}

Status CellRowWriter::WriteSamples(int64_t cell_row, const CellResult& r) {
  SqliteStatement& s = *insert_sample_;
  auto put_reals = [&](const char* kind, const std::vector<double>& values) -> Status {
    for (size_t k = 0; k < values.size(); ++k) {
      s.Bind(1, cell_row).BindStatic(2, kind).Bind(3, static_cast<int64_t>(k));
      FG_RETURN_IF_ERROR(s.Bind(4, values[k]).Run());
    }
    return Status::Ok();
  };
  FG_RETURN_IF_ERROR(put_reals(sample_kind::kGenerationSeconds, r.timings.generation_seconds));
  FG_RETURN_IF_ERROR(put_reals(sample_kind::kStepSeconds, r.timings.step_seconds));
  if (r.metrics) {
    std::vector<double> psnr, ssim;
    for (const FrameScores& f : r.metrics->video.frames) {
      psnr.push_back(f.psnr);
      ssim.push_back(f.ssim);
    }
    FG_RETURN_IF_ERROR(put_reals(sample_kind::kFramePsnr, psnr));
    FG_RETURN_IF_ERROR(put_reals(sample_kind::kFrameSsim, ssim));
  }
  const std::vector<NonfiniteCount>& steps = r.health.step_latents;
  for (size_t k = 0; k < steps.size(); ++k) {
    for (const auto& [kind, count] :
         {std::pair(sample_kind::kStepNan, steps[k].nan), std::pair(sample_kind::kStepInf, steps[k].inf)}) {
      s.Bind(1, cell_row).BindStatic(2, kind).Bind(3, static_cast<int64_t>(k));
      FG_RETURN_IF_ERROR(s.Bind(4, count).Run());
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<CellChildReader>> CellChildReader::Prepare(SqliteDb& db) {
  std::unique_ptr<CellChildReader> r(new CellChildReader());
  FG_RETURN_IF_ERROR(Prepared(
      db, "SELECT kind, idx, value FROM samples WHERE cell_row = ? ORDER BY kind, idx", &r->samples_));
  FG_RETURN_IF_ERROR(Prepared(db,
                              "SELECT module, dtype, absmax, overflow_fraction, "
                              "underflow_fraction, headroom_bits, sqnr_db FROM probes WHERE "
                              "cell_row = ? ORDER BY idx",
                              &r->probes_));
  return r;
}

Status CellChildReader::ReadSamples(int64_t cell_row, CellResult* r) {
  SqliteStatement& s = samples_->Bind(1, cell_row);
  std::vector<FrameScores>* frames = r->metrics ? &r->metrics->video.frames : nullptr;
  for (;;) {
    StatusOr<bool> more = s.Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    const std::string kind = s.Text(0);
    const size_t idx = static_cast<size_t>(s.Int(1));
    auto at = [idx](auto& vec) -> auto& {
      if (vec.size() <= idx) vec.resize(idx + 1);
      return vec[idx];
    };
    if (kind == sample_kind::kGenerationSeconds) {
      at(r->timings.generation_seconds) = s.Real(2);
    } else if (kind == sample_kind::kStepSeconds) {
      at(r->timings.step_seconds) = s.Real(2);
    } else if (kind == sample_kind::kFramePsnr && frames) {
      at(*frames).psnr = s.Real(2);
    } else if (kind == sample_kind::kFrameSsim && frames) {
      at(*frames).ssim = s.Real(2);
    } else if (kind == sample_kind::kStepNan) {
      at(r->health.step_latents).nan = s.Int(2);
    } else if (kind == sample_kind::kStepInf) {
      at(r->health.step_latents).inf = s.Int(2);
    }
  }
  s.Reset();
  return Status::Ok();
}

Status CellChildReader::ReadProbes(int64_t cell_row, CellResult* r) {
  SqliteStatement& p = probes_->Bind(1, cell_row);
  for (;;) {
    StatusOr<bool> more = p.Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    r->probes.push_back({p.Text(0), p.Text(1), p.Real(2), p.Real(3), p.Real(4), p.Real(5), p.Real(6)});
  }
  p.Reset();
  return Status::Ok();
}

}  // namespace framegate
