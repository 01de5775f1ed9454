//===- HostStaged.cpp - a CPU kernel run over host copies of device tensors ===//

#include "HostStaged.h"
#include "Kernels/CollectiveLayout.h"

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Device.h"
#include "parallax/Runtime/Grid.h"

#include <algorithm>
#include <memory>
#include <optional>

namespace parallax::rt {

namespace {

/// One contiguous device range and its host copy.
struct Span {
  char *device = nullptr;
  int64_t bytes = 0;
  std::shared_ptr<Buffer> host;
  /// The outputs' [offset, end) within the span, in order and disjoint:
  /// what goes back after an asynchronous kernel (an input merged into the
  /// span may be another tensor's memory by then).
  std::vector<std::pair<int64_t, int64_t>> outputs;
};

/// The spans covering `views` (overlapping ranges merged) and each view's
/// place in them.
std::vector<Span> spansOf(const Device &device, std::vector<TensorView *> &views,
                          std::vector<bool> isOutput) {
  struct Range {
    char *begin;
    int64_t bytes;
    size_t view;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < views.size(); ++i)
    if (views[i]->data)
      ranges.push_back({static_cast<char *>(views[i]->data),
                        std::max<int64_t>(views[i]->bytes(), 1), i});
  std::sort(ranges.begin(), ranges.end(),
            [](const Range &a, const Range &b) { return a.begin < b.begin; });
  std::vector<Span> spans;
  std::vector<std::pair<size_t, int64_t>> placeOf(views.size(), {0, -1});
  for (const Range &r : ranges) {
    // Tensors less than an alignment apart in one allocation share a span
    // too: a bucket's tensors, which an in-place all_reduce wants back to
    // back in one buffer, are laid out at aligned offsets (the gap is
    // padding). Separate allocations can lie that close as well (two small
    // variables), but a copy cannot cross from one into the other.
    bool apart = spans.empty() ||
                 r.begin >= spans.back().device + spans.back().bytes + kPlanAlignment ||
                 (r.begin >= spans.back().device + spans.back().bytes &&
                  device.allocationOf(r.begin) != device.allocationOf(spans.back().device));
    if (apart)
      spans.push_back({r.begin, r.bytes, nullptr, {}});
    else
      spans.back().bytes =
          std::max<int64_t>(spans.back().bytes, r.begin + r.bytes - spans.back().device);
    placeOf[r.view] = {spans.size() - 1, r.begin - spans.back().device};
    if (isOutput[r.view]) {
      int64_t from = r.begin - spans.back().device, to = from + r.bytes;
      auto &outs = spans.back().outputs;
      if (!outs.empty() && from <= outs.back().second)
        outs.back().second = std::max(outs.back().second, to);
      else
        outs.push_back({from, to});
    }
  }
  for (Span &s : spans)
    s.host = std::make_shared<Buffer>(s.bytes);
  for (size_t i = 0; i < views.size(); ++i)
    if (placeOf[i].second >= 0) {
      views[i]->data = static_cast<char *>(spans[placeOf[i].first].host->data()) +
                       placeOf[i].second;
      views[i]->space = MemorySpace::Host;
    }
  return spans;
}

/// A sharded bucket's collectives (an all_reduce's reduce-scatter,
/// all_gather_variables) work on G blocks of shard_bytes from the bucket's
/// start, the padding past its last tensor included: the bytes the staged
/// copy must cover besides the tensors, or none.
std::optional<TensorView> shardedBlockOf(KernelArgs &args) {
  int64_t shard = args.i64Or("shard_bytes", 0);
  if (shard <= 0 || args.ins.empty() || !args.in(0).data)
    return std::nullopt;
  int g = (int)kernelGridOf(args.kernel.attrs, args.env.worldSize).groupSize();
  char *start = args.kernel.op == "all_gather_variables" ? variableBlockOf(args, g).block
                                                         : bucketLayoutOf(args, g).bucket;
  if (!start)
    return std::nullopt;
  return TensorView{start, DType::U8, {g * shard}, args.in(0).space};
}

} // namespace

KernelFactory hostStaged(KernelFactory cpuFactory) {
  return [cpuFactory](KernelArgs &args) -> KernelFn {
    Device *device = args.env.device;
    if (!device || device->space() == MemorySpace::Host)
      return cpuFactory(args);
    std::vector<TensorView> ins = args.ins, outs = args.outs;
    std::vector<TensorView *> views;
    std::vector<bool> isOutput;
    for (TensorView &t : ins) {
      views.push_back(&t);
      isOutput.push_back(false);
    }
    for (TensorView &t : outs) {
      views.push_back(&t);
      isOutput.push_back(true);
    }
    std::optional<TensorView> block = shardedBlockOf(args);
    if (block) {
      views.push_back(&*block);
      isOutput.push_back(true);
    }
    auto spans = std::make_shared<std::vector<Span>>(spansOf(*device, views, isOutput));
    KernelArgs hostArgs(args.kernel, ins, outs, args.env);
    hostArgs.index = args.index;
    KernelFn run = cpuFactory(hostArgs);
    int64_t token = args.i64Or("token", -1);
    auto upload = [device, spans](bool outputsOnly) {
      for (const Span &s : *spans) {
        if (!outputsOnly) {
          device->upload(s.device, s.host->data(), s.bytes);
          continue;
        }
        for (auto [from, to] : s.outputs)
          device->upload(s.device + from, static_cast<char *>(s.host->data()) + from, to - from);
      }
    };
    ExecEnv *env = &args.env;
    return [device, spans, run, token, upload, env] {
      device->synchronize();
      for (const Span &s : *spans)
        device->download(s.host->data(), s.device, s.bytes);
      run();
      if (token >= 0) {
        // Later kernels may reuse the inputs' memory before the wait: only
        // the outputs go back, when the token's wait kernel has waited.
        std::shared_ptr<Work> &work = env->pending.at(token);
        if (work)
          work = thenRun(std::move(work), [upload] { upload(true); });
        return;
      }
      // CPU kernels may update their inputs in place (optimizers): all of
      // it goes back.
      upload(false);
    };
  };
}

} // namespace parallax::rt
