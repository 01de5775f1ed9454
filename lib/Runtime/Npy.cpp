//===- Npy.cpp - NumPy .npy reading and writing ---------------------------===//
//
// The .npy format (numpy/lib/format.py): magic "\x93NUMPY", a version, a
// header length, then a Python dict literal with 'descr', 'fortran_order'
// and 'shape', padded so the data starts 64-byte aligned. Only the part of
// that literal numpy itself writes is accepted.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Data.h"
#include "parallax/Runtime/Session.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace parallax::rt {

namespace {

[[noreturn]] void fail(const std::string &path, const std::string &msg) {
  throw RuntimeError(path + ": " + msg);
}

struct Descr {
  const char *text;
  DType dtype;
};
// '<' little-endian, '|' not applicable (one byte).
constexpr Descr kDescrs[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16},
    {"<i8", DType::I64}, {"<i4", DType::I32}, {"<i2", DType::I16},
    {"|i1", DType::I8},  {"|u1", DType::U8},  {"|b1", DType::Bool},
};

std::string descrOf(DType t) {
  for (const Descr &d : kDescrs)
    if (d.dtype == t)
      return d.text;
  throw RuntimeError(std::string("cannot write ") + nameOf(t) + " as .npy");
}

} // namespace

NpyArray readNpy(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    fail(path, "not a .npy file (bad magic)");
  int major = (unsigned char)bytes[6];
  size_t headerLen, start;
  if (major == 1) {
    headerLen = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      fail(path, "truncated .npy header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t((unsigned char)bytes[8 + i]) << (8 * i);
    start = 12;
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < start + headerLen)
    fail(path, "truncated .npy header");
  std::string header = bytes.substr(start, headerLen);

  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']*)'")))
    fail(path, "the .npy header has no 'descr'");
  std::string descr = m[1];
  NpyArray a;
  bool known = false;
  for (const Descr &d : kDescrs)
    if (descr == d.text || (descr[0] == '=' && descr.substr(1) == std::string(d.text).substr(1))) {
      a.dtype = d.dtype;
      known = true;
    }
  if (!known)
    fail(path, "unsupported dtype '" + descr +
                   "' (little-endian float, int, uint8 or bool expected)");
  if (!std::regex_search(header, m, std::regex("'fortran_order':\\s*(True|False)")))
    fail(path, "the .npy header has no 'fortran_order'");
  if (m[1] == "True")
    fail(path, "Fortran-order arrays are not supported (save with "
               "np.ascontiguousarray)");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    fail(path, "the .npy header has no 'shape'");
  std::string dims = m[1];
  std::regex number("\\d+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), number);
       it != std::sregex_iterator(); ++it)
    a.shape.push_back(std::stoll(it->str()));
  int64_t n = 1;
  for (int64_t d : a.shape)
    n *= d;
  size_t expected = (size_t)n * sizeOf(a.dtype);
  size_t available = bytes.size() - start - headerLen;
  if (available != expected)
    fail(path, "holds " + std::to_string(available) + " bytes of data, its "
               "header announces " + std::to_string(expected));
  a.data = bytes.substr(start + headerLen);
  return a;
}

void writeNpy(const std::string &path, const TensorView &t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i)
    shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 || i + 1 < t.shape.size() ? "," : "");
  shape += ")";
  std::string header = "{'descr': '" + descrOf(t.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a newline so the data starts 64-byte aligned.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    fail(path, std::string("cannot open for writing: ") + std::strerror(errno));
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = (uint16_t)header.size();
  char lenBytes[2] = {char(len & 0xff), char(len >> 8)};
  f.write(lenBytes, 2);
  f << header;
  f.write(static_cast<const char *>(t.data), t.bytes());
  if (!f)
    fail(path, std::string("write failed: ") + std::strerror(errno));
}

} // namespace parallax::rt
