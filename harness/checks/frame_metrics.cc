#include "harness/checks/frame_metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cmath>
#include <limits>
#include <sstream>
#include <system_error>
#include <thread>

namespace framegate {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// SSIM window: scipy.ndimage.gaussian_filter with sigma 1.5, truncate 3.5 (what skimage
// passes) has radius int(3.5 * 1.5 + 0.5) = 5, i.e. 11 taps.
constexpr double kSigma = 1.5;
constexpr int kRadius = 5;
constexpr int kTaps = 2 * kRadius + 1;
constexpr double kC1 = 0.01 * 0.01;  // (K1 * data_range)^2
constexpr double kC2 = 0.03 * 0.03;  // (K2 * data_range)^2

// Inner loops work on blocks of kBlock values held in local arrays, so that GCC
// vectorizes them even at -O2 (whose cost model accepts only loops without a scalar
// epilogue or alias checks). Row buffers are padded to a multiple of kBlock.
constexpr int64_t kBlock = 16;

// The filtered maps SSIM needs, in this order in every buffer below. SSIM reads the
// variances only as vx + vy, so x*x + y*y is one map.
enum Map { kX = 0, kY, kSquares, kXY, kNumMaps };

int64_t RoundUpToBlock(int64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

// scipy.ndimage._gaussian_kernel1d: exp(-x^2 / (2 sigma^2)) normalized to sum 1, x in
// [-radius, radius]. Exactly symmetric, which Filter11 relies on.
std::array<double, kTaps> GaussianTaps() {
  std::array<double, kTaps> taps{};
  double sum = 0.0;
  for (int k = 0; k < kTaps; ++k) {
    const double x = k - kRadius;
    taps[k] = std::exp(-0.5 / (kSigma * kSigma) * x * x);
    sum += taps[k];
  }
  for (double& t : taps) t /= sum;
  return taps;
}

// out[j] = sum_k taps[k] * src[k][j] for j < n, n a multiple of kBlock: one 11-tap
// filter, horizontal (src[k] = row + k * channels) or vertical (src[k] = row k of the
// window). Symmetric taps are folded: 6 products, not 11.
void Filter11(const std::array<double, kTaps>& t, const double* const src[kTaps], int64_t n,
              double* out) {
  // Local copies, so that the compiler keeps the 11 pointers and 6 taps in registers.
  const double *s0 = src[0], *s1 = src[1], *s2 = src[2], *s3 = src[3], *s4 = src[4];
  const double *s5 = src[5], *s6 = src[6], *s7 = src[7], *s8 = src[8], *s9 = src[9];
  const double* s10 = src[10];
  const double t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5];
  for (int64_t j = 0; j < n; j += kBlock) {
    double acc[kBlock];  // local: no aliasing with src for the vectorizer to check
    for (int l = 0; l < kBlock; ++l) {
      const int64_t i = j + l;
      acc[l] = t5 * s5[i] + t0 * (s0[i] + s10[i]) + t1 * (s1[i] + s9[i]) + t2 * (s2[i] + s8[i]) +
               t3 * (s3[i] + s7[i]) + t4 * (s4[i] + s6[i]);
    }
    for (int l = 0; l < kBlock; ++l) out[j + l] = acc[l];
  }
}

// Result of a ratio whose denominator may be 0 (see the header's zero-denominator rule).
double SafeRatio(double num, double den) {
  if (den == 0.0) return num == 0.0 ? 0.0 : (std::isnan(num) ? kNaN : kInf);
  return num / den;
}

// SSIM of one frame pair, reusing its buffers across frames (one per thread).
//
// The Gaussian filter is separable and the mean is taken over the valid region only
// (rows and columns [5, n - 5)), whose filter windows never reach past the border: so
// scipy's mode='reflect' never matters and the filter is computed on the valid region
// alone. A frame row is flat: width * channels values, channels interleaved, so a
// horizontal tap is a shift by `channels`: output value j of a row reads input values
// j .. j + 10 * channels. Per input row: the product rows (x, y, x*x + y*y, x*y), then
// the horizontal filter into a ring of kTaps rows; once the ring is full, the vertical
// filter gives the local means of one valid row, then SSIM.
class SsimEngine {
 public:
  double Compute(const FrameView& ref, const FrameView& cand);

 private:
  void Resize(const FrameView& frame);
  void LoadProducts(const float* x, const float* y);
  void FilterHorizontal(int64_t row);
  double SsimRowSum(int64_t first_row);

  const std::array<double, kTaps> taps_ = GaussianTaps();
  int64_t channels_ = 0;
  int64_t row_len_ = 0;           // width * channels
  int64_t out_len_ = 0;           // (width - 2 * kRadius) * channels: the valid part of a row
  int64_t out_padded_ = 0;        // out_len_ rounded up to kBlock
  int64_t in_padded_ = 0;         // >= out_padded_ + 2 * kRadius * channels; a block multiple
  std::vector<double> products_;  // [kNumMaps, in_padded_], zero past row_len_
  std::vector<double> ring_;      // [kTaps, kNumMaps, out_padded_], row r at slot r % kTaps
  std::vector<double> means_;     // [kNumMaps, out_padded_]: local means of one valid row
};

void SsimEngine::Resize(const FrameView& frame) {
  const int64_t row_len = frame.width * frame.channels;
  if (row_len == row_len_ && frame.channels == channels_) return;
  channels_ = frame.channels;
  row_len_ = row_len;
  out_len_ = (frame.width - 2 * kRadius) * frame.channels;
  out_padded_ = RoundUpToBlock(out_len_);
  in_padded_ = std::max(out_padded_ + 2 * kRadius * channels_, RoundUpToBlock(row_len_));
  products_.assign(kNumMaps * in_padded_, 0.0);
  ring_.assign(kTaps * kNumMaps * out_padded_, 0.0);
  means_.assign(kNumMaps * out_padded_, 0.0);
}

double SsimEngine::Compute(const FrameView& ref, const FrameView& cand) {
  assert(ref.height == cand.height && ref.width == cand.width && ref.channels == cand.channels);
  if (ref.height < kTaps || ref.width < kTaps || ref.channels < 1) return kNaN;
  Resize(ref);
  double sum = 0.0;
  for (int64_t row = 0; row < ref.height; ++row) {
    LoadProducts(ref.data + row * row_len_, cand.data + row * row_len_);
    FilterHorizontal(row);
    if (row >= kTaps - 1) sum += SsimRowSum(row - (kTaps - 1));
  }
  const int64_t valid_rows = ref.height - 2 * kRadius;
  return sum / static_cast<double>(valid_rows * out_len_);
}

// products_ <- the kNumMaps product rows of one row pair (row_len_ floats each).
void SsimEngine::LoadProducts(const float* x, const float* y) {
  double* px = &products_[kX * in_padded_];
  double* py = &products_[kY * in_padded_];
  double* psq = &products_[kSquares * in_padded_];
  double* pxy = &products_[kXY * in_padded_];
  for (int64_t i = 0; i < row_len_; i += kBlock) {
    double a[kBlock] = {}, b[kBlock] = {};
    if (i + kBlock <= row_len_) {
      for (int l = 0; l < kBlock; ++l) a[l] = x[i + l];
      for (int l = 0; l < kBlock; ++l) b[l] = y[i + l];
    } else {
      for (int64_t l = 0; l < row_len_ - i; ++l) a[l] = x[i + l];
      for (int64_t l = 0; l < row_len_ - i; ++l) b[l] = y[i + l];
    }
    // The rows are padded to a block multiple past row_len_: zeros go there.
    for (int l = 0; l < kBlock; ++l) px[i + l] = a[l];
    for (int l = 0; l < kBlock; ++l) py[i + l] = b[l];
    for (int l = 0; l < kBlock; ++l) psq[i + l] = a[l] * a[l] + b[l] * b[l];
    for (int l = 0; l < kBlock; ++l) pxy[i + l] = a[l] * b[l];
  }
}

// Ring row `row` <- the horizontal filter of products_, every map.
void SsimEngine::FilterHorizontal(int64_t row) {
  double* out = &ring_[(row % kTaps) * kNumMaps * out_padded_];
  for (int m = 0; m < kNumMaps; ++m) {
    const double* in = &products_[m * in_padded_];
    const double* src[kTaps];
    for (int k = 0; k < kTaps; ++k) src[k] = in + k * channels_;
    Filter11(taps_, src, out_padded_, out + m * out_padded_);
  }
}

// means_ <- the vertical filter of ring rows first_row .. first_row + 10; returns the sum
// of SSIM over that valid row's out_len_ values.
double SsimEngine::SsimRowSum(int64_t first_row) {
  // A ring slot holds its kNumMaps rows back to back, as means_ does: one filter call
  // covers every map.
  const double* src[kTaps];
  for (int k = 0; k < kTaps; ++k)
    src[k] = &ring_[((first_row + k) % kTaps) * kNumMaps * out_padded_];
  Filter11(taps_, src, kNumMaps * out_padded_, means_.data());
  const double* mx = &means_[kX * out_padded_];
  const double* my = &means_[kY * out_padded_];
  const double* msq = &means_[kSquares * out_padded_];
  const double* mxy = &means_[kXY * out_padded_];
  double lane_sums[kBlock] = {};
  for (int64_t j = 0; j < out_padded_; j += kBlock) {
    double s[kBlock];
    for (int l = 0; l < kBlock; ++l) {
      // skimage's formula, with vx + vy = E[x^2 + y^2] - ux^2 - uy^2.
      const double ux = mx[j + l], uy = my[j + l];
      const double vx_plus_vy = msq[j + l] - ux * ux - uy * uy;
      const double vxy = mxy[j + l] - ux * uy;
      const double a1 = 2.0 * ux * uy + kC1;
      const double a2 = 2.0 * vxy + kC2;
      const double b1 = ux * ux + uy * uy + kC1;
      const double b2 = vx_plus_vy + kC2;
      s[l] = (a1 * a2) / (b1 * b2);
    }
    if (j + kBlock <= out_len_) {
      for (int l = 0; l < kBlock; ++l) lane_sums[l] += s[l];
    } else {
      for (int64_t l = 0; l < out_len_ - j; ++l) lane_sums[l] += s[l];
    }
  }
  double sum = 0.0;
  for (double v : lane_sums) sum += v;
  return sum;
}

// Sums over one frame pair that the video-level metrics are made of.
struct FrameSums {
  double sq_err = 0.0;        // sum (cand - ref)^2
  double sq_ref = 0.0;        // sum ref^2
  double max_abs = 0.0;       // max |cand - ref|; NaN if any difference is NaN
  double sq_temporal = 0.0;   // sum ((c[t+1] - c[t]) - (r[t+1] - r[t]))^2, frame t
  double sq_ref_delta = 0.0;  // sum (r[t+1] - r[t])^2, frame t
};

// Partial sums over kBlock lanes, so that the loop vectorizes; Reduce() adds them up.
struct LaneSums {
  double sq_err[kBlock] = {}, sq_ref[kBlock] = {}, max_abs[kBlock] = {};
  double sq_temporal[kBlock] = {}, sq_ref_delta[kBlock] = {};

  FrameSums Reduce() const {
    FrameSums s;
    for (int l = 0; l < kBlock; ++l) {
      s.sq_err += sq_err[l];
      s.sq_ref += sq_ref[l];
      s.max_abs = std::max(s.max_abs, max_abs[l]);
      s.sq_temporal += sq_temporal[l];
      s.sq_ref_delta += sq_ref_delta[l];
    }
    // A NaN difference makes sq_err NaN (a sum of squares is NaN only then); the
    // comparisons dropped it from max_abs.
    if (std::isnan(s.sq_err)) s.max_abs = kNaN;
    return s;
  }
};

// The sums of frame t (r0, c0; n values each). r1, c1: frame t + 1, or null for the last
// frame (no temporal sums). One pass, so each frame is read from memory once.
FrameSums ErrorSums(const float* r0, const float* c0, const float* r1, const float* c1, int64_t n) {
  LaneSums lanes;
  auto add_error = [&](int l, int64_t i) {
    const double d = static_cast<double>(c0[i]) - r0[i];
    const double a = std::fabs(d);
    lanes.sq_err[l] += d * d;
    lanes.sq_ref[l] += static_cast<double>(r0[i]) * r0[i];
    lanes.max_abs[l] = a > lanes.max_abs[l] ? a : lanes.max_abs[l];
  };
  auto add_temporal = [&](int l, int64_t i) {
    const double dr = static_cast<double>(r1[i]) - r0[i];
    const double dc = static_cast<double>(c1[i]) - c0[i];
    lanes.sq_temporal[l] += (dc - dr) * (dc - dr);
    lanes.sq_ref_delta[l] += dr * dr;
  };
  const int64_t blocks_end = n / kBlock * kBlock;
  if (r1 == nullptr) {
    for (int64_t i = 0; i < blocks_end; i += kBlock) {
      for (int l = 0; l < kBlock; ++l) add_error(l, i + l);
    }
    for (int64_t i = blocks_end; i < n; ++i) add_error(0, i);
  } else {
    for (int64_t i = 0; i < blocks_end; i += kBlock) {
      for (int l = 0; l < kBlock; ++l) add_error(l, i + l);
      for (int l = 0; l < kBlock; ++l) add_temporal(l, i + l);
    }
    for (int64_t i = blocks_end; i < n; ++i) {
      add_error(0, i);
      add_temporal(0, i);
    }
  }
  return lanes.Reduce();
}

double PsnrFromSqErr(double sq_err, int64_t n) {
  if (n == 0 || sq_err == 0.0) return kInf;
  return 10.0 * std::log10(1.0 / (sq_err / static_cast<double>(n)));
}

// Minimum that propagates NaN (std::min would drop it depending on the order).
double NanMin(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return std::min(a, b);
}

}  // namespace

Status CheckSameShape(const VideoView& ref, const VideoView& cand) {
  for (const VideoView* v : {&ref, &cand}) {
    const char* name = v == &ref ? "reference" : "candidate";
    if (v->frames < 0 || v->height < 0 || v->width < 0 || v->channels < 0) {
      return Status::InvalidInput(std::string(name) +
                                  " has a negative dimension: " + v->ShapeString());
    }
    if (v->data == nullptr && v->NumElements() > 0) {
      return Status::InvalidInput(std::string(name) + " " + v->ShapeString() + " has no data");
    }
  }
  if (ref.frames != cand.frames || ref.height != cand.height || ref.width != cand.width ||
      ref.channels != cand.channels) {
    return Status::InvalidInput("shape mismatch: reference " + ref.ShapeString() +
                                " vs candidate " + cand.ShapeString());
  }
  return Status::Ok();
}

double FramePsnr(const FrameView& ref, const FrameView& cand) {
  assert(ref.height == cand.height && ref.width == cand.width && ref.channels == cand.channels);
  const int64_t n = ref.height * ref.width * ref.channels;
  return PsnrFromSqErr(ErrorSums(ref.data, cand.data, nullptr, nullptr, n).sq_err, n);
}

double FrameSsim(const FrameView& ref, const FrameView& cand) {
  SsimEngine engine;
  return engine.Compute(ref, cand);
}

namespace {

// out->frames[t] and sums[t] for every frame t, on up to num_threads threads that take
// the next frame from a shared counter. Should a thread fail to start, the others do
// its share: the results do not depend on how many run.
void ScoreFrames(const VideoView& ref, const VideoView& cand, int num_threads, VideoMetrics* out,
                 std::vector<FrameSums>* sums) {
  const int64_t num_frames = ref.frames;
  const int64_t frame_len = ref.height * ref.width * ref.channels;
  std::atomic<int64_t> next_frame{0};
  auto work = [&]() {
    SsimEngine engine;
    for (int64_t t = next_frame++; t < num_frames; t = next_frame++) {
      const FrameView r = ref.Frame(t), c = cand.Frame(t);
      const bool last = t + 1 == num_frames;
      (*sums)[t] = ErrorSums(r.data, c.data, last ? nullptr : ref.Frame(t + 1).data,
                             last ? nullptr : cand.Frame(t + 1).data, frame_len);
      out->frames[t].psnr = PsnrFromSqErr((*sums)[t].sq_err, frame_len);
      out->frames[t].ssim = engine.Compute(r, c);
    }
  };
  const int64_t extra_threads = std::min<int64_t>(num_threads, num_frames) - 1;
  std::vector<std::thread> workers;
  for (int64_t i = 0; i < extra_threads; ++i) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: the running ones and this one share the frames
    }
  }
  work();
  for (std::thread& w : workers) w.join();
}

// The video-level values of `out` from the per-frame scores and sums, reduced in frame
// order.
void Summarize(const std::vector<FrameSums>& sums, VideoMetrics* out) {
  const size_t num_frames = sums.size();
  if (num_frames == 0) return;
  FrameSums total;
  bool nan = false;
  double ssim_sum = 0.0;
  out->min_psnr = kInf;
  out->min_ssim = kInf;
  for (size_t t = 0; t < num_frames; ++t) {
    total.sq_err += sums[t].sq_err;
    total.sq_ref += sums[t].sq_ref;
    total.sq_temporal += sums[t].sq_temporal;
    total.sq_ref_delta += sums[t].sq_ref_delta;
    nan |= std::isnan(sums[t].max_abs);
    total.max_abs = std::max(total.max_abs, sums[t].max_abs);
    out->min_psnr = NanMin(out->min_psnr, out->frames[t].psnr);
    out->min_ssim = NanMin(out->min_ssim, out->frames[t].ssim);
    ssim_sum += out->frames[t].ssim;
  }
  out->mean_ssim = ssim_sum / static_cast<double>(num_frames);
  out->max_abs = nan ? kNaN : total.max_abs;
  out->rel_l2 = SafeRatio(std::sqrt(total.sq_err), std::sqrt(total.sq_ref));
  out->temporal_rel_l2 = SafeRatio(std::sqrt(total.sq_temporal), std::sqrt(total.sq_ref_delta));
}

}  // namespace

VideoMetrics ComputeVideoMetrics(const VideoView& ref, const VideoView& cand,
                                 const FrameMetricsOptions& options) {
  assert(CheckSameShape(ref, cand).ok());
  VideoMetrics out;
  out.frames.resize(ref.frames);
  std::vector<FrameSums> sums(ref.frames);
  ScoreFrames(ref, cand, options.num_threads, &out, &sums);
  Summarize(sums, &out);
  return out;
}

double CosineSimilarity(const float* a, const float* b, int64_t n) {
  double dot = 0.0, na = 0.0, nb = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  if (std::isnan(dot) || std::isnan(na) || std::isnan(nb)) return kNaN;
  if (na == 0.0 && nb == 0.0) return 1.0;
  if (na == 0.0 || nb == 0.0) return 0.0;
  const double cos = dot / (std::sqrt(na) * std::sqrt(nb));
  return std::max(-1.0, std::min(1.0, cos));
}

}  // namespace framegate
