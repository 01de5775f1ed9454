//===- FramedFile.cpp - the container of plans and checkpoints ------------===//

#include "parallax/Runtime/FramedFile.h"
#include "parallax/Runtime/Plan.h"

#include <cstring>

namespace parallax::rt {

namespace {

void putLE(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}

uint64_t getLE(const std::string &in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t((unsigned char)in[at + i]) << (8 * i);
  return v;
}

} // namespace

std::string frameHeader(const FramedFormat &format, uint64_t first, uint64_t second) {
  std::string out(format.magic, 8);
  putLE(out, format.version, 4);
  putLE(out, 0, 4);
  putLE(out, first, 8);
  putLE(out, second, 8);
  return out;
}

std::string frameTrailer(uint32_t crc) {
  std::string out;
  putLE(out, crc, 4);
  return out;
}

std::string frame(const FramedFormat &format, const std::string &first,
                  const std::string &second) {
  std::string out = frameHeader(format, first.size(), second.size());
  out.reserve(out.size() + first.size() + second.size() + kFrameTrailerBytes);
  out += first;
  out += second;
  out += frameTrailer(crc32Of(out.data(), out.size()));
  return out;
}

FramedSections unframe(const std::string &bytes, const FramedFormat &format,
                       const std::function<void(const std::string &)> &fail) {
  std::string noun = format.noun;
  if (bytes.size() < 8 || std::memcmp(bytes.data(), format.magic, 8) != 0)
    fail("not a Parallax " + noun + " (bad magic)" + format.badMagicHint);
  if (bytes.size() < kFrameHeaderBytes + kFrameTrailerBytes)
    fail("truncated " + noun + " (" + std::to_string(bytes.size()) + " bytes)");
  uint32_t version = (uint32_t)getLE(bytes, 8, 4);
  if (version != format.version)
    fail(noun + " format version " + std::to_string(version) +
         ", but this parallax-run reads version " + std::to_string(format.version) +
         format.versionHint);
  uint64_t first = getLE(bytes, 16, 8), second = getLE(bytes, 24, 8);
  uint64_t body = bytes.size() - kFrameHeaderBytes - kFrameTrailerBytes;
  if (first > body || second != body - first)
    fail("truncated or corrupt " + noun + ": the header announces " +
         std::to_string(first + second) + " bytes of " + format.contents +
         ", the file holds " + std::to_string(body));
  uint32_t stored = (uint32_t)getLE(bytes, bytes.size() - kFrameTrailerBytes, 4);
  if (crc32Of(bytes.data(), bytes.size() - kFrameTrailerBytes) != stored)
    fail("corrupt " + noun + ": checksum mismatch");
  std::string_view all(bytes);
  return {all.substr(kFrameHeaderBytes, first),
          all.substr(kFrameHeaderBytes + first, second), stored};
}

} // namespace parallax::rt
