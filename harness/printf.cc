#include "harness/printf.h"

#include <cstdarg>
#include <cstdio>

namespace framegate {

std::string Printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int size = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  return text;
}

std::string PercentText(double share) {
  const double percent = 100.0 * share;
  return percent > 0 && percent < 0.1 ? Printf("%.2g%%", percent) : Printf("%.1f%%", percent);
}

}  // namespace framegate
