// RunSamples as the bytes a run stores when it ends (RunEnd::samples), and
// back. Little-endian, fixed widths, one layout:
//
//   "CTSP" u32 format | i32 world_size u8 serial_hook f64 link.bytes_per_s f64 link.slower f64 link.faster
//   u32 n  i64 steps[n] | f64[n] x 10: data forward backward pure_backward optimizer hook
//                                      hook_inline total wire_bytes uncompressed_bytes
//   ready, chain, work: u32 count, then count x (i32 bucket, f64[n]), buckets increasing
//   u32 count, then count x (u8 kind, i32 group size, i32 group stride, i32 bucket, f64[n] x 3)
//   u32 count, then count x (i32 bucket, f64 fp32 bytes), buckets increasing
//
// Every count is checked against the bytes left before anything is
// allocated for it, and the encoding is canonical: what decodes encodes to
// the same bytes (tests/fuzz/fuzz_run_samples.cpp holds it to that).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/tuner/netmodel/run_samples.h"

namespace commtune {

namespace {

constexpr char kMagic[4] = {'C', 'T', 'S', 'P'};

void put(std::string& out, std::uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
}
void put_f64(std::string& out, double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put(out, bits, 8);
}
void put_series(std::string& out, const std::vector<double>& v) {
  for (const double x : v) put_f64(out, x);
}
void put_buckets(std::string& out, const std::map<std::int32_t, std::vector<double>>& series) {
  put(out, series.size(), 4);
  for (const auto& [bucket, values] : series) {
    put(out, static_cast<std::uint32_t>(bucket), 4);
    put_series(out, values);
  }
}

// Reads from the front of the bytes; any read past their end fails the whole decode.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool ok() const { return ok_; }
  bool at_end() const { return ok_ && at_ == bytes_.size(); }
  std::size_t left() const { return bytes_.size() - at_; }

  std::uint64_t get(int bytes) {
    if (!ok_ || left() < static_cast<std::size_t>(bytes)) {
      ok_ = false;
      return 0;
    }
    std::uint64_t bits = 0;
    for (int i = 0; i < bytes; ++i) bits |= std::uint64_t{static_cast<unsigned char>(bytes_[at_++])} << (8 * i);
    return bits;
  }
  std::int32_t i32() { return static_cast<std::int32_t>(static_cast<std::uint32_t>(get(4))); }
  double f64() {
    const auto bits = get(8);
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  // A count of items of `item_bytes` each, refused when they cannot all be there.
  std::size_t count(std::size_t item_bytes) {
    const auto n = static_cast<std::size_t>(get(4));
    if (ok_ && item_bytes > 0 && n > left() / item_bytes) ok_ = false;
    return ok_ ? n : 0;
  }
  std::vector<double> series(std::size_t n) {
    std::vector<double> v;
    if (!ok_ || n > left() / 8) {
      ok_ = false;
      return v;
    }
    v.reserve(n);
    for (std::size_t i = 0; i < n; ++i) v.push_back(f64());
    return v;
  }
  // Series by bucket, buckets strictly increasing (as a map writes them).
  std::map<std::int32_t, std::vector<double>> buckets(std::size_t n) {
    std::map<std::int32_t, std::vector<double>> out;
    const auto count = this->count(4 + 8 * n);
    for (std::size_t k = 0; k < count && ok_; ++k) {
      const auto bucket = i32();
      if (!out.empty() && bucket <= out.rbegin()->first) ok_ = false;
      out.emplace_hint(out.end(), bucket, series(n));
    }
    return out;
  }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

using Series = std::vector<double> RunSamples::*;
constexpr Series kSeries[] = {&RunSamples::data,        &RunSamples::forward,
                              &RunSamples::backward,    &RunSamples::pure_backward,
                              &RunSamples::optimizer,   &RunSamples::hook,
                              &RunSamples::hook_inline, &RunSamples::total,
                              &RunSamples::wire_bytes,  &RunSamples::uncompressed_bytes};
using Buckets = std::map<std::int32_t, std::vector<double>> RunSamples::*;
constexpr Buckets kBuckets[] = {&RunSamples::ready, &RunSamples::chain, &RunSamples::work};

}  // namespace

std::string RunSamples::encode() const {
  std::string out(kMagic, sizeof kMagic);
  put(out, kStoredFormat, 4);
  put(out, static_cast<std::uint32_t>(world_size), 4);
  put(out, serial_hook ? 1 : 0, 1);
  put_f64(out, link.bytes_per_s);
  put_f64(out, link.slower);
  put_f64(out, link.faster);
  put(out, steps.size(), 4);
  for (const auto step : steps) put(out, static_cast<std::uint64_t>(step), 8);
  for (const auto field : kSeries) put_series(out, this->*field);
  for (const auto field : kBuckets) put_buckets(out, this->*field);
  put(out, collectives.size(), 4);
  for (const auto& c : collectives) {
    put(out, static_cast<std::uint64_t>(c.kind), 1);
    put(out, static_cast<std::uint32_t>(c.group.size), 4);
    put(out, static_cast<std::uint32_t>(c.group.stride), 4);
    put(out, static_cast<std::uint32_t>(c.bucket), 4);
    for (const auto* v : {&c.bytes, &c.calls, &c.seconds}) put_series(out, *v);
  }
  put(out, bucket_fp32_bytes.size(), 4);
  for (const auto& [bucket, bytes] : bucket_fp32_bytes) {
    put(out, static_cast<std::uint32_t>(bucket), 4);
    put_f64(out, bytes);
  }
  return out;
}

std::optional<RunSamples> RunSamples::decode(std::string_view bytes, std::int64_t run_id, std::int64_t world_size) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  Reader in(bytes.substr(sizeof kMagic));
  if (in.get(4) != kStoredFormat) return std::nullopt;  // another layout, or profiles derived otherwise
  RunSamples s;
  s.run_id = run_id;
  s.world_size = in.i32();
  const auto serial = in.get(1);
  s.serial_hook = serial == 1;
  s.link.bytes_per_s = in.f64();
  s.link.slower = in.f64();
  s.link.faster = in.f64();
  // What from_store never writes, refused here: no rank or more than it
  // takes, other ranks than the run had, fewer than two steady steps (it profiles runs of four steps or
  // more), a link that is no bandwidth.
  if (!in.ok() || serial > 1 || s.world_size < 1 || s.world_size > (1 << 20) || s.world_size != world_size ||
      !(std::isfinite(s.link.bytes_per_s) && s.link.bytes_per_s >= 0) ||
      !(std::isfinite(s.link.slower) && s.link.slower >= 1) || !(std::isfinite(s.link.faster) && s.link.faster >= 1))
    return std::nullopt;
  const auto n = in.count(8);
  if (n < 2) return std::nullopt;
  s.steps.reserve(n);
  for (std::size_t i = 0; i < n && in.ok(); ++i) {
    s.steps.push_back(static_cast<std::int64_t>(in.get(8)));
    if (i > 0 && s.steps[i] <= s.steps[i - 1]) return std::nullopt;
  }
  for (const auto field : kSeries) s.*field = in.series(n);
  for (const auto field : kBuckets) s.*field = in.buckets(n);
  const auto collectives = in.count(1 + 12 + 3 * 8 * n);
  for (std::size_t k = 0; k < collectives && in.ok(); ++k) {
    CollectiveSeries c;
    const auto kind = in.get(1);
    if (kind > static_cast<std::uint64_t>(net::Collective::PushPull)) return std::nullopt;  // the last kind
    c.kind = static_cast<net::Collective>(kind);
    c.group.size = in.i32();
    c.group.stride = in.i32();
    if (c.group.size < 0 || c.group.size > (1 << 20) || c.group.stride < 1 || c.group.stride > (1 << 20))
      return std::nullopt;  // no group of ranks a run can have
    c.bucket = in.i32();
    for (auto* v : {&c.bytes, &c.calls, &c.seconds}) *v = in.series(n);
    s.collectives.push_back(std::move(c));
  }
  const auto layout = in.count(12);
  for (std::size_t k = 0; k < layout && in.ok(); ++k) {
    const auto bucket = in.i32();
    if (!s.bucket_fp32_bytes.empty() && bucket <= s.bucket_fp32_bytes.rbegin()->first) return std::nullopt;
    s.bucket_fp32_bytes.emplace_hint(s.bucket_fp32_bytes.end(), bucket, in.f64());
  }
  if (!in.at_end()) return std::nullopt;
  return s;
}

}  // namespace commtune
