#include "harness/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace framegate {
namespace {

std::string TempPath(const std::string& name) {
  // The process id: CTest runs tests (and CI runs) side by side.
  return (std::filesystem::temp_directory_path() /
          ("fg_npy_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(NpyTest, WriteThenReadRoundTripsShapeAndValues) {
  const std::vector<float> values = {0.f, 0.25f, 0.5f, 1.f, -3.5f, 7.f};
  const std::string path = TempPath("roundtrip.npy");
  ASSERT_TRUE(WriteNpyFloat32(path, {2, 3}, values.data()).ok());
  StatusOr<NpyArray> read = ReadNpy(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->dtype, NpyDtype::kFloat32);
  EXPECT_EQ(read->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read->ToFloat32(), values);
  // The header is 64-byte aligned as NumPy writes it.
  EXPECT_EQ(std::filesystem::file_size(path), 128u + values.size() * 4);
}

TEST(NpyTest, ReadsTheMetricVectorsNumPyWrote) {
  StatusOr<NpyArray> ref = ReadNpy(FRAMEGATE_SOURCE_DIR "/tests/data/metric-vectors/blur/ref.npy");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ASSERT_EQ(ref->shape.size(), 4u);
  EXPECT_EQ(ref->shape[3], 3);
}

TEST(NpyTest, RejectsBadMagicTruncationAndUnsupportedDtypes) {
  const std::string bad_magic = "NUMPY\x01\x00";
  auto parse = [](const std::string& bytes) {
    return ParseNpy("x.npy", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  };
  StatusOr<NpyArray> r = parse(bad_magic);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x.npy: not a .npy file"), std::string::npos);

  auto with_header = [](const std::string& dict, size_t data_bytes) {
    std::string h = dict;
    h.push_back('\n');
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes.push_back(static_cast<char>(h.size() & 0xff));
    bytes.push_back(static_cast<char>(h.size() >> 8));
    return bytes + h + std::string(data_bytes, '\0');
  };
  r = parse(with_header("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 16));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unsupported dtype '<i8'"), std::string::npos);
  r = parse(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs 24"), std::string::npos);
  r = parse(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8));
  ASSERT_FALSE(r.ok());
  r = parse(with_header("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dtype, NpyDtype::kUint8);
}


// Found by fuzz/npy_fuzz (fuzz/corpus/npy/regression-empty-float32.npy): an empty float32
// array made ToFloat32 memcpy from a null pointer (UBSan).
TEST(NpyTest, FuzzRegressionEmptyFloat32ArrayConvertsToNoValues) {
  const std::string path =
      std::string(FRAMEGATE_SOURCE_DIR) + "/fuzz/corpus/npy/regression-empty-float32.npy";
  StatusOr<NpyArray> r = ReadNpy(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->shape, (std::vector<int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(r->NumElements(), 0);
  EXPECT_TRUE(r->ToFloat32().empty());
}

// Found by fuzz/npy_fuzz (fuzz/corpus/npy/regression-long-header.npy): std::regex recursed
// once per header character and overflowed the stack (`framegate metrics` segfaulted).
TEST(NpyTest, FuzzRegressionLongHeaderIsAnErrorNotAStackOverflow) {
  const std::string path =
      std::string(FRAMEGATE_SOURCE_DIR) + "/fuzz/corpus/npy/regression-long-header.npy";
  StatusOr<NpyArray> r = ReadNpy(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(": header: unsupported dtype 'xxxx"), std::string::npos);
  EXPECT_LT(r.status().message().size(), 200u);  // the 60 KB value is not echoed
  const std::string huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'pad': '" +
                           std::string(2000000, 'x') + "'}\n";
  std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((huge.size() >> (8 * i)) & 0xff));
  bytes += huge + std::string(4, '\0');
  r = ParseNpy("huge.npy", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->shape, (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace framegate
