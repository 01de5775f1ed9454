//===- AtomicFile.cpp - files that appear whole or not at all -------------===//

#include "parallax/Runtime/AtomicFile.h"
#include "parallax/Runtime/Session.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace parallax::rt {

namespace {

std::string directoryOf(const std::string &path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

[[noreturn]] void failErrno(const std::string &path, const std::string &what) {
  throw RuntimeError(path + ": " + what + ": " + std::strerror(errno));
}

/// Makes a rename in `dir` durable.
void syncDirectory(const std::string &dir, const std::string &path) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    failErrno(path, "cannot open its directory to flush it");
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems (and /dev/shm on older kernels) cannot fsync a
  // directory; the rename itself has happened.
  if (rc != 0 && saved != EINVAL && saved != EROFS) {
    errno = saved;
    failErrno(path, "cannot flush its directory");
  }
}

} // namespace

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temp_(path_ + ".tmp") {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    failErrno(path_, "cannot create '" + temp_ + "'");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_)
    ::unlink(temp_.c_str());
}

void AtomicFile::write(const void *data, size_t n) {
  const char *p = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR)
        continue;
      failErrno(path_, "cannot write '" + temp_ + "'");
    }
    p += w;
    n -= (size_t)w;
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0)
    failErrno(path_, "cannot flush '" + temp_ + "' to disk");
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0)
    failErrno(path_, "cannot write '" + temp_ + "'");
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    failErrno(path_, "cannot rename '" + temp_ + "' to it");
  committed_ = true;
  syncDirectory(directoryOf(path_), path_);
}

void checkWritableFile(const std::string &path, const std::string &what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw RuntimeError(path + ": " + what +
                       " needs a file name, and this is a directory");
  std::string dir = directoryOf(path);
  if (!fs::is_directory(dir, ec))
    throw RuntimeError(path + ": cannot write " + what + " there: directory '" +
                       dir + "' does not exist");
  // Creating the temporary file is the only test that the directory takes
  // new files (permissions, read-only mounts, quotas; root ignores modes).
  AtomicFile probe(path);
}

} // namespace parallax::rt
