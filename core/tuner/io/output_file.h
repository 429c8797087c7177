// Every file commtune writes (exports, summaries, metrics, checkpoints) is
// written whole or not at all: to a new name beside its destination, then
// synced and renamed over it. A reader never sees half a file; a killed
// writer, a full disk or an error leaves the destination as it was; a
// symlink at the destination is replaced, never written through. A
// character device or a pipe there, or a link to one or into /proc
// (/dev/null, /dev/stdout, a FIFO), is written to as a stream.
#pragma once

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

namespace commtune {

class OutputFile {
 public:
  // Creates the temporary file beside `path` (O_EXCL | O_NOFOLLOW: a name of
  // its own whatever lies in the folder), with the mode of the regular file
  // it will replace, else the umask's. Throws std::runtime_error naming
  // `path` when it cannot (a folder there, no folder, no permission).
  explicit OutputFile(std::filesystem::path path);
  // Without commit(), the temporary file is removed and `path` untouched.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream();
  // For a live log (run --metrics, read as it grows): puts the file at its
  // destination now, replacing what was there (a symlink too, never
  // followed); what is written after it appears there as it is flushed.
  void publish();
  // Writes what is buffered, syncs it to the disk and renames it over the
  // destination (unless published). Throws std::runtime_error naming the
  // destination and the reason (a full disk) after removing the temporary file.
  void commit();
  const std::filesystem::path& path() const { return path_; }

 private:
  class Buffer;
  void forget_temporary();  // it is renamed or removed
  std::filesystem::path path_;
  std::string temporary_;
  int fd_ = -1;
  int slot_ = -1;  // in the registry of unfinished files (remove_unfinished_output_files)
  std::unique_ptr<Buffer> buffer_;
  std::unique_ptr<std::ostream> stream_;
};

// Whether OutputFile writes to `path` as a stream rather than replacing it:
// a character device or a pipe (/dev/null, a FIFO), or a link to one or
// into /proc (/dev/stdout -> /proc/self/fd/1, whatever stdout is). Any other
// link (to a file, a block device, nowhere) is replaced.
bool is_output_stream(const std::filesystem::path& path);

// `text` as the whole of the file at `path` (OutputFile).
void write_file_whole(const std::filesystem::path& path, const std::string& text);

// Removes the temporary files of every OutputFile not yet committed or
// destroyed: what a signal handler that ends the process at once calls, so a
// killed export leaves neither half a file nor its temporary behind.
// Async-signal-safe (unlink(2) only).
void remove_unfinished_output_files() noexcept;

}  // namespace commtune
