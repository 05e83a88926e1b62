#include "reports/html_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/report_test_data.h"
#include "reports/svg_plot.h"

namespace framegate {
namespace {

using testing_data::FreshDir;
using testing_data::MakeMetrics;
using testing_data::MakeResult;
using testing_data::SampleRun;

constexpr int64_t kT = 3, kH = 16, kW = 20;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<float> Gradient() {
  std::vector<float> v(kT * kH * kW * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) / 96.0f;
  return v;
}

// A run of three cells on frames written to `dir`: an identical candidate (PASS), one
// with NaN in its first pixel (NONFINITE), and an ERROR cell without frames. The policy
// and the model folder carry <script>.
RunRecord FramesRun(const std::string& dir) {
  const std::vector<int64_t> shape = {kT, kH, kW, 3};
  std::vector<float> golden = Gradient();
  EXPECT_TRUE(WriteNpyFloat32(dir + "/golden.npy", shape, golden.data()).ok());
  std::filesystem::create_directories(dir + "/pass");
  std::filesystem::create_directories(dir + "/nan");
  EXPECT_TRUE(WriteNpyFloat32(dir + "/pass/frames.npy", shape, golden.data()).ok());
  golden[0] = NAN;
  EXPECT_TRUE(WriteNpyFloat32(dir + "/nan/frames.npy", shape, golden.data()).ok());
  RunRecord run;
  run.info.run_id = "run-<b>1</b>";
  CellResult pass = MakeResult("cpu", "<script>alert(1)</script>", CellStatus::kPass, "");
  pass.metrics = MakeMetrics(INFINITY, 1.0, kT);
  pass.golden = dir + "/golden.npy";
  pass.artifacts_dir = dir + "/pass";
  CellResult nan = MakeResult("cpu", "fp16", CellStatus::kNonfinite, "NaN at step 3");
  nan.cell.model_dir = dir + "/<script>model";
  nan.golden = pass.golden;
  nan.artifacts_dir = dir + "/nan";
  CellResult error = MakeResult("cpu", "fp8", CellStatus::kError, "dtype_mismatch: <Half>");
  run.cells = {pass, nan, error};
  return run;
}

HtmlReportOptions NpyGoldens() {
  HtmlReportOptions options;
  options.read_golden = ReadVideoNpy;
  return options;
}

TEST(HtmlReportTest, WritesIndexCellPagesAndFramePictures) {
  const std::string dir = FreshDir("html_frames");
  const RunRecord run = FramesRun(dir);
  ASSERT_TRUE(WriteHtmlReport(run, NpyGoldens(), dir + "/report").ok());
  const std::string index = ReadText(dir + "/report/index.html");
  for (const CellResult& r : run.cells) {
    EXPECT_NE(index.find("href=\"cells/" + r.cell.Id() + ".html\""), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(dir + "/report/cells/" + r.cell.Id() + ".html"));
  }
  EXPECT_NE(index.find("data-status=\"NONFINITE\""), std::string::npos);
  const std::string pass_dir = dir + "/report/cells/" + run.cells[0].cell.Id();
  for (const char* kind : {"golden", "candidate", "diff"}) {
    for (int t = 0; t < kT; ++t) {
      const std::string png = pass_dir + "/" + kind + "_000" + std::to_string(t) + ".png";
      StatusOr<RgbImage> image = ReadPngRgb(png);
      ASSERT_TRUE(image.ok()) << png;
      EXPECT_EQ(image->width, kW);
      EXPECT_EQ(image->height, kH);
    }
  }
  // Identical frames: the heat map is the ramp's black everywhere.
  const RgbImage diff = ReadPngRgb(pass_dir + "/diff_0000.png").value();
  EXPECT_EQ(diff.pixels[0], 0);
  EXPECT_EQ(diff.pixels[2], 4);
  // The NaN pixel is cyan, its neighbour is not.
  const RgbImage nan_diff =
      ReadPngRgb(dir + "/report/cells/" + run.cells[1].cell.Id() + "/diff_0000.png").value();
  EXPECT_EQ((std::vector<int>{nan_diff.pixels[0], nan_diff.pixels[1], nan_diff.pixels[2]}),
            (std::vector<int>{0, 255, 255}));
  EXPECT_NE(nan_diff.pixels[4], 255);
}

TEST(HtmlReportTest, EscapesEveryNameAndShowsTheReasonWithoutFrames) {
  const std::string dir = FreshDir("html_escape");
  const RunRecord run = FramesRun(dir);
  ASSERT_TRUE(WriteHtmlReport(run, NpyGoldens(), dir + "/report").ok());
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir + "/report")) {
    if (entry.path().extension() != ".html") continue;
    const std::string page = ReadText(entry.path().string());
    EXPECT_EQ(page.find("<script"), std::string::npos) << entry.path();
    EXPECT_EQ(page.find("<b>1</b>"), std::string::npos) << entry.path();
    EXPECT_EQ(page.find("http"), std::string::npos) << entry.path();
  }
  const std::string index = ReadText(dir + "/report/index.html");
  EXPECT_NE(index.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(index.find("model:&lt;script&gt;model"), std::string::npos);
  const std::string error_page = ReadText(dir + "/report/cells/" + run.cells[2].cell.Id() + ".html");
  EXPECT_NE(error_page.find("No frames: ERROR dtype_mismatch: &lt;Half&gt;"), std::string::npos);
  EXPECT_EQ(error_page.find("<img"), std::string::npos);
}

TEST(HtmlReportTest, SaysWhyFramesAreMissing) {
  const std::string dir = FreshDir("html_missing");
  RunRecord run = FramesRun(dir);
  run.cells[0].artifacts_dir = dir + "/nowhere";
  HtmlReportOptions no_reader;
  ASSERT_TRUE(WriteHtmlReport(run, no_reader, dir + "/report").ok());
  const std::string page = ReadText(dir + "/report/cells/" + run.cells[0].cell.Id() + ".html");
  EXPECT_NE(page.find("candidate frames: " + dir + "/nowhere/frames.npy"), std::string::npos) << page;
  EXPECT_NE(page.find("golden frames not loaded"), std::string::npos);
}

TEST(HtmlReportTest, HistoryGetsATableAndTrendPlots) {
  const std::string dir = FreshDir("html_history");
  RunRecord run = FramesRun(dir);
  run.info.started_at = "2025-01-03T02:00:00Z";
  HtmlReportOptions options = NpyGoldens();
  CellResult earlier = run.cells[0];
  earlier.metrics = MakeMetrics(35.0, 0.99, kT);
  earlier.timings.generation_seconds = {1.5};
  options.history[run.cells[0].cell.Id()] = {{"run-a", "2025-01-01T02:00:00Z", earlier},
                                             {"run-b", "2025-01-02T02:00:00Z", earlier}};
  ASSERT_TRUE(WriteHtmlReport(run, options, dir + "/report").ok());
  const std::string page = ReadText(dir + "/report/cells/" + run.cells[0].cell.Id() + ".html");
  const std::string history = page.substr(page.find("<h2>History</h2>"));
  EXPECT_NE(history.find("min PSNR over runs"), std::string::npos);
  EXPECT_NE(history.find("median latency over runs"), std::string::npos);
  EXPECT_NE(history.find("run-a"), std::string::npos);
  EXPECT_NE(history.find("2025-01-02"), std::string::npos);
  const std::string other = ReadText(dir + "/report/cells/" + run.cells[2].cell.Id() + ".html");
  EXPECT_NE(other.find("No earlier runs of this cell."), std::string::npos);
}

// The part of `page` from the heading `h` to the next <h2> (or the end).
std::string Section(const std::string& page, const std::string& h) {
  const size_t start = page.find(h);
  if (start == std::string::npos) return "";
  const size_t end = page.find("<h2>", start + h.size());
  return page.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(HtmlReportTest, CellPageShowsTheAdvisorsAnswerEscaped) {
  const std::string dir = FreshDir("html_advice");
  const RunRecord run = SampleRun();
  ASSERT_TRUE(WriteHtmlReport(run, HtmlReportOptions(), dir + "/report").ok());
  const CellResult& nonfinite = run.cells[2];
  ASSERT_TRUE(nonfinite.advice.has_value());
  const std::string page = ReadText(dir + "/report/cells/" + nonfinite.cell.Id() + ".html");
  const std::string advisor = Section(page, "<h2>Advisor</h2>");
  ASSERT_FALSE(advisor.empty()) << page;
  // Before and after, the islands (escaped), the weight share, each run, the policy TOML.
  EXPECT_NE(advisor.find(">NONFINITE</span> &rarr; <span"), std::string::npos) << advisor;
  EXPECT_NE(advisor.find("blocks.0.spatial_attn, blocks.&lt;1&gt;.ff"), std::string::npos) << advisor;
  EXPECT_NE(advisor.find("6.25%"), std::string::npos) << advisor;
  EXPECT_NE(advisor.find("Runs tried (2)"), std::string::npos);
  EXPECT_NE(advisor.find("min_psnr 28 &lt; 30"), std::string::npos);
  EXPECT_NE(advisor.find("<pre class=\"policy\">[policy.fp16-emulated-islands]\nbased_on = "
                         "&quot;fp16-emulated&quot;"),
            std::string::npos)
      << advisor;
  EXPECT_EQ(advisor.find("No set of FP32 islands"), std::string::npos);
  EXPECT_EQ(page.find("blocks.<1>"), std::string::npos);
  EXPECT_NE(page.find("matrix/&lt;islands&gt;.toml"), std::string::npos);
  // Health: the op of the first NaN, what instrumentation saw, SQNR per probe ("-": none).
  const std::string health = Section(page, "<h2>Health</h2>");
  EXPECT_NE(health.find("step 3 in blocks.0.spatial_attn.logits at aten::exp (10 NaN"), std::string::npos)
      << health;
  EXPECT_NE(health.find("37 module calls, 212 ops watched"), std::string::npos);
  EXPECT_NE(health.find("<th>SQNR vs FP32 (dB)</th>"), std::string::npos);
  EXPECT_NE(health.find("<td>12.5</td></tr>"), std::string::npos) << health;
  EXPECT_NE(health.find("<td>-</td></tr>"), std::string::npos) << health;
  // Cells without advice have no Advisor section; an ERROR cell names where it was raised.
  const std::string error = ReadText(dir + "/report/cells/" + run.cells[3].cell.Id() + ".html");
  EXPECT_EQ(error.find("<h2>Advisor</h2>"), std::string::npos);
  EXPECT_NE(error.find("<th>raised in</th><td>denoiser.embed.time_mlp.0 (aten::linear)</td>"),
            std::string::npos)
      << error;
}

TEST(HtmlReportTest, AdviceThatFoundNothingSaysSo) {
  const std::string dir = FreshDir("html_no_advice");
  RunRecord run = SampleRun();
  Advice& a = *run.cells[2].advice;
  a.status_after = CellStatus::kNonfinite;
  a.islands.clear();
  a.policy_toml.clear();
  a.runs.resize(1);
  ASSERT_TRUE(WriteHtmlReport(run, HtmlReportOptions(), dir + "/report").ok());
  const std::string page = ReadText(dir + "/report/cells/" + run.cells[2].cell.Id() + ".html");
  const std::string advisor = Section(page, "<h2>Advisor</h2>");
  EXPECT_NE(advisor.find("No set of FP32 islands tried made this cell pass."), std::string::npos) << advisor;
  EXPECT_NE(advisor.find("<th>FP32 islands</th><td><span class=\"note\">none</span>"), std::string::npos)
      << advisor;
  EXPECT_EQ(advisor.find("<pre"), std::string::npos);
}

TEST(HtmlReportTest, AdviceNotVerifiedSaysSoWithItsNote) {
  const std::string dir = FreshDir("html_unverified_advice");
  RunRecord run = SampleRun();
  Advice& a = *run.cells[2].advice;
  ASSERT_TRUE(a.found());
  a.verified = false;
  a.note = "the islands pass at seed 0 but do not hold at seed 1: FAIL (min_psnr 34 < 46.8)";
  ASSERT_TRUE(WriteHtmlReport(run, HtmlReportOptions(), dir + "/report").ok());
  const std::string page = ReadText(dir + "/report/cells/" + run.cells[2].cell.Id() + ".html");
  const std::string advisor = Section(page, "<h2>Advisor</h2>");
  EXPECT_NE(advisor.find("Not verified: the islands pass this cell's run but not every check after it"),
            std::string::npos)
      << advisor;
  EXPECT_NE(advisor.find("do not hold at seed 1: FAIL (min_psnr 34 &lt; 46.8)"), std::string::npos)
      << advisor;
}

TEST(HtmlReportTest, UnwritableFolderIsAnIoErrorNamingIt) {
  const std::string dir = FreshDir("html_unwritable");
  std::ofstream(dir + "/file") << "x";
  const Status status = WriteHtmlReport(FramesRun(dir), NpyGoldens(), dir + "/file/report");
  EXPECT_EQ(status.code(), Status::Code::kIoError);
  EXPECT_NE(status.message().find(dir + "/file/report"), std::string::npos) << status.message();
}

TEST(FrameImagesTest, VideoFromFloat32ChecksTheShape) {
  const std::vector<float> values = Gradient();
  StatusOr<Video> video = VideoFromFloat32("golden.safetensors", {kT, kH, kW, 3}, values.data());
  ASSERT_TRUE(video.ok());
  EXPECT_EQ(video->ShapeString(), "[3, 16, 20, 3]");
  EXPECT_EQ(video->Frame(1)[0], values[kH * kW * 3]);
  const Status bad = VideoFromFloat32("golden.safetensors", {kT, kH, kW, 4}, values.data()).status();
  EXPECT_EQ(bad.message(), "golden.safetensors: frames must be [T, H, W, 3], got [3, 16, 20, 4]");
}

TEST(SvgPlotTest, DrawsFiniteValuesAndMarksInfinities) {
  LineChart chart{
      "PSNR <per> frame", "dB", {"0", "1", "2", "3"}, {{"PSNR", "#123456", {30.0, INFINITY, NAN, 32.0}}}};
  const std::string svg = SvgLineChart(chart);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("PSNR &lt;per&gt; frame"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"white\" stroke=\"#123456\""), std::string::npos) << "hollow +inf marker";
  EXPECT_EQ(std::count(svg.begin(), svg.end(), 'M'), 2) << "the line breaks at inf and NaN: " << svg;
  chart.series[0].values = {NAN, NAN};
  EXPECT_NE(SvgLineChart(chart).find("no finite values"), std::string::npos);
}

}  // namespace
}  // namespace framegate
