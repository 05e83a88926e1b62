// The bounds of every number a user gives a run, in one place: the CLI's options
// (cli/pipeline_options.cc) and a matrix's values (matrix/matrix_parse.cc) check against
// the same limits, so a value one accepts the other accepts too. NaN and infinities are
// never inside a limit.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "harness/status.h"

namespace framegate {

struct IntegerLimit {
  const char* name;
  int64_t min;
  int64_t max;
};

struct RealLimit {
  const char* name;
  double min;
  double max;
  bool min_exclusive;  // the value must be > min (a timeout), not >= min
  const char* unit;    // "" or " of seconds": "a number of seconds from ..."
};

inline constexpr IntegerLimit kSeedLimit = {"seed", 0, std::numeric_limits<int64_t>::max()};
inline constexpr IntegerLimit kWeightSeedLimit = {"weight seed", 0, std::numeric_limits<int64_t>::max()};
inline constexpr IntegerLimit kStepsLimit = {"steps", 1, 10000};
inline constexpr IntegerLimit kRepeatsLimit = {"repeats", 1, 10000};
inline constexpr IntegerLimit kWarmupLimit = {"warmup", 0, 10000};
inline constexpr RealLimit kGuidanceLimit = {"guidance", 1.0, 100.0, false, ""};
inline constexpr RealLimit kTimeoutLimit = {"timeout", 0.0, 7 * 24 * 3600.0, true, " of seconds"};

// "steps must be an integer from 1 to 10000" ("seed must be an integer >= 0" when the
// limit has no upper bound of its own).
std::string LimitText(const IntegerLimit& limit);
// "guidance must be a number from 1 to 100", "timeout must be a number of seconds > 0
// and <= 604800".
std::string LimitText(const RealLimit& limit);

// Ok inside the limit; else InvalidInput with LimitText (callers prefix the place).
Status CheckNumber(const IntegerLimit& limit, int64_t value);
Status CheckNumber(const RealLimit& limit, double value);  // NaN, +-Inf: never inside

// A number as typed on a command line ("12", "7.5"): the whole text must be the number.
// InvalidInput with LimitText when it is not, or is outside the limit.
StatusOr<int64_t> ParseNumber(const IntegerLimit& limit, const std::string& text);
StatusOr<double> ParseNumber(const RealLimit& limit, const std::string& text);

}  // namespace framegate
