//===- OnnxModelLoader.cpp - read, bind and check an ONNX model -----------===//

#include "OnnxModelLoader.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <map>
#include <set>

using llvm::createStringError;
using llvm::inconvertibleErrorCode;

namespace parallax::detail {
namespace {

llvm::Error fail(const std::string &path, const llvm::Twine &what) {
  return createStringError(inconvertibleErrorCode(), path + ": " + what);
}

/// ONNX's messages (parser, checker, shape inference) span several lines;
/// an error is one line on stderr, so their lines are joined with "; ".
std::string oneLine(llvm::StringRef message) {
  llvm::SmallVector<llvm::StringRef> lines;
  message.split(lines, '\n', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  std::string joined;
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.empty())
      continue;
    if (!joined.empty())
      joined += "; ";
    joined += line.str();
  }
  return joined;
}

bool isTextSyntax(const std::string &path) {
  return llvm::StringRef(path).ends_with(".onnxtxt");
}

llvm::Error parseModel(const std::string &path, llvm::StringRef bytes,
                       bool textSyntax, onnx::ModelProto &model) {
  if (textSyntax) {
    // OnnxParser reads a NUL-terminated string.
    std::string text(bytes);
    auto status = onnx::OnnxParser::Parse(model, text.c_str());
    if (!status.IsOK())
      return fail(path,
                  "not valid ONNX text syntax: " + oneLine(status.ErrorMessage()));
  } else {
    if (bytes.size() > (size_t)INT32_MAX)
      return fail(path, "not an ONNX model: larger than protobuf's 2 GiB "
                        "limit (store the weights as external data)");
    google::protobuf::io::ArrayInputStream array(bytes.data(),
                                                 (int)bytes.size());
    google::protobuf::io::CodedInputStream coded(&array);
    coded.SetTotalBytesLimit(INT32_MAX);
    if (!model.ParseFromCodedStream(&coded) ||
        !coded.ConsumedEntireMessage())
      return fail(path, "not an ONNX model: the protobuf does not parse "
                        "(corrupt or truncated file?)");
  }
  // An empty or unrelated protobuf can parse as an empty ModelProto.
  if (!model.has_graph() || model.ir_version() <= 0)
    return fail(path, "not an ONNX model: it has no graph or no IR version");
  return llvm::Error::success();
}

/// Reads tensors stored in external files into raw_data, so the rest of the
/// importer (and the checker) sees one self-contained model.
llvm::Error inlineExternalData(const std::string &path, bool fromFile,
                               onnx::ModelProto &model) {
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  for (onnx::TensorProto &tensor : *model.mutable_graph()->mutable_initializer()) {
    if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    if (!fromFile)
      return fail(path, "initializer '" + tensor.name() +
                            "' has external data, which a model read from "
                            "memory has no directory to find");
    std::string location;
    uint64_t offset = 0;
    int64_t length = -1;
    for (const auto &entry : tensor.external_data()) {
      // Checked parses: std::stoull would throw, out of any try block.
      llvm::StringRef value(entry.value());
      bool invalid = false;
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset")
        invalid = value.getAsInteger(10, offset);
      else if (entry.key() == "length")
        invalid = value.getAsInteger(10, length) || length < 0;
      if (invalid)
        return fail(path, "initializer '" + tensor.name() +
                              "' has an invalid external data " + entry.key() +
                              " '" + entry.value() + "'");
    }
    if (location.empty() || llvm::sys::path::is_absolute(location) ||
        llvm::StringRef(location).contains(".."))
      return fail(path, "initializer '" + tensor.name() +
                            "' has an invalid external data location '" +
                            location + "'");
    llvm::SmallString<256> file(dir);
    llvm::sys::path::append(file, location);
    auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!buffer)
      return fail(path, "cannot read external data '" + std::string(file) +
                            "' of initializer '" + tensor.name() +
                            "': " + buffer.getError().message());
    llvm::StringRef bytes = (*buffer)->getBuffer();
    if (offset > bytes.size() ||
        (length >= 0 && offset + (uint64_t)length > bytes.size()))
      return fail(path, "external data of initializer '" + tensor.name() +
                            "' lies beyond the end of '" + std::string(file) +
                            "'");
    llvm::StringRef data = bytes.substr(offset, length < 0 ? llvm::StringRef::npos
                                                           : (size_t)length);
    tensor.set_raw_data(data.data(), data.size());
    tensor.clear_external_data();
    tensor.set_data_location(onnx::TensorProto::DEFAULT);
  }
  return llvm::Error::success();
}

/// Every text field of the model (names, op types, domains, keys; not
/// doc strings, and not attribute values, which ONNX stores as bytes) must
/// be UTF-8: names become the plan's JSON strings, which cannot hold
/// anything else. protobuf checks this for proto3 files only, and ONNX's
/// are proto2. Found by the ONNX importer fuzzer: a node name with byte 0x92
/// made the plan writer throw. `where` is the field's path in the model.
llvm::Error checkUtf8(const std::string &path, const google::protobuf::Message &m,
                      const std::string &where) {
  using google::protobuf::FieldDescriptor;
  const auto *d = m.GetDescriptor();
  const auto *r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor *f = d->field(i);
    std::string at = where + (where.empty() ? "" : ".") + f->name();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0, n = r->FieldSize(m, f); j < n; ++j)
          if (llvm::Error err = checkUtf8(path, r->GetRepeatedMessage(m, f, j),
                                          at + "[" + std::to_string(j) + "]"))
            return err;
      } else if (r->HasField(m, f)) {
        if (llvm::Error err = checkUtf8(path, r->GetMessage(m, f), at))
          return err;
      }
      continue;
    }
    if (f->type() != FieldDescriptor::TYPE_STRING || f->name() == "doc_string")
      continue;
    auto check = [&](const std::string &text, const std::string &field) -> llvm::Error {
      size_t offset = 0;
      if (llvm::json::isUTF8(text, &offset))
        return llvm::Error::success();
      return fail(path, field + " is not UTF-8 text (byte " + llvm::Twine(offset) +
                            " of " + llvm::Twine(text.size()) + ")");
    };
    if (f->is_repeated()) {
      for (int j = 0, n = r->FieldSize(m, f); j < n; ++j)
        if (llvm::Error err =
                check(r->GetRepeatedString(m, f, j), at + "[" + std::to_string(j) + "]"))
          return err;
    } else if (r->HasField(m, f)) {
      if (llvm::Error err = check(r->GetString(m, f), at))
        return err;
    }
  }
  return llvm::Error::success();
}

/// Every input and output of the graph and of its subgraphs (Loop and If
/// bodies) is a tensor of a defined element type: ONNX's checker lets an
/// UNDEFINED element type through, and its shape inference of a Loop then
/// dereferences a null type (found by the ONNX importer fuzzer: SIGSEGV in
/// libonnx for an input 'x' of element type 0).
llvm::Error checkValueTypes(const std::string &path, const onnx::GraphProto &graph) {
  auto check = [&](const onnx::ValueInfoProto &v, const char *kind) -> llvm::Error {
    if (!v.type().has_tensor_type())
      return fail(path, llvm::Twine(kind) + " '" + v.name() + "' of graph '" +
                            graph.name() + "' is not a tensor");
    if (v.type().tensor_type().elem_type() == onnx::TensorProto::UNDEFINED)
      return fail(path, llvm::Twine(kind) + " '" + v.name() + "' of graph '" +
                            graph.name() + "' has no element type");
    return llvm::Error::success();
  };
  for (const auto &v : graph.input())
    if (llvm::Error err = check(v, "input"))
      return err;
  for (const auto &v : graph.output())
    if (llvm::Error err = check(v, "output"))
      return err;
  for (const auto &node : graph.node())
    for (const auto &attr : node.attribute()) {
      if (attr.has_g())
        if (llvm::Error err = checkValueTypes(path, attr.g()))
          return err;
      for (const auto &g : attr.graphs())
        if (llvm::Error err = checkValueTypes(path, g))
          return err;
    }
  return llvm::Error::success();
}

/// Bytes of one element of an ONNX data type stored as raw data; 0 for
/// types that have none (strings) or that ONNX does not define.
int64_t rawElementBytes(int32_t dtype) {
  using T = onnx::TensorProto;
  switch (dtype) {
  case T::UINT8: case T::INT8: case T::BOOL: return 1;
  case T::UINT16: case T::INT16: case T::FLOAT16: case T::BFLOAT16: return 2;
  case T::FLOAT: case T::INT32: case T::UINT32: return 4;
  case T::DOUBLE: case T::INT64: case T::UINT64: case T::COMPLEX64: return 8;
  case T::COMPLEX128: return 16;
  default: return 0;
  }
}

/// Every tensor's raw data must hold exactly its shape's elements, checked
/// before ONNX's own code reads any: its shape inference copies raw data
/// into a vector sized by whole elements (ParseData in ONNX 1.12), writing
/// past the vector when the byte count is not a multiple of the element
/// size. Found by the ONNX importer fuzzer.
llvm::Error checkRawData(const std::string &path, const onnx::TensorProto &tensor,
                         const std::string &what) {
  if (!tensor.has_raw_data())
    return llvm::Error::success();
  int64_t elementBytes = rawElementBytes(tensor.data_type());
  auto wrong = [&](const llvm::Twine &why) {
    return fail(path, what + " has " + llvm::Twine(tensor.raw_data().size()) +
                          " bytes of raw data, " + why);
  };
  if (elementBytes == 0)
    return wrong("which its element type (" + llvm::Twine(tensor.data_type()) +
                 ") cannot have");
  int64_t expected = elementBytes;
  for (int64_t d : tensor.dims())
    if (d < 0 || __builtin_mul_overflow(expected, d, &expected))
      return wrong("and a shape with a negative or too large dimension");
  if ((int64_t)tensor.raw_data().size() != expected)
    return wrong("where its shape and element type take " + llvm::Twine(expected));
  return llvm::Error::success();
}

llvm::Error checkRawData(const std::string &path, const onnx::GraphProto &graph);

llvm::Error checkRawData(const std::string &path, const onnx::NodeProto &node) {
  std::string where = "node '" + node.name() + "' (" + node.op_type() + ")";
  for (const auto &attr : node.attribute()) {
    std::string what = "attribute '" + attr.name() + "' of " + where;
    if (attr.has_t())
      if (llvm::Error err = checkRawData(path, attr.t(), what))
        return err;
    for (const auto &t : attr.tensors())
      if (llvm::Error err = checkRawData(path, t, what))
        return err;
    if (attr.has_sparse_tensor())
      for (const auto *t : {&attr.sparse_tensor().values(), &attr.sparse_tensor().indices()})
        if (llvm::Error err = checkRawData(path, *t, what))
          return err;
    if (attr.has_g())
      if (llvm::Error err = checkRawData(path, attr.g()))
        return err;
    for (const auto &g : attr.graphs())
      if (llvm::Error err = checkRawData(path, g))
        return err;
  }
  return llvm::Error::success();
}

llvm::Error checkRawData(const std::string &path, const onnx::GraphProto &graph) {
  for (const auto &t : graph.initializer())
    if (llvm::Error err = checkRawData(path, t, "initializer '" + t.name() + "'"))
      return err;
  for (const auto &sparse : graph.sparse_initializer())
    for (const auto *t : {&sparse.values(), &sparse.indices()})
      if (llvm::Error err = checkRawData(path, *t,
                                         "sparse initializer '" + sparse.values().name() + "'"))
        return err;
  for (const auto &node : graph.node())
    if (llvm::Error err = checkRawData(path, node))
      return err;
  return llvm::Error::success();
}

llvm::Expected<int64_t> defaultOpset(const std::string &path,
                                     const onnx::ModelProto &model) {
  for (const auto &opset : model.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") {
      int64_t v = opset.version();
      if (v < kMinOpset || v > kMaxOpset)
        return fail(path, "opset " + std::to_string(v) +
                              " is outside the supported range " +
                              std::to_string(kMinOpset) + " to " +
                              std::to_string(kMaxOpset) +
                              " (re-export with opset_version in that range)");
      return v;
    }
  }
  return fail(path, "the model imports no default-domain (ai.onnx) opset");
}

std::string describeDim(const onnx::TensorShapeProto_Dimension &dim) {
  if (dim.has_dim_param())
    return "'" + dim.dim_param() + "'";
  return "unknown";
}

/// Whether dimension 0 of `input` is dynamic.
bool dynamicFirstDim(const onnx::ValueInfoProto &input) {
  if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape() ||
      input.type().tensor_type().shape().dim_size() == 0)
    return false;
  const auto &dim = input.type().tensor_type().shape().dim(0);
  return !(dim.has_dim_value() && dim.dim_value() >= 0);
}

/// The symbol of the batch dimension: the dim_param that the most inputs'
/// dynamic dimension 0 share (the first such input's on a tie), or, when
/// none is shared, the one named "batch". Empty otherwise, and then every
/// dynamic dimension 0 is the batch, as with torch.onnx.export's
/// dynamic_axes lists, which name each input's axis differently. An input
/// whose dynamic dimension 0 has another symbol (nn.EmbeddingBag's ids,
/// whose length is not the number of bags) is not batched: --batch-size
/// does not bind it.
std::string batchSymbol(const onnx::GraphProto &graph,
                        const std::set<std::string> &initializers) {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  for (const auto &input : graph.input()) {
    if (initializers.count(input.name()) || !dynamicFirstDim(input))
      continue;
    const auto &dim = input.type().tensor_type().shape().dim(0);
    if (!dim.has_dim_param())
      continue;
    if (count[dim.dim_param()]++ == 0)
      order.push_back(dim.dim_param());
  }
  std::string best;
  for (const std::string &symbol : order)
    if (count[symbol] > 1 && (best.empty() || count[symbol] > count[best]))
      best = symbol;
  if (best.empty() && count.count("batch"))
    best = "batch";
  return best;
}

/// Whether `input`'s dimension 0 is the batch dimension.
bool isBatchDim(const onnx::ValueInfoProto &input, const std::string &symbol) {
  if (!dynamicFirstDim(input))
    return false;
  const auto &dim = input.type().tensor_type().shape().dim(0);
  return symbol.empty() || !dim.has_dim_param() || dim.dim_param() == symbol;
}

/// Replaces every dynamic dimension of the graph inputs with a number.
llvm::Error bindDimensions(const std::string &path, const ImportOptions &options,
                           onnx::ModelProto &model) {
  onnx::GraphProto &graph = *model.mutable_graph();
  std::set<std::string> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());

  std::optional<int64_t> batch = options.batchSize;
  if (!batch)
    for (const auto &prop : model.metadata_props())
      if (prop.key() == "parallax.batch_size") {
        // Checked parse: std::stoll would throw, out of any try block.
        int64_t value;
        if (llvm::StringRef(prop.value()).trim().getAsInteger(10, value))
          return fail(path, "metadata parallax.batch_size is '" + prop.value() +
                                "', not an integer");
        batch = value;
      }
  if (batch && *batch < 1)
    return fail(path, "batch size must be >= 1, got " + std::to_string(*batch));
  // The batch is the global one; each of `ranks` ranks gets an equal part.
  if (batch && options.ranks > 1) {
    if (*batch % options.ranks != 0)
      return fail(path, "the global batch of " + std::to_string(*batch) +
                            " samples does not split evenly over " +
                            std::to_string(options.ranks) +
                            " ranks (choose --batch-size a multiple of the rank count)");
    *batch /= options.ranks;
  }

  // A misspelt --input-shape name first: otherwise the input it meant to
  // shape is reported as dynamic, which hides the typo.
  std::set<std::string> inputs;
  for (const auto &input : graph.input())
    if (!initializers.count(input.name()))
      inputs.insert(input.name());
  for (const auto &[name, dims] : options.inputShapes)
    if (!inputs.count(name))
      return fail(path, "--input-shape names '" + name +
                            "', which is not a graph input");

  const std::string symbol = batchSymbol(graph, initializers);
  for (onnx::ValueInfoProto &input : *graph.mutable_input()) {
    if (initializers.count(input.name()))
      continue; // An IR < 4 style initializer listed as an input.
    const bool batchDim = isBatchDim(input, symbol);
    if (!input.type().has_tensor_type())
      return fail(path, "input '" + input.name() + "' is not a tensor");
    auto *shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    auto given = options.inputShapes.find(input.name());
    if (given != options.inputShapes.end()) {
      const std::vector<int64_t> &dims = given->second;
      if ((int)dims.size() != shape->dim_size())
        return fail(path, "--input-shape " + input.name() + " has " +
                              std::to_string(dims.size()) +
                              " dimensions, the input has rank " +
                              std::to_string(shape->dim_size()));
      // A dynamic batch dimension 0 is the batch (what the importer marks
      // `batched`), whichever way it was bound.
      if (batchDim)
        shape->mutable_dim(0)->set_denotation(kBatchDenotation);
      for (int i = 0; i < shape->dim_size(); ++i) {
        auto *dim = shape->mutable_dim(i);
        if (dims[i] < 1)
          return fail(path, "--input-shape " + input.name() +
                                ": dimensions must be >= 1");
        if (dim->has_dim_value() && dim->dim_value() != dims[i])
          return fail(path, "--input-shape " + input.name() + ": dimension " +
                                std::to_string(i) + " is fixed at " +
                                std::to_string(dim->dim_value()) +
                                " by the model, not " + std::to_string(dims[i]));
        dim->set_dim_value(dims[i]);
      }
      continue;
    }
    for (int i = 0; i < shape->dim_size(); ++i) {
      auto *dim = shape->mutable_dim(i);
      // dim_value 0 is a fixed, empty dimension (an empty axes list, a
      // zero-row tensor), not an unknown one.
      if (dim->has_dim_value() && dim->dim_value() >= 0)
        continue;
      if (i == 0 && batch && batchDim) {
        dim->set_dim_value(*batch);
        dim->set_denotation(kBatchDenotation);
        continue;
      }
      if (i == 0 && !batchDim)
        return fail(path, "dimension 0 (" + describeDim(*dim) + ") of input '" +
                              input.name() +
                              "' is dynamic and is not the batch dimension ('" +
                              symbol +
                              "', which --batch-size binds): pass --input-shape " +
                              input.name() + "=d0,d1,...");
      return fail(path, "dimension " + std::to_string(i) + " (" +
                            describeDim(*dim) + ") of input '" + input.name() +
                            "' is dynamic: pass " +
                            (i == 0 ? "--batch-size N or " : "") +
                            "--input-shape " + input.name() + "=d0,d1,...");
    }
  }
  // Stale intermediate shapes (with the symbolic batch) would conflict with
  // the bound ones; shape inference recomputes them.
  graph.clear_value_info();
  return llvm::Error::success();
}

/// Everything after parsing: opset, external data, binding, checker and
/// shape inference.
llvm::Expected<int64_t> checkModel(const std::string &path, bool fromFile,
                                   const ImportOptions &options,
                                   onnx::ModelProto &model) {
  auto opset = defaultOpset(path, model);
  if (!opset)
    return opset.takeError();
  if (llvm::Error err = inlineExternalData(path, fromFile, model))
    return std::move(err);
  if (llvm::Error err = bindDimensions(path, options, model))
    return std::move(err);
  if (llvm::Error err = checkUtf8(path, model, ""))
    return std::move(err);
  if (llvm::Error err = checkRawData(path, model.graph()))
    return std::move(err);
  if (llvm::Error err = checkValueTypes(path, model.graph()))
    return std::move(err);
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    return fail(path, llvm::Twine("the ONNX checker rejects the model: ") +
                          oneLine(e.what()));
  }
  try {
    onnx::ShapeInferenceOptions inference(/*check_type=*/true,
                                          /*error_mode=*/1,
                                          /*enable_data_propagation=*/true);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), inference);
  } catch (const std::exception &e) {
    return fail(path,
                llvm::Twine("ONNX shape inference fails: ") + oneLine(e.what()));
  }
  return *opset;
}

} // namespace

llvm::Expected<int64_t> loadOnnxModel(const std::string &path,
                                      const ImportOptions &options,
                                      onnx::ModelProto &model) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path, "cannot read file: " + buffer.getError().message());
  if (llvm::Error err = parseModel(path, (*buffer)->getBuffer(),
                                   isTextSyntax(path), model))
    return std::move(err);
  return checkModel(path, /*fromFile=*/true, options, model);
}

llvm::Expected<int64_t> loadOnnxModelFromBuffer(llvm::StringRef bytes,
                                                const std::string &name,
                                                const ImportOptions &options,
                                                onnx::ModelProto &model) {
  if (llvm::Error err = parseModel(name, bytes, isTextSyntax(name), model))
    return std::move(err);
  return checkModel(name, /*fromFile=*/false, options, model);
}

} // namespace parallax::detail
