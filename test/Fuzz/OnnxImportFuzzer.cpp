//===- OnnxImportFuzzer.cpp - libFuzzer: bytes -> parallax-opt pipeline ---===//
//
// Run through scripts/fuzz.sh; docs/testing.md says how the corpus is
// seeded and what counts as a bug.
//
// Byte-level mutations of a protobuf mostly break its framing, so most
// mutations here are made on the parsed ModelProto through protobuf
// reflection (what libprotobuf-mutator does; Debian does not package it):
// a field gets an interesting value, a name becomes another name of the
// model (rewiring the graph) or an operator or attribute name from ONNX's
// schemas, a repeated field gains, loses or duplicates an element.
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <type_traits>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

/// A mutable place in the message tree: a singular field (index -1), an
/// element of a repeated field, or a repeated field as a whole (index -2).
struct Site {
  Message *message;
  const FieldDescriptor *field;
  int index;
};

void collect(Message *m, std::vector<Site> &sites, std::vector<std::string> &names,
             int depth) {
  const Reflection *r = m->GetReflection();
  const Descriptor *d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor *f = d->field(i);
    bool isMessage = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (f->is_repeated()) {
      sites.push_back({m, f, -2});
      for (int j = 0, n = r->FieldSize(*m, f); j < n; ++j) {
        if (isMessage) {
          if (depth < 8)
            collect(r->MutableRepeatedMessage(m, f, j), sites, names, depth + 1);
        } else {
          sites.push_back({m, f, j});
          if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
              f->type() != FieldDescriptor::TYPE_BYTES)
            names.push_back(r->GetRepeatedString(*m, f, j));
        }
      }
    } else if (isMessage) {
      if (r->HasField(*m, f) && depth < 8)
        collect(r->MutableMessage(m, f), sites, names, depth + 1);
      else
        sites.push_back({m, f, -1});
    } else {
      sites.push_back({m, f, -1});
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
          f->type() != FieldDescriptor::TYPE_BYTES && f->name() != "doc_string")
        names.push_back(r->GetString(*m, f));
    }
  }
}

/// Operator and attribute names of every ONNX schema, and dimension names.
const std::vector<std::string> &schemaNames() {
  static const std::vector<std::string> names = [] {
    std::set<std::string> s = {"DATA_BATCH", "batch", "parallax.batch_size", "ai.onnx",
                               "EXTERNAL", "location", "offset", "length"};
    for (const auto &schema : onnx::OpSchemaRegistry::get_all_schemas()) {
      s.insert(schema.Name());
      for (const auto &[name, attribute] : schema.attributes())
        s.insert(name);
    }
    return std::vector<std::string>(s.begin(), s.end());
  }();
  return names;
}

template <typename T> T interesting(std::minstd_rand &rng, T old) {
  const int64_t values[] = {0,  1,  -1, 2,  3,  4,  8,  13, 17, 64, 255, 256, 1 << 20,
                            INT32_MAX, INT32_MIN, int64_t(1) << 31, int64_t(1) << 40,
                            int64_t(1) << 62, INT64_MAX, INT64_MIN};
  using U = std::make_unsigned_t<T>; // wrapping, not overflowing
  switch (rng() % 4) {
  case 0: return (T)((U)old + 1);
  case 1: return (T)((U)old - 1);
  default: return (T)values[rng() % (sizeof(values) / sizeof(values[0]))];
  }
}

double interestingReal(std::minstd_rand &rng, double old) {
  const double values[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-8, 1e30, -1e30,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()};
  if (rng() % 4 == 0)
    return old * 2;
  return values[rng() % (sizeof(values) / sizeof(values[0]))];
}

std::string mutateBytes(std::string s, size_t maxSize) {
  size_t cap = std::max<size_t>(s.size() * 2, 16);
  cap = std::min(cap, maxSize);
  s.resize(std::max(cap, s.size()));
  size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t *>(s.data()),
                              std::min(s.size(), cap), cap);
  s.resize(n);
  return s;
}

void mutateSite(const Site &site, std::minstd_rand &rng,
                const std::vector<std::string> &names, size_t maxSize) {
  Message *m = site.message;
  const FieldDescriptor *f = site.field;
  const Reflection *r = m->GetReflection();
  if (site.index == -2) {
    int n = r->FieldSize(*m, f);
    switch (n == 0 ? 0 : rng() % 3) {
    case 0: // add an element: a copy of one, or a default one
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        Message *added = r->AddMessage(m, f);
        if (n > 0)
          added->CopyFrom(r->GetRepeatedMessage(*m, f, rng() % n));
      } else if (n > 0) {
        // Duplicate element rng() % n at the end.
        int from = rng() % n;
        switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(m, f, r->GetRepeatedInt32(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_INT64: r->AddInt64(m, f, r->GetRepeatedInt64(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_UINT32: r->AddUInt32(m, f, r->GetRepeatedUInt32(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_UINT64: r->AddUInt64(m, f, r->GetRepeatedUInt64(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(m, f, r->GetRepeatedFloat(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_DOUBLE: r->AddDouble(m, f, r->GetRepeatedDouble(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_BOOL: r->AddBool(m, f, r->GetRepeatedBool(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_ENUM: r->AddEnumValue(m, f, r->GetRepeatedEnumValue(*m, f, from)); break;
        case FieldDescriptor::CPPTYPE_STRING: r->AddString(m, f, r->GetRepeatedString(*m, f, from)); break;
        default: break;
        }
      } else {
        switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(m, f, interesting<int32_t>(rng, 0)); break;
        case FieldDescriptor::CPPTYPE_INT64: r->AddInt64(m, f, interesting<int64_t>(rng, 0)); break;
        case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(m, f, (float)interestingReal(rng, 1)); break;
        case FieldDescriptor::CPPTYPE_STRING:
          r->AddString(m, f, names.empty() ? "" : names[rng() % names.size()]);
          break;
        default: break;
        }
      }
      return;
    case 1: // remove the last element
      r->RemoveLast(m, f);
      return;
    default: // swap two elements (node order, input order)
      r->SwapElements(m, f, rng() % n, rng() % n);
      return;
    }
  }
  bool repeated = site.index >= 0;
  int i = site.index;
  switch (f->cpp_type()) {
  case FieldDescriptor::CPPTYPE_INT32: {
    int32_t v = repeated ? r->GetRepeatedInt32(*m, f, i) : r->GetInt32(*m, f);
    v = interesting<int32_t>(rng, v);
    repeated ? r->SetRepeatedInt32(m, f, i, v) : r->SetInt32(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_INT64: {
    int64_t v = repeated ? r->GetRepeatedInt64(*m, f, i) : r->GetInt64(*m, f);
    v = interesting<int64_t>(rng, v);
    repeated ? r->SetRepeatedInt64(m, f, i, v) : r->SetInt64(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_UINT32: {
    uint32_t v = repeated ? r->GetRepeatedUInt32(*m, f, i) : r->GetUInt32(*m, f);
    v = interesting<uint32_t>(rng, v);
    repeated ? r->SetRepeatedUInt32(m, f, i, v) : r->SetUInt32(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_UINT64: {
    uint64_t v = repeated ? r->GetRepeatedUInt64(*m, f, i) : r->GetUInt64(*m, f);
    v = interesting<uint64_t>(rng, v);
    repeated ? r->SetRepeatedUInt64(m, f, i, v) : r->SetUInt64(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_FLOAT: {
    float v = repeated ? r->GetRepeatedFloat(*m, f, i) : r->GetFloat(*m, f);
    v = (float)interestingReal(rng, v);
    repeated ? r->SetRepeatedFloat(m, f, i, v) : r->SetFloat(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_DOUBLE: {
    double v = repeated ? r->GetRepeatedDouble(*m, f, i) : r->GetDouble(*m, f);
    v = interestingReal(rng, v);
    repeated ? r->SetRepeatedDouble(m, f, i, v) : r->SetDouble(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_BOOL:
    repeated ? r->SetRepeatedBool(m, f, i, !r->GetRepeatedBool(*m, f, i))
             : r->SetBool(m, f, !r->GetBool(*m, f));
    return;
  case FieldDescriptor::CPPTYPE_ENUM: {
    const auto *e = f->enum_type();
    int v = rng() % 8 == 0 ? interesting<int>(rng, 0)
                           : e->value(rng() % e->value_count())->number();
    repeated ? r->SetRepeatedEnumValue(m, f, i, v) : r->SetEnumValue(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_STRING: {
    std::string v = repeated ? r->GetRepeatedString(*m, f, i) : r->GetString(*m, f);
    bool bytes = f->type() == FieldDescriptor::TYPE_BYTES;
    unsigned choice = rng() % 4;
    if (bytes || choice == 0)
      v = mutateBytes(v, maxSize / 2);
    else if (choice == 1 && !names.empty())
      v = names[rng() % names.size()];
    else if (choice == 2)
      v = schemaNames()[rng() % schemaNames().size()];
    else
      v.clear();
    repeated ? r->SetRepeatedString(m, f, i, v) : r->SetString(m, f, v);
    return;
  }
  case FieldDescriptor::CPPTYPE_MESSAGE:
    // An absent singular message: create it (empty), or clear it.
    if (r->HasField(*m, f))
      r->ClearField(m, f);
    else
      r->MutableMessage(m, f);
    return;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  std::minstd_rand rng(seed);
  onnx::ModelProto model;
  if (rng() % 5 == 0 || !model.ParseFromArray(data, (int)size))
    return LLVMFuzzerMutate(data, size, maxSize);
  for (unsigned k = 0, n = 1 + rng() % 3; k < n; ++k) {
    // Collected again after each mutation: removing an element of a
    // repeated field frees the messages below it.
    std::vector<Site> sites;
    std::vector<std::string> names;
    collect(&model, sites, names, 0);
    if (sites.empty())
      return LLVMFuzzerMutate(data, size, maxSize);
    mutateSite(sites[rng() % sites.size()], rng, names, maxSize);
  }
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parallax::fuzz::compileOnnx(data, size);
  return 0;
}
