// printf into a std::string, checked by the compiler: -Wformat compares every call's
// arguments with its format (an unchecked wrapper once let "%s" read a double, which
// crashed the Debian 13 build).
#pragma once

#include <string>

namespace framegate {

// The text std::snprintf writes for `format` and the arguments, at any length.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// A share of a whole (0.25) as a percentage, one decimal ("25.0%"), two significant
// digits below 0.1% ("0.016%", not "0.0%"); "0.0%" for none.
std::string PercentText(double share);

}  // namespace framegate
