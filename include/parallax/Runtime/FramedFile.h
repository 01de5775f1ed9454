//===- FramedFile.h - the container of plans and checkpoints ----*- C++ -*-===//
//
// Plans and checkpoints share one layout, all integers little-endian:
//
//   offset 0   8-byte magic
//   offset 8   u32 format version
//   offset 12  u32 0 (reserved)
//   offset 16  u64 bytes of the first section (JSON text)
//   offset 24  u64 bytes of the second section (raw data)
//   offset 32  the two sections
//   end - 4    u32 CRC-32 (zlib) of everything before it
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_FRAMEDFILE_H
#define PARALLAX_RUNTIME_FRAMEDFILE_H

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace parallax::rt {

/// One kind of framed file, and the words its errors use.
struct FramedFormat {
  const char *magic;           ///< 8 bytes
  uint32_t version;
  const char *noun;            ///< "plan": "not a Parallax plan", "corrupt plan"
  const char *contents;        ///< what the sections hold: "state"
  const char *badMagicHint;    ///< appended to the bad-magic message ("" for none)
  const char *versionHint;     ///< appended to the version mismatch ("" for none)
};

constexpr size_t kFrameHeaderBytes = 32, kFrameTrailerBytes = 4;

/// The header of a file whose sections are `first` and `second` bytes long.
std::string frameHeader(const FramedFormat &format, uint64_t first, uint64_t second);
/// The trailer: `crc`, the CRC-32 of the header and both sections.
std::string frameTrailer(uint32_t crc);
/// A whole file: header, sections, trailer.
std::string frame(const FramedFormat &format, const std::string &first,
                  const std::string &second);

struct FramedSections {
  std::string_view first, second;
  uint32_t checksum; ///< the trailer's CRC-32: the file's identity
};
/// The sections of `bytes`, once its magic, size, version, section lengths
/// and checksum are right; otherwise calls `fail` (which must throw) with
/// a one-line reason.
FramedSections unframe(const std::string &bytes, const FramedFormat &format,
                       const std::function<void(const std::string &)> &fail);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_FRAMEDFILE_H
