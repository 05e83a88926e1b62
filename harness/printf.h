// printf into a std::string, checked by the compiler: -Wformat compares every call's
// arguments with its format (an unchecked wrapper let "%s" read a double, which crashed
// with glibc 2.41).
#pragma once

#include <string>

namespace framegate {

// The text std::snprintf writes for `format` and the arguments, at any length.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace framegate
