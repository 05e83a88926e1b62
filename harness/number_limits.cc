#include "harness/number_limits.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace framegate {
namespace {

std::string Number(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

}  // namespace

std::string LimitText(const IntegerLimit& limit) {
  const std::string name = limit.name;
  if (limit.max == std::numeric_limits<int64_t>::max())
    return name + " must be an integer >= " + std::to_string(limit.min);
  return name + " must be an integer from " + std::to_string(limit.min) + " to " + std::to_string(limit.max);
}

std::string LimitText(const RealLimit& limit) {
  const std::string head = std::string(limit.name) + " must be a number" + limit.unit;
  if (limit.min_exclusive) return head + " > " + Number(limit.min) + " and <= " + Number(limit.max);
  return head + " from " + Number(limit.min) + " to " + Number(limit.max);
}

Status CheckNumber(const IntegerLimit& limit, int64_t value) {
  if (value < limit.min || value > limit.max) return Status::InvalidInput(LimitText(limit));
  return Status::Ok();
}

Status CheckNumber(const RealLimit& limit, double value) {
  const bool above_min = limit.min_exclusive ? value > limit.min : value >= limit.min;
  if (!(above_min && value <= limit.max)) return Status::InvalidInput(LimitText(limit));  // NaN: false
  return Status::Ok();
}

StatusOr<int64_t> ParseNumber(const IntegerLimit& limit, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) return Status::InvalidInput(LimitText(limit));
  FG_RETURN_IF_ERROR(CheckNumber(limit, value));
  return static_cast<int64_t>(value);
}

StatusOr<double> ParseNumber(const RealLimit& limit, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') return Status::InvalidInput(LimitText(limit));
  FG_RETURN_IF_ERROR(CheckNumber(limit, value));
  return value;
}

}  // namespace framegate
