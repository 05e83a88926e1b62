#include "harness/cell.h"

#include <sstream>

#include "harness/sha256.h"

namespace framegate {

std::string FieldText(const std::string& value) { return value; }
std::string FieldText(uint64_t value) { return std::to_string(value); }
std::string FieldText(int value) { return std::to_string(value); }
std::string FieldText(double value) {
  std::ostringstream out;  // the id's format since v1: "5", "7.5"
  out << value;
  return out.str();
}
std::string FieldText(const std::vector<std::string>& value) {
  std::string text;
  for (const std::string& v : value) text += (text.empty() ? "" : "+") + v;
  return text;
}

bool IsUnset(const CellField& field, const std::string& value) {
  return field.empty_is_default && value.empty();
}
bool IsUnset(const CellField& field, uint64_t value) { return field.empty_is_default && value == 0; }
bool IsUnset(const CellField& field, int value) { return field.empty_is_default && value == 0; }
bool IsUnset(const CellField& field, double value) { return field.empty_is_default && value == 0; }
bool IsUnset(const CellField& field, const std::vector<std::string>& value) {
  return field.empty_is_default && value.empty();
}

std::string Cell::Pipeline() const {
  if (model_dir.empty()) return "reference:" + size;
  std::string dir = model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.find_last_of('/');
  return "model:" + (slash == std::string::npos ? dir : dir.substr(slash + 1));
}

std::string Cell::CanonicalString() const {
  std::string text = "v1|pipeline=" + Pipeline();
  VisitCellFields(*this, [&](const CellField& field, const auto& value) {
    if (field.role == CellField::kIdentity) text += std::string("|") + field.name + "=" + FieldText(value);
  });
  return text;
}

std::string Cell::Id() const { return Sha256Hex(CanonicalString()).substr(0, 16); }

std::string Cell::Label() const {
  std::string label = Pipeline() + " " + device + " " + policy + " seed=" + std::to_string(seed);
  if (!fault.empty()) label += " fault=" + fault;
  return label;
}

std::vector<std::pair<std::string, std::string>> VariantFields(const Cell& cell) {
  std::vector<std::pair<std::string, std::string>> fields;
  VisitCellFields(cell, [&](const CellField& field, const auto& value) {
    const std::string name = field.name;
    if (field.role != CellField::kIdentity || name == "device" || name == "policy" || name == "seed") return;
    if (!IsUnset(field, value)) fields.emplace_back(name, FieldText(value));
  });
  return fields;
}

std::vector<std::string> CheckArgsFor(const Cell& cell) {
  std::vector<std::string> args = {"check"};
  VisitCellFields(cell, [&](const CellField& field, const auto& value) {
    if (field.flag == nullptr || IsUnset(field, value)) return;
    if (field.role == CellField::kPipeline && (field.name == std::string("size")) != cell.model_dir.empty()) {
      return;  // the pipeline is either --size or --model
    }
    args.push_back(field.flag);
    args.push_back(FieldText(value));
  });
  return args;
}

}  // namespace framegate
