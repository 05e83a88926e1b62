#include "matrix/cell_filter.h"

#include <algorithm>

#include "matrix/cell_keys.h"

namespace framegate {
namespace {

std::vector<std::string> FilterKeys() {
  std::vector<std::string> keys = IdentityKeys();
  keys.insert(keys.end(), {"id", "size", "xfail", "requires"});
  return keys;
}

std::string FieldOf(const Cell& cell, const std::string& key) {
  if (key == "id") return cell.Id();
  if (key == "size") return cell.model_dir.empty() ? cell.size : "";
  if (key == "xfail") return cell.xfail;
  if (key == "requires") {
    std::string joined;
    for (const std::string& r : cell.requirements) joined += (joined.empty() ? "" : "+") + r;
    return joined;
  }
  return KeyValue(cell, key);
}

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

StatusOr<CellFilter> CellFilter::Parse(const std::string& expression) {
  const std::string at = "--filter '" + expression + "': ";
  CellFilter filter;
  std::vector<std::string> texts = {""};
  for (char ch : expression) {
    if (ch == ',')
      texts.emplace_back();
    else
      texts.back() += ch;
  }
  if (texts.size() == 1 && Trim(texts[0]).empty()) return Status::InvalidInput(at + "no terms");
  for (std::string text : texts) {
    text = Trim(text);
    if (text.empty())
      return Status::InvalidInput(at + "empty term (terms are key=value, key!=value, key~text)");
    const size_t pos = text.find_first_of("=!~");
    if (pos == std::string::npos || pos == 0)
      return Status::InvalidInput(at + "'" + text + "' is not key=value, key!=value or key~text");
    Term term;
    term.key = Trim(text.substr(0, pos));
    size_t value_at = pos + 1;
    if (text[pos] == '~') {
      term.op = Op::kContains;
    } else if (text[pos] == '=') {
      term.op = Op::kEquals;
    } else if (text.compare(pos, 2, "!=") == 0) {
      term.op = Op::kNotEquals;
      value_at = pos + 2;
    } else {
      return Status::InvalidInput(at + "'" + text + "': '!' must be followed by '='");
    }
    term.value = Trim(text.substr(value_at));
    const std::vector<std::string> keys = FilterKeys();
    if (std::find(keys.begin(), keys.end(), term.key) == keys.end()) {
      std::string known;
      for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
      return Status::InvalidInput(at + "unknown key '" + term.key + "' (known: " + known + ")");
    }
    if (term.key == "fault" && term.value == "none") term.value = "";
    filter.terms_.push_back(term);
  }
  return filter;
}

bool CellFilter::Matches(const Cell& cell) const {
  for (const Term& term : terms_) {
    const std::string field = FieldOf(cell, term.key);
    bool equal = field == term.value;
    if (term.key == "pipeline" && cell.model_dir.empty()) equal = equal || cell.size == term.value;
    const bool holds = term.op == Op::kEquals      ? equal
                       : term.op == Op::kNotEquals ? !equal
                                                   : field.find(term.value) != std::string::npos;
    if (!holds) return false;
  }
  return true;
}

std::vector<Cell> CellFilter::Apply(const std::vector<Cell>& cells) const {
  std::vector<Cell> kept;
  std::copy_if(cells.begin(), cells.end(), std::back_inserter(kept),
               [this](const Cell& c) { return Matches(c); });
  return kept;
}

}  // namespace framegate
