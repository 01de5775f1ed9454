//===- AtomicFile.h - files that appear whole or not at all ----*- C++ -*-===//
//
// Trained models and checkpoints are written under a temporary name beside
// their destination, flushed to disk (fsync), renamed over it and the
// directory flushed too: a reader, or a run resumed after a crash, sees the
// old file or the new one, never a part of the new one.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_ATOMICFILE_H
#define PARALLAX_RUNTIME_ATOMICFILE_H

#include <cstddef>
#include <string>

namespace parallax::rt {

class AtomicFile {
public:
  /// Creates `path` + ".tmp" (replacing one left by a crash). Throws
  /// RuntimeError naming `path` when it cannot.
  explicit AtomicFile(std::string path);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  /// Appends `n` bytes; throws RuntimeError (disk full, I/O error).
  void write(const void *data, size_t n);
  /// The temporary file's descriptor, for writers that take one.
  int fd() const { return fd_; }
  /// fsync, close, rename over the destination, fsync the directory.
  void commit();

  const std::string &path() const { return path_; }
  const std::string &temporaryPath() const { return temp_; }

private:
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Checks, before any work is done, that a file can be written at `path`
/// the way AtomicFile writes it: its directory exists and takes new files,
/// and `path` is not a directory. `what` names the option in the message
/// ("--save"). Throws RuntimeError.
void checkWritableFile(const std::string &path, const std::string &what);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_ATOMICFILE_H
