// The MNIST and CIFAR-10 readers on small files written in those formats.
#include <gtest/gtest.h>

#include "core/engine/data/file_reader.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/engine/catalog.h"

namespace fs = std::filesystem;

namespace {

class DataFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("commtune-data-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void put_be32(std::string& s, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
  }
  static std::string idx(std::uint32_t rank, const std::vector<std::uint32_t>& sizes, const std::string& body) {
    std::string s;
    put_be32(s, 0x800 | rank);
    for (auto n : sizes) put_be32(s, n);
    return s + body;
  }
  void write(const std::string& name, const std::string& bytes, bool gzip = false) {
    const auto path = (dir_ / name).string();
    if (!gzip) {
      std::ofstream(path, std::ios::binary) << bytes;
      return;
    }
    gzFile f = gzopen((path + ".gz").c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  }
  std::unique_ptr<commtune::Dataset> load(const nlohmann::json& section) {
    auto& registry = commtune::catalog().datasets;
    return registry.create(registry.normalize(section), commtune::DataContext{0});
  }

  fs::path dir_;
};

TEST_F(DataFiles, ReadsMnistIdxPlainAndGzipped) {
  const int n = 5;
  std::string pixels(n * 28 * 28, '\0'), labels;
  for (int i = 0; i < n; ++i) {
    pixels[i * 784 + 7] = static_cast<char>(255);
    labels.push_back(static_cast<char>(i * 2));
  }
  write("train-images-idx3-ubyte", idx(3, {n, 28, 28}, pixels), /*gzip=*/true);
  write("train-labels-idx1-ubyte", idx(1, {n}, labels));
  auto data = load({{"name", "mnist"}, {"path", dir_.string()}, {"normalize", false}});
  EXPECT_EQ(data->size(), n);
  EXPECT_EQ(data->spec().input_shape, (std::vector<std::int64_t>{1, 28, 28}));
  const auto batch = data->gather({3, 4});
  EXPECT_EQ(batch.target[1].item<std::int64_t>(), 8);
  EXPECT_EQ(batch.input[0][0][0][7].item<float>(), 1.0f);
  EXPECT_EQ(batch.input.sum().item<float>(), 2.0f);

  auto normalized = load({{"name", "mnist"}, {"path", dir_.string()}, {"limit", 2}});
  EXPECT_EQ(normalized->size(), 2);
  EXPECT_NEAR(normalized->gather({0}).input[0][0][0][0].item<float>(), -0.1307 / 0.3081, 1e-6);
}

TEST_F(DataFiles, RejectsBrokenMnistFiles) {
  write("train-images-idx3-ubyte", idx(3, {2, 28, 28}, std::string(100, '\0')));  // truncated
  write("train-labels-idx1-ubyte", idx(1, {2}, "\x01\x02"));
  try {
    load({{"name", "mnist"}, {"path", dir_.string()}});
    FAIL() << "a truncated file must be refused";
  } catch (const commtune::ConfigError& e) {
    EXPECT_EQ(e.field(), "data.path");
    EXPECT_NE(std::string(e.what()).find("need more bytes than the file's 100"), std::string::npos) << e.what();
  }
  try {
    load({{"name", "mnist"}, {"path", (dir_ / "nowhere").string()}});
    FAIL() << "a missing folder must be refused";
  } catch (const commtune::ConfigError& e) {
    EXPECT_EQ(e.field(), "data.path");
  }
}

TEST(DataHeaders, AnIdxHeaderMustDescribeExactlyItsBytes) {
  const auto header = [](std::vector<std::uint32_t> dims, std::size_t data_bytes) {
    std::vector<unsigned char> bytes;
    const auto put = [&](std::uint32_t v) {
      for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<unsigned char>(v >> shift));
    };
    put(0x800u | static_cast<std::uint32_t>(dims.size()));
    for (const auto d : dims) put(d);
    bytes.resize(bytes.size() + data_bytes);
    return bytes;
  };
  const auto problem = [&](std::vector<std::uint32_t> dims, std::size_t data_bytes) -> std::string {
    try {
      commtune::parse_idx_header(header(dims, data_bytes), dims.size(), "f");
      return "";
    } catch (const commtune::ConfigError& e) {
      EXPECT_EQ(e.field(), "data.path");
      return e.what();
    }
  };
  const auto ok = commtune::parse_idx_header(header({2, 3, 4}, 24), 3, "f");
  EXPECT_EQ(ok.dims, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(ok.data_offset, 16u);
  EXPECT_NE(problem({64, 0, 0}, 0).find("dimension 1 of its header is 0"), std::string::npos);
  // 2^22 * 2^21 * 2^21 wraps a 64-bit product to 0: it must not pass as "0 bytes expected".
  EXPECT_NE(problem({1u << 22, 1u << 21, 1u << 21}, 0).find("need more bytes"), std::string::npos);
  EXPECT_NE(problem({1u << 22, 1u << 21, 1u << 21}, 16).find("need more bytes"), std::string::npos);
  EXPECT_NE(problem({2, 3, 4}, 25).find("holds 25 data bytes, its header says 24"), std::string::npos);
}

TEST(DataHeaders, Cifar10LabelsAreZeroToNine) {
  std::vector<unsigned char> records(2 * commtune::kCifarRecordBytes, 0);
  commtune::check_cifar10_records(records, "f");
  records[commtune::kCifarRecordBytes] = 200;
  try {
    commtune::check_cifar10_records(records, "f");
    FAIL() << "label 200 must be refused";
  } catch (const commtune::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("record 1 has label 200"), std::string::npos) << e.what();
  }
  records.pop_back();
  EXPECT_THROW(commtune::check_cifar10_records(records, "f"), commtune::ConfigError);
}

TEST_F(DataFiles, ReadsCifar10Batches) {
  std::string records;
  for (int i = 0; i < 4; ++i) {
    records.push_back(static_cast<char>(i));
    std::string image(3072, static_cast<char>(i * 10));
    image[1024] = static_cast<char>(255);  // first green pixel
    records += image;
  }
  write("data_batch_1.bin", records);
  write("data_batch_2.bin", records.substr(0, 3073));
  auto data = load({{"name", "cifar10"}, {"path", dir_.string()}, {"normalize", false}});
  EXPECT_EQ(data->size(), 5);
  EXPECT_EQ(data->spec().input_shape, (std::vector<std::int64_t>{3, 32, 32}));
  const auto b = data->gather({2, 4});
  EXPECT_EQ(b.target[0].item<std::int64_t>(), 2);
  EXPECT_EQ(b.target[1].item<std::int64_t>(), 0);
  EXPECT_FLOAT_EQ(b.input[0][1][0][0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(b.input[0][0][0][0].item<float>(), 20.0f / 255.0f);

  write("data_batch_1.bin", records + "x");
  EXPECT_THROW(load({{"name", "cifar10"}, {"path", dir_.string()}}), commtune::ConfigError);
}

// Data files are checked against what the dataset can be before they are
// read: a 2 GiB sparse file named like a CIFAR-10 batch is refused at once by
// its size, not read whole (4 GB per rank) before its size is looked at.
TEST_F(DataFiles, SizesAreCheckedBeforeAFileIsRead) {
  const auto problem = [&](nlohmann::json section) -> std::pair<std::string, std::string> {
    section["name"] = "cifar10";
    section["path"] = dir_.string();
    try {
      load(section);
      return {"", ""};
    } catch (const commtune::ConfigError& e) {
      return {e.field(), e.what()};
    }
  };
  const auto batch = dir_ / "data_batch_1.bin";
  std::ofstream(batch, std::ios::binary).flush();
  fs::resize_file(batch, std::uint64_t{2} << 30);  // sparse: 2 GiB that take no disk
  auto [field, what] = problem({});
  EXPECT_EQ(field, "data.path");
  EXPECT_NE(what.find("2147483648 bytes, not a multiple of 3073"), std::string::npos) << what;

  // Whole records, but more than data.max_gib lets the dataset take.
  fs::resize_file(batch, 3073 * 1000);
  std::tie(field, what) = problem({{"max_gib", 0.001}});
  EXPECT_EQ(field, "data.max_gib");
  EXPECT_NE(what.find("needs 3073000 bytes, more than the 0.001 GiB"), std::string::npos) << what;
  EXPECT_NE(what.find("raise data.max_gib"), std::string::npos) << what;
  EXPECT_EQ(load({{"name", "cifar10"}, {"path", dir_.string()}, {"max_gib", 0.01}})->size(), 1000);

  // A gzip bomb stops inflating where the budget ends (64 MiB of zeros in about 64 KB).
  fs::remove(batch);
  write("data_batch_1.bin", std::string(std::size_t{64} << 20, '\0'), /*gzip=*/true);
  EXPECT_LT(fs::file_size(batch.string() + ".gz"), std::uintmax_t{1} << 20);
  std::tie(field, what) = problem({{"max_gib", 0.01}});
  EXPECT_EQ(field, "data.max_gib");
  EXPECT_NE(what.find("bytes decompressed"), std::string::npos) << what;
}

}  // namespace