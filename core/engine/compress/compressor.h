// BytePS-style gradient compressors for one bucket: a compressor turns a
// float32 vector into a packed payload and adds a payload's decoded values
// into a vector. Error feedback and Nesterov momentum are decorators around
// any compressor ("momentum(ef(topk))" is a composition). One instance per
// bucket holds that bucket's memories. docs/compressors.md has the formats.
#pragma once

#include <functional>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tuner/schema/param_schema.h"
#include "kernels/compress.h"

namespace commtune {

// The hook's parameters, under BytePS's names.
struct CompressorOptions {
  std::string byteps_compressor_type = "topk";  // onebit, topk, randomk, dithering
  double byteps_compressor_k = 0.01;  // topk/randomk: elements (k >= 1) or a fraction (k < 1); dithering: levels
  bool byteps_compressor_onebit_scaling = true;
  bool byteps_compressor_randomk_rescale = false;
  std::string byteps_ef_type = "none";        // vanilla
  std::string byteps_momentum_type = "none";  // nesterov
  double byteps_momentum_mu = 0.9;
  std::int64_t byteps_seed = 0;
  // server: BytePS's push, server sum and recompression, pull; allgather:
  // every rank decodes every rank's payload (no server stage, not BytePS).
  std::string byteps_aggregation = "server";
  std::int64_t byteps_partition_bytes = 4096000;
  std::int64_t byteps_dithering_partition = 0;  // 0 linear, 1 natural
  std::int64_t byteps_dithering_normalize = 0;  // 0 max, 1 l2
  std::int64_t byteps_min_compress_bytes = 65536;
  // Two-level compression: ranks r with equal r / ranks_per_node form a node
  // that sums in fp16 first; only node leaders exchange compressed payloads.
  // 0: one level, every rank exchanges payloads.
  std::int64_t ranks_per_node = 0;
  // Where a bucket is compressed and decoded: auto (on its device: a GPU
  // bucket on the GPU), host (copied to the host first), device.
  std::string byteps_compress_on = "auto";
  static Schema<CompressorOptions> schema();
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  // The payload's size for n elements: exact when fixed_size(), else a bound.
  virtual std::size_t max_payload_bytes(std::int64_t n) const = 0;
  virtual bool fixed_size() const { return true; }
  // Packs x[0..n) into `payload` (max_payload_bytes long, 4-byte aligned,
  // not cleared: write every byte you use); returns the bytes used.
  // May change x (decorators fold their memories into it).
  virtual std::size_t compress(float* x, std::int64_t n, std::uint8_t* payload) = 0;
  // out[0..n) += weight * decode(payload). The hook gathers payloads back
  // to back, so a payload is 4-byte aligned when its size is a multiple of 4.
  virtual void decompress_add(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                              float* out) const = 0;
  // out[0..n) = weight * decode(payload): clears, then adds, unless a
  // compressor that writes every element anyway does it in one pass.
  virtual void decompress(const std::uint8_t* payload, std::size_t bytes, std::int64_t n, float weight,
                          float* out) const;
  // The learning rate of the step about to be compressed (error feedback
  // rescales its memory by the previous one over this one).
  virtual void set_learning_rate(double /*lr*/) {}
  // What a decorator reports for the last compress (error norm, ...).
  virtual void report(std::vector<std::pair<std::string, double>>& /*stats*/) const {}
  // Memories and generator states, appended as raw bytes, for checkpoints;
  // load reads them back from `pos` on.
  virtual void save(std::vector<std::uint8_t>& /*out*/) const {}
  virtual void load(const std::vector<std::uint8_t>& /*in*/, std::size_t& /*pos*/) {}
};

// Compressors by name (byteps_compressor_type): the built-ins and those that
// plugins add. `make(options, n, seed)` builds one for a bucket of n
// elements; seed already separates ranks and buckets. Decorators (error
// feedback, momentum) wrap whatever it returns.
class CompressorRegistry {
 public:
  using Make = std::function<std::unique_ptr<Compressor>(const CompressorOptions&, std::int64_t n, std::uint64_t seed)>;
  struct Entry {
    std::string name, doc;
    Make make;
  };
  // Throws std::logic_error for a name taken.
  void add(std::string name, std::string doc, Make make);
  const Entry* find(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// The process-wide registry, with the built-ins (onebit, topk, randomk,
// dithering) registered on first use.
CompressorRegistry& compressor_registry();

// The composition the options describe, for a bucket of n elements; `stream`
// separates random generators (rank and bucket).
std::unique_ptr<Compressor> make_compressor(const CompressorOptions& options, std::int64_t n, std::uint64_t stream);
// Throws ConfigError for a composition that cannot work (an unknown type,
// rescaled randomk under error feedback).
void check_composition(const CompressorOptions& options);
// The generator seed of a bucket's compressor: the options' seed and `stream`.
std::uint64_t compressor_seed(const CompressorOptions& options, std::uint64_t stream);
// randomk's generator: with byteps_seed set, BytePS's shared state {seed,
// seed} (the same draws on every rank and the server); without, a stream of
// this `stream`'s own.
kernels::Xorshift128p randomk_generator(const CompressorOptions& options, std::uint64_t stream);

// k for n elements: a count (k >= 1) or a fraction of n (k < 1) computed as
// BytePS does (in float, of the bytes padded to 128), in [1, n].
std::int64_t resolve_k(double k, std::int64_t n);

}  // namespace commtune
