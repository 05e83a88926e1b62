#include "reports/terminal_report.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <sstream>

#include "reports/report_test_data.h"

namespace framegate {
namespace {

using testing_data::MakeResult;
using testing_data::SampleRun;

TEST(TerminalSummaryTest, GridFailuresAndReproWithoutColour) {
  std::ostringstream out;
  WriteTerminalSummary(SampleRun(), TerminalStyle{}, out);
  const std::string text = out.str();
  EXPECT_EQ(text.find('\033'), std::string::npos);
  // 5 policies > 2 devices: the grid is transposed, one line per policy.
  EXPECT_NE(text.find("  policy         cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("  bf16           FAIL min_psnr 23.1 < 30 2.00 s"), std::string::npos) << text;
  EXPECT_NE(text.find("PASS PSNR 41.50 dB, SSIM 0.9980 1.20 s"), std::string::npos) << text;
  EXPECT_NE(text.find("Failures (4):"), std::string::npos);
  EXPECT_NE(text.find("    repro: framegate check --size tiny --device cuda:0 --policy fp32"),
            std::string::npos);
  EXPECT_EQ(text.find("repro: framegate check --size tiny --device cpu --policy fp32\n"), std::string::npos)
      << "a passing cell is not in the failures list";
}

TEST(TerminalSummaryTest, DeviceRowsWhenPoliciesAreFewAndColourWhenAsked) {
  RunRecord run;
  run.cells = {MakeResult("cpu", "fp32", CellStatus::kPass, ""),
               MakeResult("cuda:0", "fp32", CellStatus::kCrash, "signal 11")};
  std::ostringstream out;
  WriteTerminalSummary(run, TerminalStyle{true, false}, out);
  EXPECT_NE(out.str().find("  device  fp32"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\033[1;31mCRASH\033[0m signal 11"), std::string::npos) << out.str();
}

TEST(TerminalSummaryTest, NoEscapeSequenceFromNamesOrReasonsReachesTheTerminal) {
  RunRecord run;
  run.info.run_id = "run\033]0;title\007";
  run.cells = {MakeResult("cpu", "fp\03316", CellStatus::kError, "bad\033[2J\nreason")};
  std::ostringstream summary;
  WriteTerminalSummary(run, TerminalStyle{}, summary);
  EXPECT_EQ(summary.str().find('\033'), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find("ERROR reference:tiny cpu fp?16 seed=0: bad?[2J?reason"), std::string::npos)
      << summary.str();
  std::ostringstream progress_out;
  ProgressPrinter progress(progress_out, 1, TerminalStyle{}, [] { return 0.0; });
  progress.CellFinished(run.cells[0]);
  EXPECT_EQ(progress_out.str().find('\033'), std::string::npos) << progress_out.str();
}

TEST(ProgressPrinterTest, PlainModePrintsOneLinePerCell) {
  std::ostringstream out;
  double now = 0;
  ProgressPrinter progress(out, 12, TerminalStyle{}, [&] { return now; });
  const RunRecord run = SampleRun();
  progress.CellStarted(run.cells[0].cell);
  EXPECT_EQ(out.str(), "") << "nothing is printed for a start without a terminal";
  now = 2;
  progress.CellFinished(run.cells[0]);
  progress.CellFinished(run.cells[1]);
  progress.Finish();
  EXPECT_EQ(out.str(),
            "[ 1/12] PASS reference:tiny cpu fp32 seed=0: PSNR 41.50 dB, SSIM 0.9980 (1.20 s)\n"
            "[ 2/12] FAIL reference:tiny cpu bf16 seed=0: min_psnr 23.1 < 30 (2.00 s)\n");
}

TEST(ProgressPrinterTest, LiveLineShowsDoneFailuresCurrentCellAndEta) {
  std::ostringstream out;
  double now = 100;
  ProgressPrinter progress(out, 4, TerminalStyle{false, true}, [&] { return now; });
  const RunRecord run = SampleRun();
  progress.CellStarted(run.cells[0].cell);
  EXPECT_EQ(progress.ProgressLine(), "[0/4] 0 failing | running reference:tiny cpu fp32 seed=0");
  now = 110;
  progress.CellFinished(run.cells[0]);
  progress.CellStarted(run.cells[1].cell);
  progress.CellStarted(run.cells[5].cell);
  // 10 s per cell so far, 3 cells left.
  EXPECT_EQ(progress.ProgressLine(),
            "[1/4] 0 failing | running reference:tiny cuda:0 fp32 seed=0 (+1) | ETA 30.00 s");
  progress.CellFinished(run.cells[1]);
  EXPECT_EQ(progress.ProgressLine().substr(0, 15), "[2/4] 1 failing");
  progress.Finish();
  const std::string text = out.str();
  EXPECT_NE(text.find("\r\033[2K[0/4] 0 failing"), std::string::npos);
  // The failure gets a permanent line; the pass does not.
  EXPECT_NE(text.find("\r\033[2K[2/4] FAIL reference:tiny cpu bf16 seed=0: min_psnr 23.1 < 30 (2.00 s)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("PASS reference:tiny cpu fp32 seed=0:"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 5), "\r\033[2K");
}

// Sets or unsets an environment variable for one test, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old) old_ = old, had_ = true;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(TerminalStyleTest, FollowsTtyNoColorAndCi) {
  ScopedEnv term("TERM", "xterm"), no_color("NO_COLOR", nullptr), ci("CI", nullptr);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  TerminalStyle style = DetectTerminalStyle(pipe_fds[1]);
  EXPECT_FALSE(style.color);
  EXPECT_FALSE(style.live_line);
  close(pipe_fds[0]);
  close(pipe_fds[1]);

  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(tty, 0);
  style = DetectTerminalStyle(tty);
  EXPECT_TRUE(style.color);
  EXPECT_TRUE(style.live_line);
  {
    ScopedEnv set("NO_COLOR", "1");
    EXPECT_FALSE(DetectTerminalStyle(tty).color);
    EXPECT_TRUE(DetectTerminalStyle(tty).live_line);
  }
  {
    ScopedEnv set("NO_COLOR", "");  // no-color.org: only a non-empty value disables colour
    EXPECT_TRUE(DetectTerminalStyle(tty).color);
  }
  {
    ScopedEnv set("CI", "true");
    EXPECT_FALSE(DetectTerminalStyle(tty).live_line);
    EXPECT_TRUE(DetectTerminalStyle(tty).color);
  }
  close(tty);
  close(master);
}

}  // namespace
}  // namespace framegate
