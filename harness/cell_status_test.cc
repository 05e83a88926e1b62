#include "harness/cell_status.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

constexpr CellStatus kAll[] = {CellStatus::kPass,         CellStatus::kFail,    CellStatus::kNonfinite,
                               CellStatus::kBrokenFrames, CellStatus::kError,   CellStatus::kUnsupported,
                               CellStatus::kUnresolved,   CellStatus::kTimeout, CellStatus::kCrash,
                               CellStatus::kXfail,        CellStatus::kXpass};

TEST(CellStatusTest, NamesRoundTripAndAreTheArchitecturesNames) {
  std::string joined;
  for (CellStatus s : kAll) {
    ASSERT_EQ(ParseStatus(StatusName(s)), s);
    joined += std::string(StatusName(s)) + " ";
  }
  EXPECT_EQ(joined,
            "PASS FAIL NONFINITE BROKEN_FRAMES ERROR UNSUPPORTED UNRESOLVED TIMEOUT CRASH "
            "XFAIL XPASS ");
  EXPECT_EQ(ParseStatus("pass"), std::nullopt);
}

TEST(CellStatusTest, OnlyPassUnsupportedAndXfailDoNotFailARun) {
  for (CellStatus s : kAll) {
    const bool ok = s == CellStatus::kPass || s == CellStatus::kUnsupported || s == CellStatus::kXfail;
    EXPECT_EQ(IsFailure(s), !ok) << StatusName(s);
  }
}

TEST(CellStatusTest, ExpectedFailureFlipsInOnePlace) {
  EXPECT_EQ(ApplyExpectedFailure(CellStatus::kPass, true), CellStatus::kXpass);
  EXPECT_EQ(ApplyExpectedFailure(CellStatus::kNonfinite, true), CellStatus::kXfail);
  EXPECT_EQ(ApplyExpectedFailure(CellStatus::kCrash, true), CellStatus::kXfail);
  EXPECT_EQ(ApplyExpectedFailure(CellStatus::kUnsupported, true), CellStatus::kUnsupported);
  EXPECT_EQ(ApplyExpectedFailure(CellStatus::kUnresolved, true), CellStatus::kUnresolved);
  for (CellStatus s : kAll) EXPECT_EQ(ApplyExpectedFailure(s, false), s);
}

}  // namespace
}  // namespace framegate
