#include "core/tuner/io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>

namespace commtune {

namespace {

// The temporary files being written, for a signal handler to remove: a
// fixed table, since a handler may not allocate or take locks. A slot is
// free (0), being filled (1) or holds a path (2). A file whose path does not
// fit, or that finds every slot taken, is still written whole; only a kill
// mid-write would leave its temporary behind.
constexpr std::size_t kSlots = 16;
constexpr std::size_t kPathBytes = 4096;
std::array<std::atomic<int>, kSlots> slot_state{};
char slot_path[kSlots][kPathBytes];

int claim_slot(const std::string& path) {
  if (path.size() >= kPathBytes) return -1;
  for (std::size_t i = 0; i < kSlots; ++i) {
    int free = 0;
    if (!slot_state[i].compare_exchange_strong(free, 1)) continue;
    std::memcpy(slot_path[i], path.c_str(), path.size() + 1);
    slot_state[i].store(2);
    return static_cast<int>(i);
  }
  return -1;
}

void release_slot(int slot) {
  if (slot >= 0) slot_state[static_cast<std::size_t>(slot)].store(0);
}

std::string reason(int error) { return std::strerror(error); }

bool write_all(int fd, const char* data, std::size_t size, int& error) {
  while (size > 0) {
    const auto n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

void remove_unfinished_output_files() noexcept {
  for (std::size_t i = 0; i < kSlots; ++i)
    if (slot_state[i].load() == 2) ::unlink(slot_path[i]);
}

// A stream buffer over the temporary file's descriptor; its first write
// error is kept for commit() to report.
class OutputFile::Buffer final : public std::streambuf {
 public:
  explicit Buffer(int fd) : fd_(fd) { setp(bytes_.data(), bytes_.data() + bytes_.size()); }
  bool drain() {
    const auto n = static_cast<std::size_t>(pptr() - pbase());
    setp(bytes_.data(), bytes_.data() + bytes_.size());
    return error_ == 0 && write_all(fd_, bytes_.data(), n, error_);
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  int fd_;
  int error_ = 0;
  std::array<char, 1 << 16> bytes_;
};

bool is_output_stream(const std::filesystem::path& path) {
  struct stat own {}, target {};
  if (::lstat(path.c_str(), &own) != 0) return false;
  const auto streams = [](const struct stat& s) { return S_ISCHR(s.st_mode) || S_ISFIFO(s.st_mode) || S_ISSOCK(s.st_mode); };
  if (!S_ISLNK(own.st_mode)) return streams(own);
  if (::stat(path.c_str(), &target) != 0) return false;
  if (streams(target)) return true;
  std::error_code ec;
  const auto folder = std::filesystem::canonical(std::filesystem::absolute(path, ec).parent_path(), ec).string();
  if (!ec && folder.rfind("/proc/", 0) == 0) return true;  // /dev/fd/1: a descriptor's entry in /proc
  // Each hop of the link in turn: one through /proc (/dev/stdout -> /proc/self/fd/1) is an open file
  // of this process, whatever it is; canonical() would see through it to that file's own path.
  std::filesystem::path at = path;
  for (int hop = 0; hop < 40; ++hop) {
    if (!std::filesystem::is_symlink(at, ec)) return false;
    auto next = std::filesystem::read_symlink(at, ec);
    if (ec) return false;
    at = next.is_absolute() ? next : at.parent_path() / next;
    if (at.lexically_normal().string().rfind("/proc/", 0) == 0) return true;
  }
  return false;
}

OutputFile::OutputFile(std::filesystem::path path) : path_(std::move(path)) {
  if (is_output_stream(path_)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) throw std::runtime_error("cannot write " + path_.string() + ": " + reason(errno));
    buffer_ = std::make_unique<Buffer>(fd_);
    stream_ = std::make_unique<std::ostream>(buffer_.get());
    return;
  }
  struct stat existing {};
  std::optional<mode_t> replaced_mode;  // a new file takes the umask's mode, as any other would
  if (::lstat(path_.c_str(), &existing) == 0) {
    if (S_ISDIR(existing.st_mode)) throw std::runtime_error("cannot write " + path_.string() + ": it is a folder");
    if (S_ISREG(existing.st_mode)) replaced_mode = existing.st_mode & 07777;
  }
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 names{std::random_device{}()};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temporary_ = path_.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                 std::to_string(names() % 1000000);
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt > 8))
      throw std::runtime_error("cannot write " + path_.string() + ": " + reason(errno));
  }
  slot_ = claim_slot(temporary_);
  if (replaced_mode) ::fchmod(fd_, *replaced_mode);  // the mode of the file it replaces, whatever the umask
  buffer_ = std::make_unique<Buffer>(fd_);
  stream_ = std::make_unique<std::ostream>(buffer_.get());
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  release_slot(slot_);
}

std::ostream& OutputFile::stream() { return *stream_; }

void OutputFile::forget_temporary() {
  temporary_.clear();
  release_slot(slot_);
  slot_ = -1;
}

void OutputFile::publish() {
  if (temporary_.empty()) return;  // in place already, or a stream
  if (::rename(temporary_.c_str(), path_.c_str()) != 0)
    throw std::runtime_error("cannot write " + path_.string() + ": " + reason(errno));
  forget_temporary();
}

void OutputFile::commit() {
  if (fd_ < 0) throw std::logic_error("OutputFile::commit: already committed");
  int error = 0;
  if (!buffer_->drain() || !*stream_) error = buffer_->error() ? buffer_->error() : EIO;
  const bool published = temporary_.empty();
  // A device or a pipe has nothing to sync (EINVAL); a file does.
  if (error == 0 && ::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS) error = errno;
  if (::close(fd_) != 0 && error == 0) error = errno;
  fd_ = -1;
  if (error == 0 && !published && ::rename(temporary_.c_str(), path_.c_str()) != 0) error = errno;
  if (!published && error != 0) ::unlink(temporary_.c_str());
  forget_temporary();
  if (error != 0) throw std::runtime_error("cannot write " + path_.string() + ": " + reason(error));
}

void write_file_whole(const std::filesystem::path& path, const std::string& text) {
  OutputFile file(path);
  file.stream().write(text.data(), static_cast<std::streamsize>(text.size()));
  file.commit();
}

}  // namespace commtune
