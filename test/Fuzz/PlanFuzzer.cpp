//===- PlanFuzzer.cpp - libFuzzer: bytes -> Plan -> session binding -------===//
//
// Run through scripts/fuzz.sh; docs/testing.md says how the corpus is
// seeded and what counts as a bug.
//
// Inputs are mostly a plan's JSON program (see FuzzTargets.h). Most
// mutations are made on the parsed JSON: a number gets an interesting value
// or another number of the plan (a tensor id, a size), a string another
// string of the plan or a kernel name, an array or object gains, loses or
// duplicates an element. The rest are libFuzzer's byte mutations.
//
//===----------------------------------------------------------------------===//

#include "FuzzTargets.h"

#include "parallax/Runtime/Kernel.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <random>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using json = nlohmann::json;

void collect(json &j, std::vector<json *> &nodes, std::vector<json> &scalars) {
  nodes.push_back(&j);
  if (j.is_structured()) {
    for (auto &child : j)
      collect(child, nodes, scalars);
  } else {
    scalars.push_back(j);
  }
}

json interesting(std::minstd_rand &rng, const json &old,
                 const std::vector<json> &scalars) {
  const int64_t values[] = {0,  -1, 1, 2,  3,  63, 64, 65, 4096, INT32_MAX,
                            int64_t(1) << 31, int64_t(1) << 40, int64_t(1) << 50,
                            INT64_MAX, INT64_MIN};
  switch (rng() % 5) {
  case 0:
    return scalars[rng() % scalars.size()];
  case 1:
    if (old.is_number_integer()) // wrapping, as unsigned arithmetic does
      return (int64_t)((uint64_t)old.get<int64_t>() + 1);
    [[fallthrough]];
  case 2:
    if (old.is_number_integer())
      return (int64_t)((uint64_t)old.get<int64_t>() - 1);
    [[fallthrough]];
  default:
    return values[rng() % (sizeof(values) / sizeof(values[0]))];
  }
}

void mutate(json &j, std::minstd_rand &rng, const std::vector<json> &scalars) {
  static const std::vector<std::string> ops = [] {
    parallax::rt::KernelRegistry r;
    parallax::rt::registerAllKernels(r);
    return r.ops();
  }();
  if (j.is_array() || j.is_object()) {
    size_t n = j.size();
    switch (n == 0 ? 0 : rng() % 3) {
    case 0: {
      json added = n ? *std::next(j.begin(), rng() % n) : interesting(rng, 0, scalars);
      if (j.is_array())
        j.push_back(added);
      else {
        const json &key = scalars[rng() % scalars.size()];
        j[key.is_string() ? key.get<std::string>() : key.dump()] = added;
      }
      return;
    }
    case 1:
      if (j.is_array())
        j.erase(rng() % n);
      else
        j.erase(std::next(j.begin(), rng() % n).key());
      return;
    default:
      if (j.is_array())
        std::swap(j[rng() % n], j[rng() % n]);
      else
        j.erase(std::next(j.begin(), rng() % n).key());
      return;
    }
  }
  if (j.is_string()) {
    switch (rng() % 3) {
    case 0: j = ops[rng() % ops.size()]; return;
    case 1: j = scalars[rng() % scalars.size()]; return;
    default: j = interesting(rng, j, scalars); return;
    }
  }
  if (j.is_boolean()) {
    j = !j.get<bool>();
    return;
  }
  j = interesting(rng, j, scalars);
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  std::minstd_rand rng(seed);
  std::string bytes(reinterpret_cast<const char *>(data), size);
  size_t nul = bytes.find('\0');
  std::string program = bytes.substr(0, nul);
  std::string rest = nul == std::string::npos ? "" : bytes.substr(nul);
  json j = json::parse(program, nullptr, /*allow_exceptions=*/false);
  if (rng() % 5 == 0 || j.is_discarded())
    return LLVMFuzzerMutate(data, size, maxSize);
  for (unsigned k = 0, n = 1 + rng() % 3; k < n; ++k) {
    std::vector<json *> nodes;
    std::vector<json> scalars;
    collect(j, nodes, scalars);
    if (scalars.empty())
      return LLVMFuzzerMutate(data, size, maxSize);
    // Half the time a kernel's attributes or operands: what binding checks,
    // and a small part of a program that is mostly its tensor table.
    std::vector<json *> kernelParts;
    std::vector<json> ignoredScalars;
    if (j.is_object() && j.contains("kernels") && j["kernels"].is_array())
      for (json &kernel : j["kernels"])
        if (kernel.is_object())
          for (const char *part : {"attrs", "in", "out"})
            if (kernel.contains(part))
              collect(kernel[part], kernelParts, ignoredScalars);
    json *target = !kernelParts.empty() && rng() % 2
                       ? kernelParts[rng() % kernelParts.size()]
                       : nodes[rng() % nodes.size()];
    mutate(*target, rng, scalars);
  }
  std::string out = j.dump(-1, ' ', false, json::error_handler_t::replace) + rest;
  if (out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parallax::fuzz::bindPlan(data, size);
  return 0;
}
