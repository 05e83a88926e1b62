#include "harness/error_class.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(ErrorClassTest, ClassifiesTheFieldReportMessages) {
  ClassifiedError e = ClassifyError(
      "mat1 and mat2 must have the same dtype, but got Float and Half\nException raised from ...",
      "time_embed.0");
  EXPECT_EQ(e.cls, ErrorClass::kDtypeMismatch);
  EXPECT_EQ(e.Reason(),
            "dtype_mismatch: mat1 and mat2 must have the same dtype, but got Float and Half "
            "(in time_embed.0)");
  EXPECT_EQ(ClassifyError("Input type (torch.cuda.FloatTensor) and weight type "
                          "(CUDABFloat16Type) should be the same")
                .cls,
            ErrorClass::kDtypeMismatch);
  EXPECT_EQ(ClassifyError("Promotion for Float8 Types is not supported, attempted to promote "
                          "Float8_e4m3fn and Float")
                .cls,
            ErrorClass::kFp8Promotion);
  e = ClassifyError("\"addmm_impl_cpu_\" not implemented for 'Half'");
  EXPECT_EQ(e.cls, ErrorClass::kUnsupportedOp);
  EXPECT_EQ(e.op, "addmm_impl_cpu_");
  EXPECT_EQ(ClassifyError("CUDA out of memory. Tried to allocate 2.00 GiB").cls, ErrorClass::kOutOfMemory);
  EXPECT_EQ(ClassifyError("value cannot be converted to type at::Half without overflow").cls,
            ErrorClass::kValueOverflow);
  EXPECT_EQ(ClassifyError("something else entirely").cls, ErrorClass::kOther);
}

TEST(ErrorClassTest, TheReasonCarriesTheModelsNoteOnTheOpInsideItsPlace) {
  ClassifiedError e =
      ClassifyError("Input type (CPUBFloat16Type) and weight type (CPUFloatType) should be the same",
                    "denoiser", "aten::conv3d");
  e.note = "its weight is a tensor constant";
  EXPECT_EQ(e.Reason(),
            "dtype_mismatch: Input type (CPUBFloat16Type) and weight type (CPUFloatType) should be the same "
            "(in denoiser, aten::conv3d; its weight is a tensor constant)");
}

// The dtype errors as each LibTorch version words them (fp32 input, bf16 weight: mm,
// linear, linear with a bias, conv3d with a bias, SDPA; texts copied from Debian's 1.13
// and 2.6), whichever version this test runs on.
TEST(ErrorClassTest, DtypeMismatchInTheWordsOfLibTorch113And26) {
  const char* libtorch_1_13[] = {
      "expected scalar type Float but found BFloat16",
      "mat1 and mat2 must have the same dtype",
  };
  const char* libtorch_2_6[] = {
      "expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16",
      "Expected query, key, and value to have the same dtype, but got query.dtype: float key.dtype: "
      "c10::BFloat16 and value.dtype: c10::BFloat16 instead.",
      "Input type (float) and bias type (c10::BFloat16) should be the same",
      "mat1 and mat2 must have the same dtype, but got Float and BFloat16",
  };
  for (const char* message : libtorch_1_13) {
    EXPECT_EQ(ClassifyError(message).cls, ErrorClass::kDtypeMismatch) << message;
  }
  for (const char* message : libtorch_2_6) {
    EXPECT_EQ(ClassifyError(message).cls, ErrorClass::kDtypeMismatch) << message;
  }
  const ClassifiedError e = ClassifyError(
      "expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16\n"
      "Exception raised from addmm_impl_cpu_ at ...",
      "denoiser.embed.time_mlp.0", "aten::linear");
  EXPECT_EQ(e.Reason(),
            "dtype_mismatch: expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16 "
            "(in denoiser.embed.time_mlp.0, aten::linear)");
}

TEST(ErrorClassTest, ReadsTheRealMessageAndLocationOfATorchScriptTraceback) {
  const std::string what =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript (most recent call last):\n"
      "  File \"code/__torch__/denoiser.py\", line 12, in forward\n"
      "    h = torch.linear(x, w)\n"
      "RuntimeError: mat1 and mat2 must have the same dtype\n";
  const ClassifiedError e = ClassifyError(what);
  EXPECT_EQ(e.cls, ErrorClass::kDtypeMismatch);
  EXPECT_EQ(e.message, "mat1 and mat2 must have the same dtype");
  EXPECT_EQ(e.module, "denoiser.py:12");
}

}  // namespace
}  // namespace framegate
