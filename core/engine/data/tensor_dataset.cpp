// A user's own tensors: inputs and integer labels written in a line of
// PyTorch or NumPy, from
//   a .safetensors file   save_file({"x": x, "y": y}, "data.safetensors")
//   a torch.save file     torch.save({"x": x, "y": y}, "data.pt")
//   a folder of .npy      numpy.save("data/x.npy", x); numpy.save("data/y.npy", y)
// Float inputs are features or images; integer inputs are token ids. Labels
// [N] make a classification; labels [N, T] beside tokens [N, T], next-token
// prediction. The .npy and .safetensors headers are checked against the
// files' sizes, and the memory the tensors need against data.max_gib,
// before anything is read.
#include <ATen/ATen.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/engine/data/builtin_datasets.h"
#include "core/engine/data/file_reader.h"
#include "core/engine/data/tensor_files.h"
#include "core/tuner/io/input_file.h"
#include "core/engine/io/pickle_file.h"
#include "core/tuner/io/zip_directory.h"

namespace commtune {

namespace {

// More classes than any vocabulary (2^24): an output layer of as many rows is
// already 64 MiB per input feature, and a label of 2^40 would ask for 140 TB.
constexpr std::int64_t kMaxClasses = std::int64_t{1} << 24;

struct TensorFileOptions {
  std::string path;
  std::string inputs = "x";
  std::string targets = "y";
  std::int64_t limit = 0;
  std::int64_t classes = 0;
  double max_gib = 8;
  static Schema<TensorFileOptions> schema() {
    return Schema<TensorFileOptions>()
        .required_text("path", &TensorFileOptions::path,
                       "a .safetensors file, a torch.save file of a dict, or a folder holding <inputs>.npy and "
                       "<targets>.npy")
        .text("inputs", &TensorFileOptions::inputs, "the inputs' name (a key, or the .npy file's name)")
        .text("targets", &TensorFileOptions::targets, "the labels' name (a key, or the .npy file's name)")
        .integer("limit", &TensorFileOptions::limit, Range::at_least(0), "samples",
                 "use only the first N samples (0: all)")
        .integer("classes", &TensorFileOptions::classes, Range{0, static_cast<double>(kMaxClasses)}, "",
                 "classes (the vocabulary, for token sequences); 0: one more than the largest label or token")
        .real("max_gib", &TensorFileOptions::max_gib, Range::above(0), "GiB",
              "the most memory the dataset may take (per rank): larger files are refused before they are read");
  }
};

constexpr const char* kField = "data.path";

at::ScalarType scalar_type(ElementType type) {
  switch (type) {
    case ElementType::Bool: return at::kBool;
    case ElementType::U8: return at::kByte;
    case ElementType::I8: return at::kChar;
    case ElementType::I16: return at::kShort;
    case ElementType::I32: return at::kInt;
    case ElementType::I64: return at::kLong;
    case ElementType::F16: return at::kHalf;
    case ElementType::BF16: return at::kBFloat16;
    case ElementType::F32: return at::kFloat;
    case ElementType::F64: return at::kDouble;
  }
  return at::kFloat;
}

std::string shape_of(const at::Tensor& t) { return c10::str(t.sizes()); }

std::uint64_t file_size(const std::string& path, const std::string& field) {
  if (const auto problem = input_file_problem(path); !problem.empty()) throw ConfigError(field, problem);
  struct stat st {};
  ::stat(path.c_str(), &st);
  return static_cast<std::uint64_t>(st.st_size);
}

// The first `bytes` of a file (fewer when it is shorter).
std::string read_prefix(const std::string& path, std::uint64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string out(static_cast<std::size_t>(bytes), '\0');
  in.read(out.data(), static_cast<std::streamsize>(bytes));
  out.resize(static_cast<std::size_t>(in.gcount()));
  return out;
}

// The first `rows` rows of a stored tensor, read from its file into a new tensor.
at::Tensor read_rows(const std::string& path, const StoredTensor& stored, std::int64_t rows, DataBudget& budget) {
  auto shape = stored.shape;
  const auto row_bytes = shape[0] ? stored.bytes / static_cast<std::uint64_t>(shape[0]) : 0;
  shape[0] = rows;
  const auto bytes = row_bytes * static_cast<std::uint64_t>(rows);
  budget.take(bytes, path + (stored.name == path ? "" : " tensor '" + stored.name + "'"));
  auto out = at::empty(shape, at::TensorOptions().dtype(scalar_type(stored.type)));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ConfigError(kField, "cannot read " + path + ": " + std::strerror(errno));
  auto* into = static_cast<char*>(out.data_ptr());
  std::uint64_t done = 0;
  while (done < bytes) {
    const auto got = ::pread(fd, into + done, bytes - done, static_cast<off_t>(stored.offset + done));
    if (got <= 0) {
      ::close(fd);
      throw ConfigError(kField, "cannot read " + path + " to the end of its tensor '" + stored.name + "'");
    }
    done += static_cast<std::uint64_t>(got);
  }
  ::close(fd);
  return out;
}

std::int64_t rows_wanted(const StoredTensor& t, std::int64_t limit) {
  if (t.shape.empty()) throw ConfigError(kField, t.name + " is a scalar: the first dimension counts the samples");
  return limit > 0 ? std::min(limit, t.shape[0]) : t.shape[0];
}

struct Loaded {
  at::Tensor inputs, targets;
};

Loaded load_npy_folder(const TensorFileOptions& o, DataBudget& budget) {
  const auto stored = [&](const std::string& name) {
    const auto path = (std::filesystem::path(o.path) / (name + ".npy")).string();
    const auto size = file_size(path, kField);
    auto head = read_prefix(path, 12);
    const auto wanted = npy_header_bytes(head);
    if (wanted > head.size()) head = read_prefix(path, std::min(wanted, size));
    return std::pair{path, parse_npy_header(head, size, path, kField)};
  };
  const auto [x_path, x] = stored(o.inputs);
  const auto [y_path, y] = stored(o.targets);
  return {read_rows(x_path, x, rows_wanted(x, o.limit), budget), read_rows(y_path, y, rows_wanted(y, o.limit), budget)};
}

Loaded load_safetensors(const TensorFileOptions& o, std::uint64_t size, DataBudget& budget) {
  auto head = read_prefix(o.path, 8);
  head = read_prefix(o.path, std::min(safetensors_header_bytes(head), size));
  const auto tensors = parse_safetensors_header(head, size, o.path, kField);
  const auto find = [&](const std::string& name) {
    for (const auto& t : tensors)
      if (t.name == name) return t;
    std::string names;
    for (const auto& t : tensors) names += (names.empty() ? "" : ", ") + t.name;
    throw ConfigError(kField, o.path + " has no tensor '" + name + "' (it has: " + (names.empty() ? "none" : names) +
                                  "); name yours with data.inputs and data.targets");
  };
  const auto x = find(o.inputs), y = find(o.targets);
  return {read_rows(o.path, x, rows_wanted(x, o.limit), budget), read_rows(o.path, y, rows_wanted(y, o.limit), budget)};
}

Loaded load_torch_save(const TensorFileOptions& o, std::uint64_t size, DataBudget& budget) {
  std::optional<ZipDirectory> directory;
  try {
    directory = checked_pytorch_archive(o.path);
  } catch (const std::runtime_error& e) {
    throw ConfigError(kField, e.what());
  }
  // What its entries hold decompressed (torch.save stores tensors raw: about the file's size).
  budget.take(directory ? directory->uncompressed_bytes : size, o.path);
  c10::IValue value;
  try {
    value = read_pickle_file(o.path);
  } catch (const std::runtime_error& e) {
    throw ConfigError(kField, e.what());
  }
  if (!value.isGenericDict())
    throw ConfigError(kField, o.path + " holds a " + value.tagKind() + ", not a dict of tensors");
  const auto dict = value.toGenericDict();
  const auto find = [&](const std::string& name) {
    for (const auto& item : dict)
      if (item.key().isString() && item.key().toStringRef() == name) {
        if (!item.value().isTensor()) throw ConfigError(kField, o.path + "['" + name + "'] is not a tensor");
        auto t = item.value().toTensor();
        if (t.is_quantized())
          throw ConfigError(kField, o.path + "['" + name + "'] is a quantized tensor (" +
                                        std::string(c10::toString(t.scalar_type())) +
                                        "): save it dequantized (t.dequantize())");
        if (t.layout() != at::kStrided)
          throw ConfigError(kField, o.path + "['" + name + "'] is a " + c10::str(t.layout()) +
                                        " tensor: save it dense (t.to_dense())");
        if (t.dim() == 0) throw ConfigError(kField, o.path + "['" + name + "'] is a scalar, not samples");
        return o.limit > 0 && o.limit < t.size(0) ? t.narrow(0, 0, o.limit) : t;
      }
    throw ConfigError(kField, o.path + " has no key '" + name + "': name yours with data.inputs and data.targets");
  };
  return {find(o.inputs).contiguous(), find(o.targets).contiguous()};
}

std::unique_ptr<Dataset> make_tensor_dataset(const TensorFileOptions& o, const DataContext&) {
  DataBudget budget(o.max_gib);
  Loaded data;
  std::error_code ec;
  if (std::filesystem::is_directory(o.path, ec)) {
    data = load_npy_folder(o, budget);
  } else {
    const auto size = file_size(o.path, kField);
    const auto magic = read_prefix(o.path, 9);
    if (magic.rfind(std::string("\x93NUMPY", 6), 0) == 0)
      throw ConfigError(kField, o.path + " is one .npy file: put " + o.inputs + ".npy and " + o.targets +
                                    ".npy in a folder, and make data.path that folder");
    // A pickle (protocol 2 to 5) first: the legacy torch.save format (PyTorch
    // before 1.6) or a plain pickle. A .safetensors file begins with its
    // header's length, which may begin so too, and then its header's "{".
    const bool safetensors = magic.size() == 9 && magic[8] == '{';
    if (!safetensors && magic.size() >= 2 && magic[0] == '\x80' && magic[1] >= 2 && magic[1] <= 5)
      throw ConfigError(kField, o.path + " is a pickle (a legacy torch.save file, PyTorch's format before 1.6, or "
                                         "pickle.dump), which commtune does not read (unpickling runs code): save "
                                         "it with torch.save of PyTorch 1.6 or later, or as .safetensors");
    data = magic.rfind("PK\x03\x04", 0) == 0 ? load_torch_save(o, size, budget) : load_safetensors(o, size, budget);
  }
  auto& x = data.inputs;
  auto& y = data.targets;
  const auto names =
      o.path + ": inputs '" + o.inputs + "' " + shape_of(x) + " and labels '" + o.targets + "' " + shape_of(y);
  if (x.size(0) != y.size(0)) throw ConfigError(kField, names + " differ in their number of samples");
  if (x.size(0) == 0) throw ConfigError(kField, names + " hold no samples");
  if (x.numel() == 0) throw ConfigError(kField, names + ": the inputs hold no features (a dimension of size 0)");
  if (x.is_complex())
    throw ConfigError(kField, "inputs '" + o.inputs + "' are " + std::string(c10::toString(x.scalar_type())) +
                                  ": commtune reads real features or integer tokens");
  if (y.is_floating_point() || y.is_complex())
    throw ConfigError(kField, "labels '" + o.targets + "' are " + std::string(c10::toString(y.scalar_type())) +
                                  ": commtune trains with cross-entropy on integer class labels");
  const bool tokens = !x.is_floating_point();
  const bool sequences = tokens && y.dim() == 2 && x.sizes() == y.sizes();
  if (y.dim() != 1 && !sequences)
    throw ConfigError(kField, names + ": labels are one per sample [N], or one per token [N, T] beside token "
                                      "inputs [N, T]");
  y = y.to(at::kLong);
  const auto lowest = y.min().item<std::int64_t>();
  if (lowest < 0) throw ConfigError(kField, "labels '" + o.targets + "' include " + std::to_string(lowest) +
                                                ": classes are counted from 0");
  if (tokens) {
    x = x.to(at::kLong);
    if (const auto lowest_token = x.min().item<std::int64_t>(); lowest_token < 0)
      throw ConfigError(kField, "token inputs '" + o.inputs + "' include " + std::to_string(lowest_token));
  } else {
    x = x.to(at::kFloat).contiguous();
  }
  std::int64_t largest = y.max().item<std::int64_t>();
  if (sequences) largest = std::max(largest, x.max().item<std::int64_t>());
  if (largest >= kMaxClasses)
    throw ConfigError(kField, o.path + ": " + (sequences ? "token " : "label ") + std::to_string(largest) + " in '" +
                                  (sequences ? o.inputs + "' or '" : "") + o.targets + "' means more classes than " +
                                  std::to_string(kMaxClasses) + ", the most commtune takes: classes are counted from 0");
  const auto classes = o.classes > 0 ? o.classes : largest + 1;
  if (largest >= classes)
    throw ConfigError("data.classes", std::to_string(classes) + " classes, but the data holds " +
                                          (sequences ? "token " : "label ") + std::to_string(largest));
  if (!sequences && classes < 2) throw ConfigError(kField, "labels '" + o.targets + "' hold one class only");
  DataSpec spec{std::vector<std::int64_t>(x.sizes().begin() + 1, x.sizes().end()), tokens, classes,
                sequences ? Task::LanguageModel : Task::Classification};
  return std::make_unique<TensorDataset>(std::move(x), std::move(y), std::move(spec));
}

}  // namespace

void register_tensor_dataset(DatasetRegistry& registry) {
  registry.add<TensorFileOptions>(
      "tensors",
      "your own tensors: inputs and integer labels from a .safetensors file, a torch.save file of a dict, or a "
      "folder of .npy files (float inputs are features or images, integer inputs token ids)",
      make_tensor_dataset);
}

}  // namespace commtune
