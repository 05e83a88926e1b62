#include "matrix/cell_keys.h"

#include <algorithm>
#include <cassert>
#include <type_traits>

namespace framegate {

const std::vector<std::string>& IdentityKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> names = {"pipeline"};  // size or model_dir
    VisitCellFields(Cell{}, [&](const CellField& field, const auto&) {
      if (field.role == CellField::kIdentity) names.push_back(field.name);
    });
    return names;
  }();
  return keys;
}

bool IsIdentityKey(const std::string& key) {
  const auto& keys = IdentityKeys();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string KeyValue(const Cell& cell, const std::string& key) {
  assert(IsIdentityKey(key));
  if (key == "pipeline") return cell.Pipeline();
  std::string text;
  VisitCellFields(cell, [&](const CellField& field, const auto& value) {
    if (key == field.name) text = FieldText(value);
  });
  return text;
}

void CopyKey(const Cell& from, const std::string& key, Cell* to) {
  assert(IsIdentityKey(key));
  const Cell source = from;  // `to` may be `from`
  VisitCellFields(*to, [&](const CellField& field, auto& value) {
    using Value = std::decay_t<decltype(value)>;
    const bool copy = key == field.name || (key == "pipeline" && field.role == CellField::kPipeline) ||
                      (key == "policy" && field.name == std::string("policy_file"));
    if (!copy) return;
    VisitCellFields(source, [&](const CellField& other, const auto& theirs) {
      if constexpr (std::is_same_v<Value, std::decay_t<decltype(theirs)>>) {
        if (other.name == std::string(field.name)) value = theirs;
      }
    });
  });
}

bool DeviceMatches(const std::string& pattern, const std::string& device) {
  if (pattern == device || pattern == "all") return true;
  if (pattern == "cpu:*") return device.rfind("cpu:", 0) == 0;
  return pattern == "cuda" && device.rfind("cuda:", 0) == 0;
}

}  // namespace framegate
