#include "core/engine/data/tensor_files.h"

#include <cctype>
#include <limits>
#include <optional>

#include "db/json_text.h"
#include "core/tuner/schema/param_schema.h"

namespace commtune {

namespace {

struct TypeName {
  ElementType type;
  const char* numpy;        // numpy's dtype name
  const char* npy;          // an .npy descr without its byte-order mark
  const char* safetensors;  // safetensors' dtype
  std::size_t bytes;
};

constexpr TypeName kTypes[] = {
    {ElementType::Bool, "bool", "b1", "BOOL", 1},  {ElementType::U8, "uint8", "u1", "U8", 1},
    {ElementType::I8, "int8", "i1", "I8", 1},      {ElementType::I16, "int16", "i2", "I16", 2},
    {ElementType::I32, "int32", "i4", "I32", 4},   {ElementType::I64, "int64", "i8", "I64", 8},
    {ElementType::F16, "float16", "f2", "F16", 2}, {ElementType::BF16, "bfloat16", "", "BF16", 2},
    {ElementType::F32, "float32", "f4", "F32", 4}, {ElementType::F64, "float64", "f8", "F64", 8},
};

const TypeName& type_name(ElementType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  return kTypes[0];
}

constexpr const char* kSupported = "bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32 or float64";

std::uint64_t little_endian(std::string_view bytes, std::size_t at, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value |= std::uint64_t(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

// Fills tensor.bytes from its type and shape, refusing a product beyond any
// file's size (2^62 bytes; checked factor by factor: nothing overflows).
void size_from_shape(StoredTensor& tensor, const std::string& where, const std::string& field) {
  constexpr std::uint64_t kLargest = std::uint64_t{1} << 62;
  const auto item = element_bytes(tensor.type);
  std::uint64_t count = 1;
  for (const auto d : tensor.shape) {
    if (d < 0) throw ConfigError(field, where + ": shape " + tensor.shape_text() + " has a negative dimension");
    const auto size = static_cast<std::uint64_t>(d);
    if (size != 0 && count > kLargest / item / size)
      throw ConfigError(field, where + ": shape " + tensor.shape_text() + " is larger than any file");
    count *= size;
  }
  tensor.bytes = count * item;
}

// The Python dict literal of an .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class NpyDict {
 public:
  NpyDict(std::string_view text, std::string where, std::string field)
      : text_(text), where_(std::move(where)), field_(std::move(field)) {}

  void parse(std::string& descr, bool& fortran, std::vector<std::int64_t>& shape) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    expect('{');
    while (!peek('}')) {
      const auto key = string();
      expect(':');
      if (key == "descr" && !seen_descr) {
        if (peek('[')) fail("holds a structured dtype (fields): save one plain array per file");
        descr = string();
        seen_descr = true;
      } else if (key == "fortran_order" && !seen_fortran) {
        fortran = boolean();
        seen_fortran = true;
      } else if (key == "shape" && !seen_shape) {
        shape = tuple();
        seen_shape = true;
      } else {
        fail("has an unexpected or repeated header key '" + key + "'");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    if (!seen_descr || !seen_fortran || !seen_shape) fail("lacks descr, fortran_order or shape in its header");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw ConfigError(field_, where_ + " " + what); }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool peek(char c) {
    skip_space();
    return at_ < text_.size() && text_[at_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("has a malformed header (expected '") + c + "')");
    ++at_;
  }
  std::string string() {
    skip_space();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) fail("has a malformed header (a key or text)");
    const char quote = text_[at_++];
    const auto end = text_.find(quote, at_);
    if (end == std::string_view::npos || end - at_ > 64) fail("has a malformed header (unterminated text)");
    std::string out(text_.substr(at_, end - at_));
    at_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
      if (text_.substr(at_, word.size()) == word) {
        at_ += word.size();
        return value;
      }
    fail("has a malformed header (fortran_order is not True or False)");
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> out;
    expect('(');
    while (!peek(')')) {
      skip_space();
      std::uint64_t value = 0;
      std::size_t digits = 0;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
        if (++digits > 18) fail("has a dimension too large to be a file's");
        value = value * 10 + static_cast<std::uint64_t>(text_[at_++] - '0');
      }
      if (digits == 0) fail("has a malformed header (a shape that is not a tuple of integers)");
      if (out.size() == 32) fail("has more than 32 dimensions");
      out.push_back(static_cast<std::int64_t>(value));
      if (!peek(')')) expect(',');
    }
    expect(')');
    return out;
  }

  std::string_view text_;
  std::size_t at_ = 0;
  std::string where_, field_;
};

std::optional<ElementType> npy_type(const std::string& descr) {
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '=')) return std::nullopt;
  for (const auto& t : kTypes)
    if (*t.npy && descr.substr(1) == t.npy) return t.type;
  return std::nullopt;
}

constexpr std::string_view kNpyMagic("\x93NUMPY", 6);

}  // namespace

std::size_t element_bytes(ElementType type) { return type_name(type).bytes; }
const char* element_name(ElementType type) { return type_name(type).numpy; }
bool is_floating(ElementType type) {
  return type == ElementType::F16 || type == ElementType::BF16 || type == ElementType::F32 || type == ElementType::F64;
}

std::string StoredTensor::shape_text() const {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::uint64_t npy_header_bytes(std::string_view prefix) {
  if (prefix.size() < 12) return 0;
  if (prefix.substr(0, 6) != kNpyMagic) return prefix.size();  // the parser says what it is not
  return prefix[6] == 1 ? 10 + little_endian(prefix, 8, 2) : 12 + little_endian(prefix, 8, 4);
}

StoredTensor parse_npy_header(std::string_view head, std::uint64_t file_size, const std::string& file,
                              const std::string& field) {
  if (head.size() < 10 || head.substr(0, 6) != kNpyMagic)
    throw ConfigError(field, file + " is not an .npy file (numpy.save writes them)");
  const int major = head[6];
  if (major < 1 || major > 3 || head[7] != 0)
    throw ConfigError(field, file + " is an .npy file of a format version this reader does not know (" +
                                 std::to_string(major) + "." + std::to_string(int(head[7])) + ")");
  const std::size_t prefix = major == 1 ? 10 : 12;
  if (head.size() < prefix) throw ConfigError(field, file + " is truncated in its header");
  const auto header_bytes = little_endian(head, 8, prefix - 8);
  if (header_bytes > kMaxTensorHeaderBytes || prefix + header_bytes > file_size || prefix + header_bytes > head.size())
    throw ConfigError(field, file + " has a header of " + std::to_string(header_bytes) +
                                 " bytes, more than the file holds after its start");
  std::string descr;
  bool fortran = false;
  StoredTensor tensor;
  tensor.name = file;
  NpyDict(head.substr(prefix, header_bytes), file, field).parse(descr, fortran, tensor.shape);
  if (descr.size() >= 2 && descr[0] == '>')
    throw ConfigError(field, file + " holds big-endian data (" + descr + "): save it little-endian");
  const auto type = npy_type(descr);
  if (!type)
    throw ConfigError(field, file + " holds dtype '" + descr + "'; commtune reads " + kSupported);
  tensor.type = *type;
  if (fortran && tensor.shape.size() > 1)
    throw ConfigError(field, file + " is in Fortran (column-major) order: save numpy.ascontiguousarray(x)");
  tensor.offset = prefix + header_bytes;
  const auto available = file_size - tensor.offset;
  size_from_shape(tensor, file, field);
  if (tensor.bytes != available)
    throw ConfigError(field, file + " holds " + std::to_string(available) + " bytes after its header; its shape " +
                                 tensor.shape_text() + " of " + element_name(tensor.type) + " needs " +
                                 std::to_string(tensor.bytes));
  return tensor;
}

std::uint64_t safetensors_header_bytes(std::string_view prefix) {
  if (prefix.size() < 8) return 0;
  const auto n = little_endian(prefix, 0, 8);
  return n > kMaxTensorHeaderBytes ? 8 : 8 + n;  // too long: the parser refuses it from the first 8
}

std::vector<StoredTensor> parse_safetensors_header(std::string_view head, std::uint64_t file_size,
                                                   const std::string& file, const std::string& field) {
  if (head.size() < 8 || file_size < 8) throw ConfigError(field, file + " is not a .safetensors file (too short)");
  const auto header_bytes = little_endian(head, 0, 8);
  if (header_bytes > kMaxTensorHeaderBytes || header_bytes > file_size - 8 || header_bytes > head.size() - 8)
    throw ConfigError(field, file + " is not a .safetensors file (its header length " + std::to_string(header_bytes) +
                                 " exceeds the file)");
  const auto text = head.substr(8, header_bytes);
  if (json_nesting_depth(text) > 4) throw ConfigError(field, file + " has a header nested deeper than safetensors'");
  const auto parsed = parse_json_text(text);
  if (!parsed.problem.empty())
    throw ConfigError(field, file + " is not a .safetensors file (its header is not JSON: " + parsed.problem + ")");
  const auto& json = parsed.json;
  if (!json.is_object())
    throw ConfigError(field, file + " is not a .safetensors file (its header is not a JSON object)");
  const std::uint64_t data_start = 8 + header_bytes, data_bytes = file_size - data_start;
  std::vector<StoredTensor> out;
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") continue;
    const auto where = file + " tensor '" + name + "'";
    const auto bad = [&](const std::string& what) { return ConfigError(field, where + " " + what); };
    if (!entry.is_object()) throw bad("is not described by an object");
    const auto dtype = entry.find("dtype");
    const auto shape = entry.find("shape");
    const auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || shape == entry.end() || offsets == entry.end() || !dtype->is_string() ||
        !shape->is_array() || !offsets->is_array() || offsets->size() != 2)
      throw bad("lacks dtype, shape or data_offsets [begin, end]");
    StoredTensor tensor;
    tensor.name = name;
    bool known = false;
    for (const auto& t : kTypes)
      if (*dtype == t.safetensors) {
        tensor.type = t.type;
        known = true;
      }
    if (!known) throw bad("has dtype " + dtype->get<std::string>() + "; commtune reads " + kSupported);
    if (shape->size() > 32) throw bad("has more than 32 dimensions");
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > std::uint64_t{1} << 62)
        throw bad("has a shape that is not a list of sizes");
      tensor.shape.push_back(d.get<std::int64_t>());
    }
    for (const auto& o : *offsets)
      if (!o.is_number_unsigned()) throw bad("has data_offsets that are not two byte offsets");
    const auto begin = (*offsets)[0].get<std::uint64_t>(), end = (*offsets)[1].get<std::uint64_t>();
    if (begin > end || end > data_bytes)
      throw bad("lies outside the file (bytes " + std::to_string(begin) + " to " + std::to_string(end) + " of " +
                std::to_string(data_bytes) + ")");
    size_from_shape(tensor, where, field);
    if (tensor.bytes != end - begin)
      throw bad("has " + std::to_string(end - begin) + " bytes; its shape " + tensor.shape_text() + " of " +
                element_name(tensor.type) + " needs " + std::to_string(tensor.bytes));
    tensor.offset = data_start + begin;
    out.push_back(std::move(tensor));
  }
  return out;
}

}  // namespace commtune
