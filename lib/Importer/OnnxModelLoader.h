//===- OnnxModelLoader.h - read, bind and check an ONNX model --*- C++ -*-===//
//
// The part of the importer that talks to the ONNX library: parsing, external
// data, dimension binding, the checker and shape inference. ONNX reports
// problems by throwing, so this is the one translation unit built with
// exceptions; everything it returns is an llvm::Error.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_IMPORTER_ONNXMODELLOADER_H
#define PARALLAX_LIB_IMPORTER_ONNXMODELLOADER_H

#include "parallax/Importer/OnnxImporter.h"

#include "onnx/onnx_pb.h"

namespace parallax::detail {

/// ONNX's standard denotation of a batch dimension; binding puts it on
/// dimension 0 of every input whose dimension 0 was dynamic.
constexpr const char *kBatchDenotation = "DATA_BATCH";

/// Loads `path`, inlines external tensor data, checks the opset range, binds
/// every dynamic input dimension from `options`, and runs the ONNX checker
/// and strict shape inference. Returns the default-domain opset.
llvm::Expected<int64_t> loadOnnxModel(const std::string &path,
                                      const ImportOptions &options,
                                      onnx::ModelProto &model);

/// The same for a model in memory, called `name` in errors (text syntax when
/// it ends in `.onnxtxt`). External data is refused: there is no directory
/// to read it from.
llvm::Expected<int64_t> loadOnnxModelFromBuffer(llvm::StringRef bytes,
                                                const std::string &name,
                                                const ImportOptions &options,
                                                onnx::ModelProto &model);

} // namespace parallax::detail

#endif
