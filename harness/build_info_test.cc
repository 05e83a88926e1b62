#include "harness/build_info.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace framegate {
namespace {

TEST(BuildInfoTest, RunFingerprintIsAJsonObjectOfWhatCanChangeUnderTheCode) {
  CpuInfo cpu;
  cpu.model = "AMD EPYC \"Genoa\"";  // quotes must come out as JSON
  cpu.features = {"avx2", "f16c"};
  const nlohmann::json j = nlohmann::json::parse(RunFingerprintJson(StaticBuildInfo(), cpu));
  ASSERT_TRUE(j.is_object());
  for (const char* key : {"build_flags", "compiler", "cpu_isa", "cpu_model", "framegate_release", "os"}) {
    EXPECT_TRUE(j.contains(key) && j[key].is_string()) << key;
  }
  EXPECT_EQ(j["cpu_isa"], "avx2 f16c");
  EXPECT_EQ(j["cpu_model"], "AMD EPYC \"Genoa\"");
  // The release without the commit: a new commit is a code change, not an environment change.
  EXPECT_EQ(j["framegate_release"], FRAMEGATE_VERSION_STRING);
  EXPECT_EQ(j["framegate_release"].get<std::string>().find(StaticBuildInfo().git_sha), std::string::npos);
}

}  // namespace
}  // namespace framegate
