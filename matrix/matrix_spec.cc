#include "matrix/matrix_spec.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "matrix/matrix_definition.h"
#include "matrix/shipped_matrices.h"

namespace framegate {

StatusOr<MatrixSpec> ParseMatrix(const std::string& toml_text, const std::string& source,
                                 const std::string& base_dir, const std::vector<DeviceInfo>& found) {
  StatusOr<MatrixDefinition> def = ParseMatrixDefinition(toml_text, source, base_dir);
  if (!def.ok()) return def.status();
  StatusOr<std::vector<Cell>> cells = ExpandMatrix(*def, found);
  if (!cells.ok()) return cells.status();
  MatrixSpec spec = def->settings;
  spec.cells = std::move(*cells);
  return spec;
}

std::vector<std::string> ShippedMatrixNames() {
  std::vector<std::string> names;
  for (const ShippedMatrix& m : kShippedMatrices) names.push_back(m.name);
  return names;
}

StatusOr<MatrixSpec> LoadMatrix(const std::string& path_or_name, const std::vector<DeviceInfo>& found) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path_or_name, ec)) {
    std::ifstream in(path_or_name, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) return Status::IoError(path_or_name + ": cannot read");
    return ParseMatrix(text.str(), path_or_name, fs::path(path_or_name).parent_path().string(), found);
  }
  std::string known;
  for (const ShippedMatrix& m : kShippedMatrices) {
    const std::string repo_path = std::string("matrix/") + m.name + ".toml";
    if (path_or_name == m.name || path_or_name == repo_path) return ParseMatrix(m.toml, repo_path, "", found);
    known += (known.empty() ? "" : ", ") + std::string(m.name);
  }
  return Status::NotFound(path_or_name + ": no such matrix file (shipped matrices: " + known + ")");
}

}  // namespace framegate
