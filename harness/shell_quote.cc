#include "harness/shell_quote.h"

#include <cstring>

namespace framegate {

std::string ShellQuote(const std::string& word) {
  static const char* const kSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
  bool safe = !word.empty();
  for (char c : word) safe = safe && c != '\0' && std::strchr(kSafe, c) != nullptr;
  if (safe) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string ShellCommand(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& w : words) line += (line.empty() ? "" : " ") + ShellQuote(w);
  return line;
}

}  // namespace framegate
