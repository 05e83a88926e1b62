#include "harness/status.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  const Status s = Status::Ok();
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, ContextPrefixesTheMessageAndKeepsTheCode) {
  const Status s = Status::Corrupt("bad magic").WithContext("golden/tiny.npy");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kCorrupt);
  EXPECT_EQ(s.message(), "golden/tiny.npy: bad magic");
  EXPECT_EQ(s.ToString(), "corrupt: golden/tiny.npy: bad magic");
}

TEST(StatusTest, StatusOrHoldsAValueOrAnError) {
  StatusOr<int> value(7);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 7);
  StatusOr<int> error(Status::NotFound("x"));
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace framegate
