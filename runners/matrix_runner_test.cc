// The matrix runner's fallback guard: a chain of policy fallbacks ends, even when the
// policies name each other in a cycle (parsing may refuse cycles; the runner must not
// rely on it). RunCells itself runs real processes: tests/python/test_fault_hunt_runner.py.
#include "runners/matrix_runner.h"

#include <map>

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(MatrixRunnerTest, FallbackGoesToAPolicyNotTriedYet) {
  const FallbackStep step = NextFallback({"fp16", "fp16-fp32norm"}, "bf16");
  EXPECT_EQ(step.next, "bf16");
  EXPECT_EQ(step.stopped, "");
}

TEST(MatrixRunnerTest, NoFallbackFinishesTheCell) {
  const FallbackStep step = NextFallback({"fp32"}, "");
  EXPECT_EQ(step.next, "");
  EXPECT_EQ(step.stopped, "");
}

TEST(MatrixRunnerTest, FallbackStopsWhenThePolicyChainRepeats) {
  // loop -> loop
  FallbackStep step = NextFallback({"loop"}, "loop");
  EXPECT_EQ(step.next, "");
  EXPECT_EQ(step.stopped, "the fallback chain repeated: loop falls back to loop, already tried");
  // a -> b -> a: the runner's walk of the chain, as RunCells takes it
  std::vector<std::string> tried = {"a"};
  const std::map<std::string, std::string> fallback_of = {{"a", "b"}, {"b", "a"}};
  int attempts = 1;
  for (step = NextFallback(tried, fallback_of.at(tried.back())); !step.next.empty();
       step = NextFallback(tried, fallback_of.at(tried.back()))) {
    tried.push_back(step.next);
    ASSERT_LT(++attempts, 10) << "the fallback chain does not end";
  }
  EXPECT_EQ(tried, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(step.stopped, "the fallback chain repeated: b falls back to a, already tried");
}

}  // namespace
}  // namespace framegate
