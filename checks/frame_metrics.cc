#include "checks/frame_metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cmath>
#include <limits>
#include <sstream>
#include <system_error>
#include <thread>

#include "checks/frame_loops.h"

namespace framegate {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The SSIM filter's hot loops are compiled once per ISA level (FRAMEGATE_SIMD_CLONES).

// SSIM window: scipy.ndimage.gaussian_filter with sigma 1.5, truncate 3.5 (what skimage
// passes) has radius int(3.5 * 1.5 + 0.5) = 5, i.e. 11 taps.
constexpr double kSigma = 1.5;
constexpr int kRadius = 5;
constexpr int kTaps = 2 * kRadius + 1;
constexpr double kC1 = 0.01 * 0.01;  // (K1 * data_range)^2
constexpr double kC2 = 0.03 * 0.03;  // (K2 * data_range)^2
// The least motion the temporal metric is judged against, as a share of the reference's
// contrast (its standard deviation over every value) per frame-to-frame change: a healthy
// near-static clip (frames changing by 1.5% of their contrast) read its BF16 rounding noise
// as 0.3-0.46 of its motion, over the 0.282 bound; at 0.1, a slow clip (0.1 of its
// contrast) with a deep decoder still read 0.28-0.34 on 36-40 dB frames; docs/metrics.md.
constexpr double kStaticMotion = 0.25;

// Inner loops work on blocks of kBlock values held in local arrays, so that GCC
// vectorizes them even at -O2 (whose cost model accepts only loops without a scalar
// epilogue or alias checks). Row buffers are padded to a multiple of kBlock.
constexpr int64_t kBlock = 16;

// Rows and columns sampled per frame for the centre of each channel (see FillCentre).
constexpr int64_t kCentreRows = 16;
constexpr int64_t kCentreCols = 64;

// The filtered maps SSIM needs, in this order in every buffer below. SSIM reads the
// variances only as vx + vy, so x*x + y*y is one map.
enum Map { kX = 0, kY, kSquares, kXY, kNumMaps };

int64_t RoundUpToBlock(int64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

// scipy.ndimage._gaussian_kernel1d: exp(-x^2 / (2 sigma^2)) normalized to sum 1, x in
// [-radius, radius], computed in double, then rounded to float32. Exactly symmetric,
// which Filter11 relies on.
std::array<float, kTaps> GaussianTaps() {
  std::array<double, kTaps> taps{};
  double sum = 0.0;
  for (int k = 0; k < kTaps; ++k) {
    const double x = k - kRadius;
    taps[k] = std::exp(-0.5 / (kSigma * kSigma) * x * x);
    sum += taps[k];
  }
  std::array<float, kTaps> out{};
  for (int k = 0; k < kTaps; ++k) out[k] = static_cast<float>(taps[k] / sum);
  return out;
}

// out[j] = sum_k taps[k] * src[k][j] for j < n, n a multiple of kBlock: one 11-tap
// filter, horizontal (src[k] = row + k * channels) or vertical (src[k] = row k of the
// window). Symmetric taps are folded: 6 products, not 11.
FRAMEGATE_INLINE void Filter11(const float* taps, const float* const src[kTaps], int64_t n, float* out) {
  // Local copies, so that the compiler keeps the 11 pointers and 6 taps in registers.
  const float *s0 = src[0], *s1 = src[1], *s2 = src[2], *s3 = src[3], *s4 = src[4];
  const float *s5 = src[5], *s6 = src[6], *s7 = src[7], *s8 = src[8], *s9 = src[9];
  const float* s10 = src[10];
  const float t0 = taps[0], t1 = taps[1], t2 = taps[2], t3 = taps[3], t4 = taps[4];
  const float t5 = taps[5];
  for (int64_t j = 0; j < n; j += kBlock) {
    float acc[kBlock];  // local: no aliasing with src for the vectorizer to check
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

// The buffers of one SSIM computation, reused across frames (one per thread).
//
// The Gaussian filter is separable and the mean is taken over the valid region only
// (rows and columns [5, n - 5)), whose filter windows never reach past the border: so
// scipy's mode='reflect' never matters and the filter is computed on the valid region
// alone. A frame row is flat: width * channels values, channels interleaved, so a
// horizontal tap is a shift by `channels`: output value j of a row reads input values
// j .. j + 10 * channels. Per input row: the product rows (x, y, x*x + y*y, x*y), then
// the horizontal filter into a ring of kTaps rows; once the ring is full, the vertical
// filter gives the local means of one valid row, then SSIM.
//
// The filters run in float32 (twice the lanes of double). The variances are differences
// of nearly equal filtered moments, E[x^2] - E[x]^2, whose float32 rounding grows with
// the moments: so x and y are first centred, each channel minus a constant (FillCentre:
// the median of a sample of the frame, the same for the whole frame). Variances and covariance
// do not change under a constant shift; the means get the constant back, in double. The
// SSIM formula and the sums over the frame are in double.
struct SsimBuffers {
  int64_t channels = 0;
  int64_t row_len = 0;          // width * channels
  int64_t out_len = 0;          // (width - 2 * kRadius) * channels: the valid part of a row
  int64_t out_padded = 0;       // out_len rounded up to kBlock
  int64_t in_padded = 0;        // >= out_padded + 2 * kRadius * channels; a block multiple
  std::vector<float> centre;    // [2, in_padded]: x's and y's centre per value, 0 past row_len
  std::vector<float> products;  // [kNumMaps, in_padded], zero past row_len
  std::vector<float> ring;      // [kTaps, kNumMaps, out_padded], row r at slot r % kTaps
  std::vector<float> means;     // [kNumMaps, out_padded]: local means of one valid row

  void Resize(const FrameView& frame);
};

void SsimBuffers::Resize(const FrameView& frame) {
  const int64_t new_row_len = frame.width * frame.channels;
  if (new_row_len == row_len && frame.channels == channels) return;
  channels = frame.channels;
  row_len = new_row_len;
  out_len = (frame.width - 2 * kRadius) * frame.channels;
  out_padded = RoundUpToBlock(out_len);
  in_padded = std::max(out_padded + 2 * kRadius * channels, RoundUpToBlock(row_len));
  centre.assign(2 * in_padded, 0.0f);
  products.assign(kNumMaps * in_padded, 0.0f);
  ring.assign(kTaps * kNumMaps * out_padded, 0.0f);
  means.assign(kNumMaps * out_padded, 0.0f);
}

// centre[0, row_len) <- per value, the centre of its channel: the median of the finite
// values of a sparse grid (kCentreRows rows, up to 64 columns) over the frame, 0 when
// there are none. Any constant would be exact; one near the local means keeps float32's
// rounding small, and a median is not pulled away from them by a few outliers.
void FillCentre(const FrameView& frame, float* centre, int64_t row_len, std::vector<float>* samples) {
  const int64_t channels = frame.channels;
  const int64_t row_step = std::max<int64_t>(1, frame.height / kCentreRows);
  const int64_t col_step = std::max<int64_t>(1, frame.width / kCentreCols);
  for (int64_t c = 0; c < channels; ++c) {
    samples->clear();
    for (int64_t y = 0, rows = 0; y < frame.height && rows < kCentreRows; y += row_step, ++rows) {
      const float* row = frame.data + y * row_len;
      for (int64_t x = 0; x < frame.width; x += col_step) {
        const float v = row[x * channels + c];
        if (std::isfinite(v)) samples->push_back(v);
      }
    }
    float median = 0.0f;
    if (!samples->empty()) {
      const auto mid = samples->begin() + samples->size() / 2;
      std::nth_element(samples->begin(), mid, samples->end());
      median = *mid;
    }
    for (int64_t x = 0; x < frame.width; ++x) centre[x * channels + c] = median;
  }
}

// products <- the kNumMaps product rows of one centred row pair (row_len values each).
FRAMEGATE_INLINE void LoadProducts(SsimBuffers& b, const float* x, const float* y) {
  const int64_t in = b.in_padded, row_len = b.row_len;
  const float* cx = &b.centre[0];
  const float* cy = &b.centre[in];
  float* px = &b.products[kX * in];
  float* py = &b.products[kY * in];
  float* psq = &b.products[kSquares * in];
  float* pxy = &b.products[kXY * in];
  for (int64_t i = 0; i < row_len; i += kBlock) {
    float u[kBlock] = {}, v[kBlock] = {};
    if (i + kBlock <= row_len) {
      for (int l = 0; l < kBlock; ++l) u[l] = x[i + l] - cx[i + l];
      for (int l = 0; l < kBlock; ++l) v[l] = y[i + l] - cy[i + l];
    } else {
      for (int64_t l = 0; l < row_len - i; ++l) u[l] = x[i + l] - cx[i + l];
      for (int64_t l = 0; l < row_len - i; ++l) v[l] = y[i + l] - cy[i + l];
    }
    // The rows are padded to a block multiple past row_len: zeros go there.
    for (int l = 0; l < kBlock; ++l) px[i + l] = u[l];
    for (int l = 0; l < kBlock; ++l) py[i + l] = v[l];
    for (int l = 0; l < kBlock; ++l) psq[i + l] = u[l] * u[l] + v[l] * v[l];
    for (int l = 0; l < kBlock; ++l) pxy[i + l] = u[l] * v[l];
  }
}

// Ring row `row` <- the horizontal filter of products, every map.
FRAMEGATE_INLINE void FilterHorizontal(SsimBuffers& b, const float* taps, int64_t row) {
  float* out = &b.ring[(row % kTaps) * kNumMaps * b.out_padded];
  for (int m = 0; m < kNumMaps; ++m) {
    const float* in = &b.products[m * b.in_padded];
    const float* src[kTaps];
    for (int k = 0; k < kTaps; ++k) src[k] = in + k * b.channels;
    Filter11(taps, src, b.out_padded, out + m * b.out_padded);
  }
}

// means <- the vertical filter of ring rows first_row .. first_row + 10; returns the sum
// of SSIM over that valid row's out_len values. ccx, ccy: the centres of the valid row's
// values (centre + kRadius * channels).
FRAMEGATE_INLINE double SsimRowSum(SsimBuffers& b, const float* taps, int64_t first_row) {
  const int64_t out_padded = b.out_padded, out_len = b.out_len;
  // A ring slot holds its kNumMaps rows back to back, as means does: one filter call
  // covers every map.
  const float* src[kTaps];
  for (int k = 0; k < kTaps; ++k) src[k] = &b.ring[((first_row + k) % kTaps) * kNumMaps * out_padded];
  Filter11(taps, src, kNumMaps * out_padded, b.means.data());
  const float* mx = &b.means[kX * out_padded];
  const float* my = &b.means[kY * out_padded];
  const float* msq = &b.means[kSquares * out_padded];
  const float* mxy = &b.means[kXY * out_padded];
  const float* ccx = &b.centre[kRadius * b.channels];
  const float* ccy = &b.centre[b.in_padded + kRadius * b.channels];
  double lane_sums[kBlock] = {};
  for (int64_t j = 0; j < out_padded; j += kBlock) {
    double s[kBlock];
    for (int l = 0; l < kBlock; ++l) {
      // skimage's formula on the centred moments: with u = E[x - cx], v = E[y - cy],
      // vx + vy = E[(x - cx)^2 + (y - cy)^2] - u^2 - v^2 and vxy = E[(x - cx)(y - cy)] - uv;
      // the means are ux = u + cx, uy = v + cy.
      const double u = mx[j + l], v = my[j + l];
      const double vx_plus_vy = msq[j + l] - u * u - v * v;
      const double vxy = mxy[j + l] - u * v;
      const double ux = u + ccx[j + l], uy = v + ccy[j + l];
      const double a1 = 2.0 * ux * uy + kC1;
      const double a2 = 2.0 * vxy + kC2;
      const double b1 = ux * ux + uy * uy + kC1;
      const double b2 = vx_plus_vy + kC2;
      s[l] = (a1 * a2) / (b1 * b2);
    }
    if (j + kBlock <= out_len) {
      for (int l = 0; l < kBlock; ++l) lane_sums[l] += s[l];
    } else {
      for (int64_t l = 0; l < out_len - j; ++l) lane_sums[l] += s[l];
    }
  }
  double sum = 0.0;
  for (double v : lane_sums) sum += v;
  return sum;
}

// The sum of SSIM over the valid region of one frame pair (buffers sized and centred).
FRAMEGATE_SIMD_CLONES double SsimSum(SsimBuffers& b, const float* taps, const FrameView& ref,
                                     const FrameView& cand) {
  double sum = 0.0;
  for (int64_t row = 0; row < ref.height; ++row) {
    LoadProducts(b, ref.data + row * b.row_len, cand.data + row * b.row_len);
    FilterHorizontal(b, taps, row);
    if (row >= kTaps - 1) sum += SsimRowSum(b, taps, row - (kTaps - 1));
  }
  return sum;
}

// SSIM of one frame pair, reusing its buffers across frames (one per thread).
class SsimEngine {
 public:
  double Compute(const FrameView& ref, const FrameView& cand) {
    assert(ref.height == cand.height && ref.width == cand.width && ref.channels == cand.channels);
    if (ref.height < kTaps || ref.width < kTaps || ref.channels < 1) return kNaN;
    buffers_.Resize(ref);
    FillCentre(ref, &buffers_.centre[0], buffers_.row_len, &samples_);
    FillCentre(cand, &buffers_.centre[buffers_.in_padded], buffers_.row_len, &samples_);
    const double sum = SsimSum(buffers_, taps_.data(), ref, cand);
    const int64_t valid_rows = ref.height - 2 * kRadius;
    return sum / static_cast<double>(valid_rows * buffers_.out_len);
  }

 private:
  const std::array<float, kTaps> taps_ = GaussianTaps();
  SsimBuffers buffers_;
  std::vector<float> samples_;  // FillCentre's
};

// Cosine similarity from dot(a, b), ||a||^2 and ||b||^2 (CosineSimilarity's rules).
double CosineFromSums(double dot, double na, double nb) {
  // An Inf value makes a sum infinite (finite floats cannot: their squares fit a double),
  // and inf / inf would be NaN, which std::min would turn into a perfect 1.
  if (!std::isfinite(dot) || !std::isfinite(na) || !std::isfinite(nb)) return kNaN;
  if (na == 0.0 && nb == 0.0) return 1.0;
  if (na == 0.0 || nb == 0.0) return 0.0;
  const double cos = dot / (std::sqrt(na) * std::sqrt(nb));
  return std::max(-1.0, std::min(1.0, cos));
}

struct DotProducts {
  double dot = 0.0, na = 0.0, nb = 0.0;
};

double CosineFromSums(const DotProducts& d) { return CosineFromSums(d.dot, d.na, d.nb); }

// dot(a, b), ||a||^2 and ||b||^2 over n values, in double.
FRAMEGATE_SIMD_CLONES DotProducts DotSums(const float* a, const float* b, int64_t n) {
  double dot[kBlock] = {}, na[kBlock] = {}, nb[kBlock] = {};
  const int64_t blocks_end = n / kBlock * kBlock;
  for (int64_t i = 0; i < blocks_end; i += kBlock) {
    for (int l = 0; l < kBlock; ++l) {
      const double x = a[i + l], y = b[i + l];
      dot[l] += x * y;
      na[l] += x * x;
      nb[l] += y * y;
    }
  }
  DotProducts d;
  for (int64_t i = blocks_end; i < n; ++i) {
    const double x = a[i], y = b[i];
    d.dot += x * y;
    d.na += x * x;
    d.nb += y * y;
  }
  for (int l = 0; l < kBlock; ++l) {
    d.dot += dot[l];
    d.na += na[l];
    d.nb += nb[l];
  }
  return d;
}

// Sums over one frame pair that the video-level metrics are made of.
struct FrameSums {
  double sq_err = 0.0;        // sum (cand - ref)^2
  double sq_ref = 0.0;        // sum ref^2
  double sum_ref = 0.0;       // sum ref
  double max_abs = 0.0;       // max |cand - ref|; NaN if any difference is NaN
  double sq_temporal = 0.0;   // sum ((c[t+1] - c[t]) - (r[t+1] - r[t]))^2, frame t
  double sq_ref_delta = 0.0;  // sum (r[t+1] - r[t])^2, frame t
  double dot = 0.0;           // sum ref * cand
  double sq_cand = 0.0;       // sum cand^2
};

// Partial sums over kBlock lanes, so that the loop vectorizes; Reduce() adds them up.
struct LaneSums {
  double sq_err[kBlock] = {}, sq_ref[kBlock] = {}, sum_ref[kBlock] = {}, max_abs[kBlock] = {};
  double sq_temporal[kBlock] = {}, sq_ref_delta[kBlock] = {};
  double dot[kBlock] = {}, sq_cand[kBlock] = {};

  FrameSums Reduce() const {
    FrameSums s;
    for (int l = 0; l < kBlock; ++l) {
      s.sq_err += sq_err[l];
      s.sq_ref += sq_ref[l];
      s.sum_ref += sum_ref[l];
      s.dot += dot[l];
      s.sq_cand += sq_cand[l];
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
FRAMEGATE_SIMD_CLONES FrameSums ErrorSums(const float* r0, const float* c0, const float* r1, const float* c1,
                                          int64_t n) {
  LaneSums lanes;
  auto add_error = [&](int l, int64_t i) {
    const double d = static_cast<double>(c0[i]) - r0[i];
    const double a = std::fabs(d);
    lanes.sq_err[l] += d * d;
    lanes.sq_ref[l] += static_cast<double>(r0[i]) * r0[i];
    lanes.sum_ref[l] += r0[i];
    lanes.dot[l] += static_cast<double>(r0[i]) * c0[i];
    lanes.sq_cand[l] += static_cast<double>(c0[i]) * c0[i];
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

// An infinite sq_err means an Inf in one frame (the squared difference of two finite
// floats fits a double): the PSNR is not defined (NaN), not -inf.
double PsnrFromSqErr(double sq_err, int64_t n) {
  if (!std::isfinite(sq_err)) return kNaN;
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
      return Status::InvalidInput(std::string(name) + " has a negative dimension: " + v->ShapeString());
    }
    if (v->data == nullptr && v->NumElements() > 0) {
      return Status::InvalidInput(std::string(name) + " " + v->ShapeString() + " has no data");
    }
  }
  if (ref.frames != cand.frames || ref.height != cand.height || ref.width != cand.width ||
      ref.channels != cand.channels) {
    return Status::InvalidInput("shape mismatch: reference " + ref.ShapeString() + " vs candidate " +
                                cand.ShapeString());
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
  ForEachFrame(num_frames, num_threads, [&] {
    return [&, engine = SsimEngine()](int64_t t) mutable {
      const FrameView r = ref.Frame(t), c = cand.Frame(t);
      const bool last = t + 1 == num_frames;
      (*sums)[t] = ErrorSums(r.data, c.data, last ? nullptr : ref.Frame(t + 1).data,
                             last ? nullptr : cand.Frame(t + 1).data, frame_len);
      out->frames[t].psnr = PsnrFromSqErr((*sums)[t].sq_err, frame_len);
      out->frames[t].ssim = engine.Compute(r, c);
    };
  });
}

// The video-level values of `out` from the per-frame scores and sums, reduced in frame
// order.
void Summarize(const std::vector<FrameSums>& sums, int64_t frame_len, VideoMetrics* out) {
  const size_t num_frames = sums.size();
  out->cosine = CosineFromSums(0.0, 0.0, 0.0);  // no values: 1, as CosineSimilarity says
  if (num_frames == 0) return;
  FrameSums total;
  bool nan = false;
  double ssim_sum = 0.0;
  out->min_psnr = kInf;
  out->min_ssim = kInf;
  for (size_t t = 0; t < num_frames; ++t) {
    total.sq_err += sums[t].sq_err;
    total.sq_ref += sums[t].sq_ref;
    total.sum_ref += sums[t].sum_ref;
    total.sq_temporal += sums[t].sq_temporal;
    total.sq_ref_delta += sums[t].sq_ref_delta;
    total.dot += sums[t].dot;
    total.sq_cand += sums[t].sq_cand;
    nan |= std::isnan(sums[t].max_abs);
    total.max_abs = std::max(total.max_abs, sums[t].max_abs);
    out->min_psnr = NanMin(out->min_psnr, out->frames[t].psnr);
    out->min_ssim = NanMin(out->min_ssim, out->frames[t].ssim);
    ssim_sum += out->frames[t].ssim;
  }
  out->mean_ssim = ssim_sum / static_cast<double>(num_frames);
  out->max_abs = nan ? kNaN : total.max_abs;
  out->rel_l2 = SafeRatio(std::sqrt(total.sq_err), std::sqrt(total.sq_ref));
  // The motion judged against: the reference's own, or kStaticMotion of its contrast per
  // value when it moves less (a static camera: below it, the frames' own rounding noise
  // would read as lost motion).
  const double values = static_cast<double>(num_frames) * static_cast<double>(frame_len);
  const double mean = total.sum_ref / values;
  const double contrast_sq = std::max(0.0, total.sq_ref / values - mean * mean);
  const double delta_values = static_cast<double>(num_frames - 1) * static_cast<double>(frame_len);
  const double floor_sq = kStaticMotion * kStaticMotion * contrast_sq * delta_values;
  out->temporal_rel_l2 =
      SafeRatio(std::sqrt(total.sq_temporal), std::sqrt(std::max(total.sq_ref_delta, floor_sq)));
  out->cosine = CosineFromSums(total.dot, total.sq_ref, total.sq_cand);
}

}  // namespace

VideoMetrics ComputeVideoMetrics(const VideoView& ref, const VideoView& cand,
                                 const FrameMetricsOptions& options) {
  assert(CheckSameShape(ref, cand).ok());
  VideoMetrics out;
  out.frames.resize(ref.frames);
  out.ssim_measured = ref.height >= kTaps && ref.width >= kTaps;
  std::vector<FrameSums> sums(ref.frames);
  ScoreFrames(ref, cand, options.num_threads, &out, &sums);
  Summarize(sums, ref.height * ref.width * ref.channels, &out);
  return out;
}

double CosineSimilarity(const float* a, const float* b, int64_t n) {
  return CosineFromSums(DotSums(a, b, n));
}

}  // namespace framegate
