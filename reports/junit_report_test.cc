#include "reports/junit_report.h"

#include <gtest/gtest.h>

#include "reports/report_test_data.h"

namespace framegate {
namespace {

using testing_data::MakeResult;
using testing_data::SampleRun;

// The <testcase ...>...</testcase> element whose name attribute is `name`.
std::string Testcase(const std::string& xml, const std::string& classname, const std::string& name) {
  const std::string open = "<testcase classname=\"" + classname + "\" name=\"" + name + "\"";
  const size_t begin = xml.find(open);
  if (begin == std::string::npos) return "";
  return xml.substr(begin, xml.find("</testcase>", begin) - begin);
}

TEST(JunitReportTest, NamesKeepColonsAndTurnInnerDotsIntoUnderscores) {
  Cell cell;
  cell.device = "cuda:0";
  EXPECT_EQ(JunitClassname(cell), "reference:tiny.cuda:0");
  cell.model_dir = "/models/my.model";
  EXPECT_EQ(JunitClassname(cell), "model:my_model.cuda:0");
  cell.policy = "fp16";
  cell.seed = 3;
  cell.fault = "f2";
  EXPECT_EQ(JunitTestName(cell), "fp16 seed=3 fault=f2");
}

TEST(JunitReportTest, MapsStatusesToFailureErrorSkipped) {
  const std::string xml = JunitXml(SampleRun());
  EXPECT_NE(xml.find("<testsuites name=\"framegate\" tests=\"7\" failures=\"2\" errors=\"2\" skipped=\"2\""),
            std::string::npos)
      << xml;
  const std::string pass = Testcase(xml, "reference:tiny.cpu", "fp32 seed=0");
  ASSERT_FALSE(pass.empty());
  EXPECT_NE(pass.find("time=\"1.200000\""), std::string::npos) << pass;  // median of 1.2, 1.0, 1.4
  EXPECT_EQ(pass.find("<failure"), std::string::npos);
  EXPECT_NE(pass.find("<property name=\"min_psnr\" value=\"41.5\"/>"), std::string::npos) << pass;
  EXPECT_NE(pass.find("<property name=\"device\" value=\"cpu\"/>"), std::string::npos);
  const std::string fail = Testcase(xml, "reference:tiny.cpu", "bf16 seed=0");
  EXPECT_NE(fail.find("<failure message=\"min_psnr 23.1 &lt; 30\" type=\"FAIL\">"), std::string::npos)
      << fail;
  EXPECT_NE(fail.find("repro: framegate check --size tiny --device cpu --policy bf16"), std::string::npos);
  EXPECT_NE(Testcase(xml, "reference:tiny.cpu", "fp16-emulated seed=0").find("<failure"), std::string::npos);
  const std::string error = Testcase(xml, "reference:tiny.cpu", "fp8-e5m2 seed=0");
  EXPECT_NE(error.find("<error message=\"dtype_mismatch"), std::string::npos);
  EXPECT_NE(error.find("raised in: denoiser.embed.time_mlp.0 (aten::linear)"), std::string::npos) << error;
  EXPECT_NE(Testcase(xml, "reference:tiny.cpu", "fp16-emulated seed=0")
                .find("first non-finite: step 3 in blocks.0.spatial_attn.logits at aten::exp"),
            std::string::npos);
  EXPECT_NE(Testcase(xml, "reference:tiny.cuda:0", "fp32 seed=0").find("<error"), std::string::npos);
  EXPECT_NE(Testcase(xml, "reference:tiny.cpu", "fp16 seed=0").find("<skipped message=\"no FP16"),
            std::string::npos);
  EXPECT_NE(Testcase(xml, "reference:tiny.cuda:0", "bf16 seed=0")
                .find("<skipped message=\"expected failure (known bf16 drift): min_psnr 20 &lt; 30\"/>"),
            std::string::npos);
}

TEST(JunitReportTest, EscapesHostileTextAndControlCharacters) {
  RunRecord run;
  CellResult r = MakeResult("cpu", "<script>alert(1)</script>", CellStatus::kError,
                            std::string("bad \x01 byte \xff and \"quotes\" & <tags>"));
  run.cells = {r};
  const std::string xml = JunitXml(run);
  EXPECT_EQ(xml.find("<script>"), std::string::npos);
  EXPECT_NE(xml.find("name=\"&lt;script&gt;alert(1)&lt;/script&gt; seed=0\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("message=\"bad ? byte ? and &quot;quotes&quot; &amp; &lt;tags&gt;\""), std::string::npos)
      << xml;
}

}  // namespace
}  // namespace framegate
