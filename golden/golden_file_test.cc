#include "golden/golden_file.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace framegate {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("fg_golden_" + std::to_string(::getpid()) + name))
      .string();
}

Golden SampleGolden() {
  Golden g;
  g.frames = at::rand({2, 12, 12, 3});
  g.latents = at::randn({1, 4, 2, 3, 3});
  g.provenance.config = "golden-v1|test";
  g.provenance.config_hash = "abc";
  g.provenance.command = "framegate golden make --size tiny";
  return g;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(GoldenFileTest, RoundTripsTensorsAndProvenance) {
  const std::string path = TempPath("round.safetensors");
  const Golden g = SampleGolden();
  ASSERT_TRUE(WriteGolden(path, g).ok());
  StatusOr<Golden> back = ReadGolden(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(at::equal(back->frames, g.frames));
  EXPECT_TRUE(at::equal(back->latents, g.latents));
  EXPECT_EQ(back->provenance.command, g.provenance.command);
  // The header is 8-byte aligned JSON, as safetensors requires.
  const std::string bytes = ReadAll(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + (2 * 12 * 12 * 3 + 4 * 2 * 3 * 3) * 4);
  std::remove(path.c_str());
}

TEST(GoldenFileTest, DamagedFilesAreCorruptNamingTheFile) {
  const std::string path = TempPath("bad.safetensors");
  ASSERT_TRUE(WriteGolden(path, SampleGolden()).ok());
  const std::string good = ReadAll(path);
  struct Case {
    std::string bytes;
    Status::Code code;
    std::string words;
  };
  std::string wrong_format = good;
  wrong_format.replace(wrong_format.find("framegate-golden"), 16, "framegate-xolden");
  std::string newer = good;
  newer.replace(newer.find("\"format_version\":\"1\""), 20, "\"format_version\":\"9\"");
  const Case cases[] = {
      {good.substr(0, good.size() - 10), Status::Code::kCorrupt, "truncated"},
      {good.substr(0, 5), Status::Code::kCorrupt, "truncated"},
      {"\xff\xff\xff\xff\xff\xff\xff\xff" + good.substr(8), Status::Code::kCorrupt, "header length"},
      {wrong_format, Status::Code::kCorrupt, "not a framegate golden"},
      {newer, Status::Code::kUnsupported, "newer"},
  };
  for (const Case& c : cases) {
    WriteAll(path, c.bytes);
    StatusOr<Golden> r = ReadGolden(path);
    ASSERT_FALSE(r.ok()) << c.words;
    EXPECT_EQ(r.status().code(), c.code) << r.status().message();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.words), std::string::npos) << r.status().message();
  }
  std::remove(path.c_str());
  EXPECT_EQ(ReadGolden(path).status().code(), Status::Code::kNotFound);
}

TEST(GoldenFileTest, LatentsNotOfOneSampleAreCorrupt) {
  const std::string path = TempPath("batch.safetensors");
  Golden g = SampleGolden();
  g.latents = at::randn({2, 4, 1, 3, 3});
  ASSERT_TRUE(WriteGolden(path, g).ok());
  StatusOr<Golden> r = ReadGolden(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path + ": latents must be [1, C, T, h, w]");
  std::remove(path.c_str());
}

TEST(GoldenFileTest, ShapesAreCheckedAgainstWhatTheCellMade) {
  // A golden with larger latents made `check` read past the cell's (SIGSEGV); with
  // smaller ones the cosine covered only part of them (PASS).
  const Golden g = SampleGolden();  // frames [2, 12, 12, 3], latents [1, 4, 2, 3, 3]
  EXPECT_TRUE(
      CheckGoldenShapes("g.safetensors", g, at::zeros({2, 12, 12, 3}), at::zeros({1, 4, 2, 3, 3})).ok());
  const Status latents =
      CheckGoldenShapes("g.safetensors", g, at::zeros({2, 12, 12, 3}), at::zeros({1, 4, 2, 6, 6}));
  EXPECT_EQ(latents.code(), Status::Code::kCorrupt);
  EXPECT_EQ(latents.message(),
            "g.safetensors: golden latents [1, 4, 2, 3, 3] but the cell made [1, 4, 2, 6, 6]");
  const Status frames =
      CheckGoldenShapes("g.safetensors", g, at::zeros({2, 12, 12, 3, 1}), at::zeros({1, 4, 2, 3, 3}));
  EXPECT_EQ(frames.message(),
            "g.safetensors: golden frames [2, 12, 12, 3] but the cell made [2, 12, 12, 3, 1]");
}

// Found by fuzz/golden_fuzz (fuzz/corpus/golden/regression-dtype-not-a-string.safetensors):
// a tensor entry whose "dtype" is an array made json::value throw out of ReadGolden.
TEST(GoldenFileTest, FuzzRegressionNonStringHeaderValuesAreCorruptNotExceptions) {
  const std::string path =
      std::string(FRAMEGATE_SOURCE_DIR) + "/fuzz/corpus/golden/regression-dtype-not-a-string.safetensors";
  StatusOr<Golden> g = ReadGolden(path);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), path + ": tensor 'frames': dtype is not F32");
  // The same for the metadata: a non-string format is "not a framegate golden".
  const std::string header = R"({"__metadata__": {"format": 7}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  StatusOr<Golden> m = ParseGolden("m.safetensors", bytes + header);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("m.safetensors: not a framegate golden"), std::string::npos);
}

}  // namespace
}  // namespace framegate
