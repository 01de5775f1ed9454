//===- OnnxWeights.cpp - initial values from, trained values to, ONNX -----===//
//
// The runtime reads variables' initial values straight from the source model
// (the plan only names them) and writes trained models back as ONNX, through
// the ONNX protobuf classes (libonnx-dev); no MLIR.
//
//===----------------------------------------------------------------------===//

#include "Blocks.h"
#include "parallax/Runtime/AtomicFile.h"
#include "parallax/Runtime/Session.h"

#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace parallax::rt {

namespace {

[[noreturn]] void fail(const std::string &path, const std::string &msg) {
  throw RuntimeError(path + ": " + msg);
}

/// Parses the model at `path`; with `crc`, also the CRC-32 of its bytes
/// (read once for both).
onnx::ModelProto loadModel(const std::string &path, uint32_t *crc = nullptr) {
  std::optional<std::string> read = readFileBytes(path);
  if (!read)
    fail(path, std::string("cannot open: ") + std::strerror(errno));
  const std::string &bytes = *read;
  if (crc)
    *crc = crc32Of(bytes.data(), bytes.size());
  onnx::ModelProto model;
  if (path.size() > 8 && path.compare(path.size() - 8, 8, ".onnxtxt") == 0) {
    // The ONNX text syntax, as parallax-opt reads it (small test models).
    auto status = onnx::OnnxParser::Parse(model, bytes.c_str());
    if (!status.IsOK())
      fail(path, "the ONNX text does not parse: " + status.ErrorMessage());
    return model;
  }
  if (!model.ParseFromString(bytes))
    fail(path, "not an ONNX model: the protobuf does not parse (corrupt or "
               "truncated file?)");
  return model;
}

/// The tensor's bytes, from raw_data, external data or the typed fields.
std::string tensorBytes(const std::string &path, const onnx::TensorProto &t,
                        int64_t expectedBytes) {
  const std::string what = "initializer '" + t.name() + "'";
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    uint64_t offset = 0;
    int64_t length = -1;
    for (const auto &e : t.external_data()) {
      try {
        if (e.key() == "location")
          location = e.value();
        else if (e.key() == "offset")
          offset = std::stoull(e.value());
        else if (e.key() == "length")
          length = std::stoll(e.value());
      } catch (const std::exception &) {
        fail(path, what + " has an invalid external data " + e.key());
      }
    }
    // Same rule as the importer: data stays beside the model.
    if (location.empty() || location[0] == '/' ||
        location.find("..") != std::string::npos)
      fail(path, what + " has an invalid external data location '" + location + "'");
    auto file = std::filesystem::path(path).parent_path() / location;
    std::ifstream f(file, std::ios::binary);
    if (!f)
      fail(path, "cannot read external data '" + file.string() + "' of " + what +
                     ": " + std::strerror(errno));
    if (length < 0)
      length = expectedBytes;
    std::string bytes(length, '\0');
    f.seekg((std::streamoff)offset);
    f.read(bytes.data(), length);
    if (f.gcount() != length)
      fail(path, "external data of " + what + " ends before its " +
                     std::to_string(length) + " bytes");
    return bytes;
  }
  if (t.has_raw_data())
    return t.raw_data();
  std::string bytes;
  auto append = [&](const auto &field, auto cast) {
    using T = decltype(cast);
    for (auto v : field) {
      T c = static_cast<T>(v);
      bytes.append(reinterpret_cast<const char *>(&c), sizeof(T));
    }
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: append(t.float_data(), float()); break;
  case onnx::TensorProto::DOUBLE: append(t.double_data(), double()); break;
  case onnx::TensorProto::INT64: append(t.int64_data(), int64_t()); break;
  case onnx::TensorProto::INT32: append(t.int32_data(), int32_t()); break;
  case onnx::TensorProto::INT16: append(t.int32_data(), int16_t()); break;
  case onnx::TensorProto::INT8: append(t.int32_data(), int8_t()); break;
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL: append(t.int32_data(), uint8_t()); break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: append(t.int32_data(), uint16_t()); break;
  default:
    fail(path, what + " has an unsupported element type " +
                   std::to_string(t.data_type()));
  }
  return bytes;
}

} // namespace

void readOnnxInitializers(const std::string &path,
                          const std::vector<std::string> &names,
                          const std::vector<TensorView> &dests,
                          std::optional<uint32_t> expectedCrc32) {
  uint32_t crc = 0;
  onnx::ModelProto model = loadModel(path, &crc);
  if (expectedCrc32 && crc != *expectedCrc32) {
    char text[64];
    std::snprintf(text, sizeof text, "CRC-32 %08x, the plan expects %08x", crc,
                  *expectedCrc32);
    fail(path, std::string("the model changed since the plan was compiled (") +
                   text + "); recompile the plan");
  }
  std::map<std::string, const onnx::TensorProto *> byName;
  for (const auto &t : model.graph().initializer())
    byName[t.name()] = &t;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = byName.find(names[i]);
    if (it == byName.end())
      fail(path, "the model has no initializer '" + names[i] +
                     "' (is this the model the plan was compiled from?)");
    const onnx::TensorProto &t = *it->second;
    const TensorView &dest = dests[i];
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    if (dtypeFromOnnx(t.data_type()) != dest.dtype || dims != dest.shape)
      fail(path, "initializer '" + names[i] +
                     "' does not have the type the plan expects");
    std::string bytes = tensorBytes(path, t, dest.bytes());
    if ((int64_t)bytes.size() != dest.bytes())
      fail(path, "initializer '" + names[i] + "' holds " +
                     std::to_string(bytes.size()) + " bytes, expected " +
                     std::to_string(dest.bytes()));
    std::memcpy(dest.data, bytes.data(), bytes.size());
  }
}

void saveOnnxWithInitializers(const std::string &sourcePath,
                              const std::string &destPath,
                              const std::vector<std::string> &names,
                              const std::vector<TensorView> &values,
                              const std::vector<std::vector<int64_t>> &origins) {
  onnx::ModelProto model = loadModel(sourcePath);
  std::map<std::string, std::vector<size_t>> index;
  for (size_t i = 0; i < names.size(); ++i)
    index[names[i]].push_back(i);
  auto blockOrigin = [&](size_t i) {
    return i < origins.size() ? origins[i] : std::vector<int64_t>();
  };
  size_t replaced = 0;
  for (auto &t : *model.mutable_graph()->mutable_initializer()) {
    auto it = index.find(t.name());
    std::string bytes;
    if (it != index.end() && it->second.size() == 1 && blockOrigin(it->second.front()).empty()) {
      const TensorView &v = values[it->second.front()];
      bytes.assign(static_cast<const char *>(v.data), v.bytes());
      replaced += it->second.size();
    } else if (it != index.end()) {
      // Blocks: each in its place over the source's values.
      std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
      const TensorView &first = values[it->second.front()];
      bytes = tensorBytes(sourcePath, t, TensorView{nullptr, first.dtype, dims}.bytes());
      for (size_t i : it->second) {
        std::vector<int64_t> origin = blockOrigin(i);
        if (origin.size() != dims.size())
          fail(sourcePath, "initializer '" + t.name() + "' is to be saved twice, or whole and as blocks");
        placeBlock(static_cast<const char *>(values[i].data), values[i].shape, bytes.data(), dims,
                   origin, sizeOf(values[i].dtype));
      }
      replaced += it->second.size();
    } else if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      // Embed untouched external initializers too: the saved file must not
      // depend on data files beside the source model.
      int64_t n = 1;
      for (int64_t d : t.dims())
        n *= d;
      auto dtype = dtypeFromOnnx(t.data_type());
      bytes = tensorBytes(sourcePath, t, dtype ? n * (int64_t)sizeOf(*dtype) : -1);
    } else {
      continue;
    }
    t.clear_float_data();
    t.clear_double_data();
    t.clear_int32_data();
    t.clear_int64_data();
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.set_raw_data(bytes);
  }
  if (replaced != names.size())
    fail(sourcePath, "the model lacks some of the trained variables");
  AtomicFile out(destPath);
  if (!model.SerializeToFileDescriptor(out.fd()))
    fail(destPath, std::string("cannot write the trained model: ") +
                       std::strerror(errno));
  out.commit();
}

} // namespace parallax::rt
