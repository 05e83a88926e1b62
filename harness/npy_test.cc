#include "harness/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "harness/test_temp_dir.h"

namespace framegate {
namespace {

// Every test's files go in one folder, removed when the tests end.
std::string TempPath(const std::string& name) {
  static const TestTempDir temp("fg-npy");
  return temp / name;
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
  const std::string path = std::string(FRAMEGATE_SOURCE_DIR) + "/fuzz/corpus/npy/regression-long-header.npy";
  StatusOr<NpyArray> r = ReadNpy(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(": header: unsupported dtype 'xxxx"), std::string::npos);
  EXPECT_LT(r.status().message().size(), 200u);  // the 60 KB value is not echoed
  // A long header within the 1 MiB bound parses; beyond it, it is refused.
  for (const size_t pad : {size_t{1000000}, size_t{2000000}}) {
    const std::string huge =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'pad': '" + std::string(pad, 'x') + "'}\n";
    std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((huge.size() >> (8 * i)) & 0xff));
    bytes += huge + std::string(4, '\0');
    r = ParseNpy("huge.npy", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (pad == 1000000) {
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->shape, (std::vector<int64_t>{1}));
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().message(), "huge.npy: header is 2000067 bytes, more than 1048576");
    }
  }
}

TEST(NpyTest, HeaderWithADuplicatedKeyIsRefused) {
  // NumPy's literal_eval keeps the last value ('<u1': 2 bytes of data); the first was read.
  auto parse = [](const std::string& dict, size_t data_bytes) {
    const std::string h = dict + "\n";
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes.push_back(static_cast<char>(h.size() & 0xff));
    bytes.push_back(static_cast<char>(h.size() >> 8));
    bytes += h + std::string(data_bytes, '\0');
    return ParseNpy("dup.npy", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  };
  StatusOr<NpyArray> r =
      parse("{'descr': '<f4', 'descr': '<u1', 'fortran_order': False, 'shape': (2,), }", 8);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorrupt);
  EXPECT_EQ(r.status().message(), "dup.npy: header: key 'descr' appears twice");
  r = parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), \"shape\": (1,)}", 8);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "dup.npy: header: key 'shape' appears twice");
  // A key's name inside a value is not a key.
  r = parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'note': 'shape'}", 8);
  ASSERT_TRUE(r.ok()) << r.status().message();
}

TEST(NpyTest, OnlyRegularFilesAreRead) {
  // /dev/zero never ends (ReadNpy and metrics ran out of memory); a FIFO blocked the
  // open (tests/python/test_fault_hunt_inputs.py has those): both are refused at once.
  for (const std::string path : {"/dev/null", "/tmp"}) {
    StatusOr<NpyFile> opened = OpenNpy(path);
    ASSERT_FALSE(opened.ok()) << path;
    EXPECT_EQ(opened.status().code(), Status::Code::kInvalidInput);
    EXPECT_EQ(opened.status().message().rfind(path + ": not a regular file (", 0), 0u)
        << opened.status().message();
    StatusOr<NpyArray> read = ReadNpy(path);
    ASSERT_FALSE(read.ok()) << path;
    EXPECT_EQ(read.status().message(), opened.status().message());
  }
}

// Writes raw bytes to a temporary file; returns its path.
std::string WriteBytes(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// A version 1.0 .npy file's bytes with the header dict padded by `pad` spaces.
std::string NpyBytes(const std::string& descr, const std::string& shape, size_t pad,
                     const std::string& data) {
  const std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }" +
                           std::string(pad, ' ') + "\n";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes.push_back(static_cast<char>(dict.size() & 0xff));
  bytes.push_back(static_cast<char>(dict.size() >> 8));
  return bytes + dict + data;
}

TEST(NpyTest, OpenNpyUsesAlignedFloat32InPlace) {
  const std::vector<float> values = {0.f, 0.25f, 0.5f, 1.f, -3.5f, 7.f};
  const std::string path = TempPath("open_f32.npy");
  ASSERT_TRUE(WriteNpyFloat32(path, {2, 3}, values.data()).ok());
  StatusOr<NpyFile> file = OpenNpy(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->dtype(), NpyDtype::kFloat32);
  EXPECT_EQ(file->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(file->NumElements(), 6);
  const float* in_place = file->Float32InPlace();
  ASSERT_NE(in_place, nullptr);
  EXPECT_EQ(static_cast<const void*>(in_place), static_cast<const void*>(file->data()));
  EXPECT_EQ(std::vector<float>(in_place, in_place + 6), values);
  // Moved, the data stays where it was.
  NpyFile moved = std::move(file).value();
  EXPECT_EQ(moved.Float32InPlace(), in_place);
  EXPECT_EQ(moved.Float32InPlace()[5], 7.f);
  std::remove(path.c_str());
}

TEST(NpyTest, OpenNpyConvertsUint8AndMisalignedFloat32OnCopy) {
  const std::string u8 =
      WriteBytes("open_u8.npy", NpyBytes("|u1", "(3,)", 10, std::string("\x00\x33\xff", 3)));
  StatusOr<NpyFile> a = OpenNpy(u8);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->Float32InPlace(), nullptr);
  std::vector<float> out(3);
  a->CopyToFloat32(out.data());
  EXPECT_EQ(out, (std::vector<float>{0.f, 51 / 255.0f, 1.f}));
  // A header whose length leaves the data at an odd offset: copied, not used in place.
  const float v[2] = {1.5f, -2.f};
  const std::string data(reinterpret_cast<const char*>(v), sizeof v);
  for (size_t pad = 0; pad < 4; ++pad) {
    const std::string bytes = NpyBytes("<f4", "(2,)", pad, data);
    const std::string path = WriteBytes("open_pad.npy", bytes);
    StatusOr<NpyFile> f = OpenNpy(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    std::vector<float> got(2);
    f->CopyToFloat32(got.data());
    EXPECT_EQ(got, (std::vector<float>{1.5f, -2.f})) << pad;
    EXPECT_EQ(f->Float32InPlace() != nullptr, (bytes.size() - sizeof v) % 4 == 0) << pad;
    std::remove(path.c_str());
  }
  std::remove(u8.c_str());
}

TEST(NpyTest, OpenNpyReportsWhatReadNpyReports) {
  const std::string missing = TempPath("no_such.npy");
  StatusOr<NpyFile> r = OpenNpy(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), missing + ": cannot open");
  for (const std::string& bytes :
       {std::string(), std::string("NUMPY"), NpyBytes("<f4", "(3,)", 0, std::string(8, '\0')),
        NpyBytes("<i4", "(2,)", 0, std::string(8, '\0'))}) {
    const std::string path = WriteBytes("open_bad.npy", bytes);
    StatusOr<NpyFile> opened = OpenNpy(path);
    StatusOr<NpyArray> read = ReadNpy(path);
    ASSERT_FALSE(opened.ok());
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(opened.status().message(), read.status().message());
    EXPECT_EQ(opened.status().code(), read.status().code());
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace framegate
