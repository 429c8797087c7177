// A bucket of gradients as a communication hook sees it; the same surface as
// PyTorch's dist.GradBucket so hooks translate both ways.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace commtune {

class GradBucket {
 public:
  GradBucket(std::size_t index, bool is_last, at::Tensor buffer, std::vector<std::int64_t> offsets,
             std::vector<std::int64_t> lengths, std::vector<std::vector<std::int64_t>> shapes,
             std::vector<at::Tensor> parameters, std::vector<std::size_t> parameter_indices,
             double gradient_scale = 1.0)
      : index_(index),
        is_last_(is_last),
        gradient_scale_(gradient_scale),
        buffer_(std::move(buffer)),
        offsets_(std::move(offsets)),
        lengths_(std::move(lengths)),
        shapes_(std::move(shapes)),
        parameters_(std::move(parameters)),
        parameter_indices_(std::move(parameter_indices)) {}

  std::size_t index() const { return index_; }
  // True for the bucket reduced last in each step (stateful hooks advance their iteration on it).
  bool is_last() const { return is_last_; }
  // The factor the reducer multiplied the gradients by while filling the
  // buffer (the outermost hook's gradient_copy_scale; 1 when none).
  double gradient_scale() const { return gradient_scale_; }
  // The flat 1-D gradients of this bucket, in the order of parameters().
  const at::Tensor& buffer() const { return buffer_; }
  // Replaces the buffer (compression wrappers hand their inner hook a cast copy).
  void set_buffer(at::Tensor buffer) { buffer_ = std::move(buffer); }
  // Per-parameter views of the current buffer, shaped like the parameters.
  std::vector<at::Tensor> gradients() const {
    std::vector<at::Tensor> out;
    out.reserve(offsets_.size());
    for (std::size_t i = 0; i < offsets_.size(); ++i)
      out.push_back(buffer_.narrow(0, offsets_[i], lengths_[i]).view(shapes_[i]));
    return out;
  }
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  // Each parameter's position in the model's parameter list: the same
  // whichever bucket holds it, so per-parameter memories survive DDP's
  // rebuild of its buckets.
  const std::vector<std::size_t>& parameter_indices() const { return parameter_indices_; }
  const std::vector<std::int64_t>& offsets() const { return offsets_; }
  const std::vector<std::int64_t>& lengths() const { return lengths_; }
  const std::vector<std::vector<std::int64_t>>& shapes() const { return shapes_; }

 private:
  std::size_t index_;
  bool is_last_;
  double gradient_scale_;
  at::Tensor buffer_;
  std::vector<std::int64_t> offsets_;
  std::vector<std::int64_t> lengths_;
  std::vector<std::vector<std::int64_t>> shapes_;
  std::vector<at::Tensor> parameters_;
  std::vector<std::size_t> parameter_indices_;
};

}  // namespace commtune
