#include "harness/name_rules.h"

#include <cstdio>

namespace framegate {
namespace {

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '+' || c == '-';
}

// `name` for an error message: printable ASCII kept, other bytes as \xNN, cut after
// kMaxNameLength characters ("..." and the length follow).
std::string Shown(const std::string& name) {
  std::string shown;
  for (size_t i = 0; i < name.size() && i < kMaxNameLength; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      shown += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      shown += escaped;
    }
  }
  if (name.size() > kMaxNameLength) shown += "... (" + std::to_string(name.size()) + " characters)";
  return shown;
}

}  // namespace

Status CheckName(const std::string& what, const std::string& name) {
  bool valid = !name.empty() && name.size() <= kMaxNameLength && name != "." && name != "..";
  for (char c : name) valid = valid && IsNameChar(c);
  if (valid) return Status::Ok();
  return Status::InvalidInput(what + " '" + Shown(name) + "' must be 1 to " + std::to_string(kMaxNameLength) +
                              " characters of A-Z a-z 0-9 . _ + - (not . or ..)");
}

Status CheckNameList(const std::string& what, const std::string& names) {
  size_t start = 0;
  while (true) {
    const size_t comma = names.find(',', start);
    FG_RETURN_IF_ERROR(CheckName(what, names.substr(start, comma - start)));
    if (comma == std::string::npos) return Status::Ok();
    start = comma + 1;
  }
}

}  // namespace framegate
