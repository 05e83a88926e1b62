// printf into a std::string, checked by the compiler: -Wformat compares every call's
// arguments with its format (an unchecked wrapper once let "%s" read a double, which
// crashed the Debian 13 build).
#pragma once

#include <string>

namespace framegate {

// The text std::snprintf writes for `format` and the arguments, at any length.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace framegate
