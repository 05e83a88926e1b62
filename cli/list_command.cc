// framegate list [MATRIX] [--filter EXPR] [--shard i/n] [--json]: the expanded cells of
// a matrix and which of them this host cannot run (UNSUPPORTED here, with why), without
// running anything.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/command_table.h"
#include "cli/output_file.h"
#include "harness/cell_result_json.h"
#include "matrix/cell_filter.h"
#include "matrix/device_discovery.h"
#include "matrix/matrix_spec.h"
#include "matrix/shard.h"
#include "matrix/unsupported.h"

namespace framegate {
namespace {

struct ListOptions {
  std::string matrix = "matrix/local.toml";
  std::string filter;
  std::string shard;
  std::string json_path;  // --json FILE ("-": stdout)
};

nlohmann::json ListedCellJson(const Cell& c, const std::string& unsupported) {
  nlohmann::json j = CellToJson(c);
  j["label"] = c.Label();
  j["unsupported"] = unsupported;
  return j;
}

// The set fields the table has no column for, for its text: " sampler=euler steps=4
// requires=cuda" (xfail is printed after them).
std::string Extras(const Cell& c) {
  std::string text;
  VisitCellFields(c, [&](const CellField& field, const auto& value) {
    const std::string name = field.name;
    const bool column = field.role == CellField::kPipeline || name == "device" || name == "policy" ||
                        name == "seed" || name == "fault" || name == "xfail" || name == "policy_file";
    if (!column && !IsUnset(field, value)) text += " " + name + "=" + FieldText(value);
  });
  return text.empty() ? "" : " " + text;
}

void PrintTable(const MatrixSpec& spec, const std::vector<Cell>& cells,
                const std::vector<std::string>& unsupported, const std::string& selection) {
  int n_unsupported = 0;
  for (const std::string& u : unsupported) n_unsupported += u.empty() ? 0 : 1;
  std::cout << spec.source << " (" << spec.name << "): " << cells.size() << " cells" << selection << ", "
            << n_unsupported << " UNSUPPORTED here\n";
  size_t w_pipe = 8, w_dev = 6, w_pol = 6, w_fault = 5;
  for (const Cell& c : cells) {
    w_pipe = std::max(w_pipe, c.Pipeline().size());
    w_dev = std::max(w_dev, c.device.size());
    w_pol = std::max(w_pol, c.policy.size());
    w_fault = std::max(w_fault, c.fault.size());
  }
  std::printf("%-16s  %-*s  %-*s  %-*s  %4s  %s\n", "ID", int(w_pipe), "PIPELINE", int(w_dev), "DEVICE",
              int(w_pol), "POLICY", "SEED", "FAULT");
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    char row[512];
    std::snprintf(row, sizeof(row), "%-16s  %-*s  %-*s  %-*s  %4llu  %-*s", c.Id().c_str(), int(w_pipe),
                  c.Pipeline().c_str(), int(w_dev), c.device.c_str(), int(w_pol), c.policy.c_str(),
                  static_cast<unsigned long long>(c.seed), int(w_fault),
                  c.fault.empty() ? "-" : c.fault.c_str());
    std::string line = row + Extras(c);
    if (!c.xfail.empty()) line += "  xfail: " + c.xfail;
    if (!unsupported[i].empty()) line += "  UNSUPPORTED: " + unsupported[i];
    std::cout << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  }
}

int RunList(const ListOptions& o) {
  const std::vector<DeviceInfo> found = DiscoverDevices();
  StatusOr<MatrixSpec> spec = LoadMatrix(o.matrix, found);
  if (!spec.ok()) return ReportError(spec.status());
  std::vector<Cell> cells = spec->cells;
  std::string selection;
  if (!o.filter.empty()) {
    StatusOr<CellFilter> filter = CellFilter::Parse(o.filter);
    if (!filter.ok()) return ReportError(filter.status());
    cells = filter->Apply(cells);
    selection += " matching '" + o.filter + "'";
  }
  if (!o.shard.empty()) {
    StatusOr<ShardSpec> shard = ParseShard(o.shard);
    if (!shard.ok()) return ReportError(shard.status());
    cells = ShardCells(cells, shard->index, shard->count);
    selection += " in shard " + shard->ToString();
  }
  if (!selection.empty()) selection += " of " + std::to_string(spec->cells.size());
  std::vector<std::string> unsupported;
  for (const Cell& c : cells) {
    StatusOr<std::string> reason = UnsupportedReason(c, found);
    if (!reason.ok()) return ReportError(reason.status());
    unsupported.push_back(*reason);
  }
  if (o.json_path != "-") PrintTable(*spec, cells, unsupported, selection);
  if (o.json_path.empty()) return kExitOk;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < cells.size(); ++i) rows.push_back(ListedCellJson(cells[i], unsupported[i]));
  const nlohmann::json j = {{"matrix", spec->source},
                            {"name", spec->name},
                            {"description", spec->description},
                            {"sha256", spec->sha256},
                            {"repeats", spec->repeats},
                            {"warmup", spec->warmup},
                            {"timeout_seconds", spec->timeout_seconds},
                            {"filter", o.filter.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.filter)},
                            {"shard", o.shard.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.shard)},
                            {"matrix_cells", spec->cells.size()},
                            {"cells", rows}};
  const Status written = WriteOutputFile(o.json_path, j.dump(2) + "\n");
  return written.ok() ? kExitOk : ReportError(written);
}

}  // namespace

Command AddListCommand(CLI::App& parent) {
  auto options = std::make_shared<ListOptions>();
  CLI::App* app = parent.add_subcommand("list", kListSummary);
  app->add_option("matrix", options->matrix,
                  "Matrix file, or a shipped matrix: local, smoke, nightly, qualification")
      ->capture_default_str();
  app->add_option("--filter", options->filter,
                  "Keep the cells where every comma-separated term holds: key=value, "
                  "key!=value, key~text (keys: pipeline, device, policy, fault, seed, sampler, "
                  "steps, guidance, id, size, xfail, requires)");
  app->add_option("--shard", options->shard, "Only shard i of n (1-based), e.g. 2/4");
  AddOutputFileOption(app, "--json", &options->json_path, "Write the cells as JSON");
  return {app, [options] { return RunList(*options); }};
}

}  // namespace framegate
