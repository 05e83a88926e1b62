// MatrixDefinition -> cells: the product of the axes, then exclude, include and xfail,
// with the rules of docs/matrix.md (GitHub Actions' matrix semantics, every identity key
// being an axis, plus two errors: an include that an exclude removes again, and a cell
// that appears twice).
#include <algorithm>
#include <set>

#include "matrix/cell_keys.h"
#include "matrix/matrix_definition.h"

namespace framegate {
namespace {

// Every combination of the axis values, the outer axis first; devices expanded.
std::vector<Cell> AxisProduct(const MatrixDefinition& def, const std::vector<DeviceInfo>& found) {
  Cell base;
  base.requirements = def.requirements;
  std::vector<Cell> cells = {base};
  for (const MatrixAxis& axis : def.axes) {
    std::vector<Cell> values;
    std::set<std::string> devices_seen;
    for (const Cell& value : axis.values) {
      if (axis.key != "device") {
        values.push_back(value);
        continue;
      }
      for (const std::string& device : ExpandDeviceValue(value.device, found)) {
        // "all" and "cpu" both name the CPU: one axis value.
        if (!devices_seen.insert(device).second) continue;
        Cell expanded;
        expanded.device = device;
        values.push_back(expanded);
      }
    }
    std::vector<Cell> next;
    for (const Cell& cell : cells) {
      for (const Cell& value : values) {
        Cell combined = cell;
        CopyKey(value, axis.key, &combined);
        next.push_back(combined);
      }
    }
    cells = std::move(next);
  }
  return cells;
}

void AddRequirements(const std::vector<std::string>& requirements, Cell* cell) {
  for (const std::string& r : requirements) {
    if (std::find(cell->requirements.begin(), cell->requirements.end(), r) == cell->requirements.end())
      cell->requirements.push_back(r);
  }
}

void ApplyInclude(const CellPattern& include, Cell* cell) {
  AddRequirements(include.requirements, cell);
  if (!include.tolerance.empty()) cell->tolerance = include.tolerance;
}

// The new cells an include that matched nothing adds: defaults, then the include's keys.
std::vector<Cell> NewCellsOf(const CellPattern& include, const MatrixDefinition& def,
                             const std::vector<DeviceInfo>& found) {
  Cell cell;
  cell.requirements = def.requirements;
  for (const std::string& key : include.keys) CopyKey(include.values, key, &cell);
  const auto tolerance = def.tolerance.find(cell.policy);
  if (tolerance != def.tolerance.end()) cell.tolerance = tolerance->second;
  ApplyInclude(include, &cell);
  const bool sets_device = std::count(include.keys.begin(), include.keys.end(), "device") > 0;
  if (!sets_device) return {cell};
  std::vector<Cell> cells;
  for (const std::string& device : ExpandDeviceValue(include.values.device, found)) {
    cell.device = device;
    cells.push_back(cell);
  }
  return cells;
}

// Cells added by includes: each with the include that added it.
struct AddedCell {
  Cell cell;
  const CellPattern* include;
};

// The include rules on `cells` (the product after exclusion); returns the new cells.
StatusOr<std::vector<AddedCell>> ApplyIncludes(const MatrixDefinition& def,
                                               const std::vector<DeviceInfo>& found,
                                               std::vector<Cell>* cells) {
  std::vector<AddedCell> added;
  for (const CellPattern& include : def.include) {
    bool matched = false;
    for (Cell& cell : *cells) {
      if (!PatternMatches(include, cell)) continue;
      matched = true;
      ApplyInclude(include, &cell);
    }
    if (matched) continue;
    for (const Cell& cell : NewCellsOf(include, def, found)) {
      for (const CellPattern& exclude : def.exclude) {
        if (PatternMatches(exclude, cell))
          return Status::InvalidInput(include.where + ": include adds '" + cell.Label() +
                                      "' but the exclude at " + exclude.where +
                                      " removes it: drop one of the two");
      }
      added.push_back({cell, &include});
    }
  }
  return added;
}

}  // namespace

std::vector<std::string> ExpandDeviceValue(const std::string& value, const std::vector<DeviceInfo>& found) {
  if (value != "cuda" && value != "all" && value != "cpu:*") return {value};
  std::vector<std::string> devices;
  for (const DeviceInfo& d : found) {
    const bool kernel_path = d.device.rfind("cpu:", 0) == 0;
    if (value == "all" && kernel_path) continue;  // "all" is the CPU once, not per path
    if (DeviceMatches(value, d.device)) devices.push_back(d.device);
  }
  if (devices.empty() && value == "cuda") devices.push_back("cuda:0");
  if (devices.empty() && value == "cpu:*") devices.push_back("cpu:default");
  return devices;
}

bool PatternMatches(const CellPattern& pattern, const Cell& cell) {
  for (const std::string& key : pattern.keys) {
    const bool same = key == "device" ? DeviceMatches(pattern.values.device, cell.device)
                                      : KeyValue(pattern.values, key) == KeyValue(cell, key);
    if (!same) return false;
  }
  return true;
}

StatusOr<std::vector<Cell>> ExpandMatrix(const MatrixDefinition& def, const std::vector<DeviceInfo>& found) {
  std::vector<Cell> cells;
  for (Cell& cell : AxisProduct(def, found)) {
    const bool excluded = std::any_of(def.exclude.begin(), def.exclude.end(),
                                      [&](const CellPattern& e) { return PatternMatches(e, cell); });
    if (excluded) continue;
    const auto tolerance = def.tolerance.find(cell.policy);
    if (tolerance != def.tolerance.end()) cell.tolerance = tolerance->second;
    cells.push_back(cell);
  }
  StatusOr<std::vector<AddedCell>> added = ApplyIncludes(def, found, &cells);
  if (!added.ok()) return added.status();
  std::set<std::string> ids;
  for (const Cell& cell : cells) ids.insert(cell.Id());
  for (const AddedCell& a : *added) {
    if (!ids.insert(a.cell.Id()).second)
      return Status::InvalidInput(a.include->where + ": include adds '" + a.cell.Label() +
                                  "', which is already in the matrix (duplicate cell)");
    cells.push_back(a.cell);
  }
  for (Cell& cell : cells) {
    for (const CellPattern& xfail : def.xfail) {
      if (!PatternMatches(xfail, cell)) continue;
      cell.xfail = xfail.reason;
      break;
    }
  }
  return cells;
}

}  // namespace framegate
