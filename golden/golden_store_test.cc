#include "golden/golden_store.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "harness/sha256.h"

namespace framegate {
namespace {

class GoldenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("fg_goldens_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    spec_.size = "tiny";
    spec_.policy = Fp32Policy();
    SamplerConfig sampler;
    sampler.steps = 2;
    spec_.sampler = sampler;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Flips one byte near the end of the file (in the last tensor's values).
  static void DamageFile(const std::string& path) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  std::string dir_;
  PipelineSpec spec_;
};

TEST_F(GoldenStoreTest, MakeThenLoadMatchesTheRun) {
  GoldenStore store(dir_);
  StatusOr<GoldenKey> key = GoldenKeyOf(spec_);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(store.Load(*key).status().code(), Status::Code::kNotFound);
  StatusOr<GoldenStore::Made> made = store.Make(spec_, "test");
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_FALSE(made->kept);
  EXPECT_EQ(made->path, store.PathFor(*key));
  StatusOr<Golden> golden = store.Load(*key);
  ASSERT_TRUE(golden.ok()) << golden.status().message();
  StatusOr<PipelineOutcome> rerun = RunPipeline(spec_);
  ASSERT_TRUE(rerun.ok());
  EXPECT_TRUE(at::equal(golden->frames, rerun->result.frames));  // deterministic on the CPU
  EXPECT_EQ(golden->provenance.config, key->CanonicalString());
  std::vector<std::string> problems;
  ASSERT_TRUE(store.CheckAll(&problems).ok());
  EXPECT_TRUE(problems.empty());
  StatusOr<std::vector<GoldenStore::Entry>> list = store.List();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().file, key->FileName());
}

TEST_F(GoldenStoreTest, ChangedConfigOrBytesAreNeverASilentPass) {
  GoldenStore store(dir_);
  ASSERT_TRUE(store.Make(spec_, "test").ok());
  PipelineSpec other = spec_;
  other.seed = 1;
  StatusOr<GoldenKey> other_key = GoldenKeyOf(other);
  EXPECT_EQ(store.Load(*other_key).status().code(), Status::Code::kNotFound);

  const GoldenKey key = *GoldenKeyOf(spec_);
  DamageFile(store.PathFor(key));  // the sha256 no longer matches the manifest
  StatusOr<Golden> loaded = store.Load(key);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Status::Code::kCorrupt);
  EXPECT_NE(loaded.status().message().find("sha256"), std::string::npos);
  std::vector<std::string> problems;
  ASSERT_TRUE(store.CheckAll(&problems).ok());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find(key.FileName()), std::string::npos);
}

// A calibration names its goldens' sha256: making a golden again must not change the file
// when the run is the same, and must replace one that is damaged.
TEST_F(GoldenStoreTest, MakingTheSameGoldenAgainKeepsTheFileAndReplacesADamagedOne) {
  GoldenStore store(dir_);
  const GoldenKey key = *GoldenKeyOf(spec_);
  ASSERT_TRUE(store.Make(spec_, "first").ok());
  const std::string sha = *Sha256File(store.PathFor(key));
  const std::string made_at = store.Load(key)->provenance.created_at;
  StatusOr<GoldenStore::Made> again = store.Make(spec_, "second");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->kept);
  EXPECT_EQ(*Sha256File(store.PathFor(key)), sha);
  EXPECT_EQ(store.Load(key)->provenance.command, "first");
  EXPECT_EQ(store.Load(key)->provenance.created_at, made_at);
  DamageFile(store.PathFor(key));  // the next make writes it anew and says why
  StatusOr<GoldenStore::Made> repaired = store.Make(spec_, "third");
  ASSERT_TRUE(repaired.ok()) << repaired.status().message();
  EXPECT_FALSE(repaired->kept);
  EXPECT_EQ(repaired->replaced.rfind("it could not be read: sha256 ", 0), 0u) << repaired->replaced;
  ASSERT_TRUE(store.Load(key).ok());
  EXPECT_EQ(store.Load(key)->provenance.command, "third");
}

// What `golden make` says when it replaces a golden: the first of frames, latents and
// steps that differs, by how much.
TEST(GoldenDifferenceTest, NamesWhatDiffersAndByHowMuch) {
  Golden stored;
  stored.frames = at::zeros({2, 4, 4, 3});
  stored.latents = at::zeros({1, 4, 2, 2, 2});
  stored.trajectory = at::zeros({3, 1, 4, 2, 2, 2});
  Golden made = stored;
  made.frames = stored.frames.clone();
  EXPECT_EQ(GoldenDifference(stored, made), "");
  made.frames.index_put_({1, 2, 3, 0}, -0.0);  // -0 equals +0: no difference
  EXPECT_EQ(GoldenDifference(stored, made), "");
  made.frames.index_put_({1, 2, 3, 0}, 2.5e-7);
  EXPECT_EQ(GoldenDifference(stored, made), "its frames differ from this run's by up to 2.5e-07");
  made.frames = stored.frames;
  made.trajectory = at::ones({3, 1, 4, 2, 2, 2});
  EXPECT_EQ(GoldenDifference(stored, made), "its steps differ from this run's by up to 1");
  made.latents = at::zeros({1, 4, 2, 2, 3});
  EXPECT_EQ(GoldenDifference(stored, made), "its latents have another shape");
  Golden version1 = stored;
  version1.trajectory = at::Tensor();
  EXPECT_EQ(GoldenDifference(version1, stored), "it has no steps (format version 1)");
}

TEST_F(GoldenStoreTest, AFaultCaseIsAnotherModelWithItsOwnGolden) {
  PipelineSpec faulty = spec_;
  faulty.fault = FaultCase::kAttnOverflow;
  const GoldenKey clean = *GoldenKeyOf(spec_), fault = *GoldenKeyOf(faulty);
  EXPECT_NE(clean.FileName(), fault.FileName());
  EXPECT_EQ(fault.FileName().rfind("reference-tiny-attn-overflow-seed0-", 0), 0u) << fault.FileName();
  EXPECT_NE(GoldenMakeCommand(faulty, "g").find("--fault attn-overflow"), std::string::npos);
}

TEST_F(GoldenStoreTest, RefusesLowPrecisionPolicies) {
  GoldenStore store(dir_);
  PipelineSpec bf16 = spec_;
  bf16.policy = *FindPolicy("bf16");
  EXPECT_EQ(store.Make(bf16, "").status().code(), Status::Code::kInvalidInput);
}

TEST(GoldenKeyTest, FileNamesArePathSafeAndDifferPerConfig) {
  GoldenKey key{"model:../../etc", "seed=0", "", SamplerConfig{}, 3};
  EXPECT_EQ(key.FileName().find('/'), std::string::npos);
  EXPECT_EQ(key.FileName().rfind("model-------etc-seed3-", 0), 0u) << key.FileName();
  GoldenKey other = key;
  other.sampler.steps = 9;
  EXPECT_NE(other.FileName(), key.FileName());
}

// The hint an UNRESOLVED cell prints is pasted into a shell: a folder with spaces or
// `$(...)` stays one literal word.
TEST_F(GoldenStoreTest, MakeCommandIsShellQuoted) {
  PipelineSpec spec = spec_;
  spec.model_dir = "/models/my model $(touch PWNED)";
  EXPECT_EQ(GoldenMakeCommand(spec, "/golden dir"),
            "framegate golden make --model '/models/my model $(touch PWNED)' --seed 0 --sampler ddim --steps "
            "2 --guidance 1 --golden-dir '/golden dir'");
}

}  // namespace
}  // namespace framegate
