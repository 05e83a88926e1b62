// Internal to matrix/: a matrix file as parsed (axes and entries, every value already
// validated) before it is expanded into cells. ParseMatrixDefinition reads the TOML,
// ExpandMatrix applies the product, exclude, include and xfail rules of docs/matrix.md.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/cell.h"
#include "harness/run_record.h"
#include "harness/status.h"
#include "matrix/matrix_spec.h"

namespace framegate {

// One [[include]], [[exclude]] or [[xfail]] table.
struct CellPattern {
  Cell values;                            // the identity fields the entry sets; others default
  std::vector<std::string> keys;          // which identity keys it sets (cell_keys.h)
  std::vector<std::string> requirements;  // include: added to the cells
  std::string tolerance;                  // include: set on the cells when non-empty
  std::string reason;                     // xfail: why the cells are expected to fail
  std::string where;                      // "file:line:col" of the table
};

// An axis: the identity key it varies and its values (only that key's field is set).
struct MatrixAxis {
  std::string key;
  std::vector<Cell> values;
};

struct MatrixDefinition {
  MatrixSpec settings;                           // everything but the cells
  std::vector<MatrixAxis> axes;                  // in IdentityKeys() order; a missing axis is absent
  std::vector<std::string> requirements;         // top-level `requires`: every cell
  std::map<std::string, std::string> tolerance;  // policy -> tolerance profile
  std::vector<CellPattern> include, exclude, xfail;
};

StatusOr<MatrixDefinition> ParseMatrixDefinition(const std::string& toml_text, const std::string& source,
                                                 const std::string& base_dir);
StatusOr<std::vector<Cell>> ExpandMatrix(const MatrixDefinition& definition,
                                         const std::vector<DeviceInfo>& found);

// The devices a device value stands for: itself; "cuda": each GPU in `found`, or
// "cuda:0" when there is none (so the cells exist and show as UNSUPPORTED); "cpu:*": each
// CPU kernel path in `found` ("cpu:default" when none); "all": every device in `found`
// but the kernel paths (the CPU counts once, as "cpu").
std::vector<std::string> ExpandDeviceValue(const std::string& value, const std::vector<DeviceInfo>& found);
// Whether `cell` has every identity value the entry sets.
bool PatternMatches(const CellPattern& pattern, const Cell& cell);

}  // namespace framegate
