// Command lines a user can paste: every word shell-quoted for POSIX sh, so that a name
// with spaces, quotes or `$(...)` is passed as one literal argument and never runs.
#pragma once

#include <string>
#include <vector>

namespace framegate {

// `word` as one POSIX sh word: unchanged when it has only [A-Za-z0-9_@%+=:,./-] and is
// not empty, else in single quotes with each ' written as '\''.
std::string ShellQuote(const std::string& word);

// The words quoted and joined by single spaces.
std::string ShellCommand(const std::vector<std::string>& words);

}  // namespace framegate
