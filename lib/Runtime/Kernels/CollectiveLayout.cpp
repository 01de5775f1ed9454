//===- CollectiveLayout.cpp - collective kernels' bind-time checks --------===//

#include "CollectiveLayout.h"
#include "KernelUtil.h"

#include "parallax/Runtime/Plan.h"

#include <algorithm>
#include <cstring>

namespace parallax::rt {

ReduceOp reduceOpOf(KernelArgs &args) {
  std::string kind = args.strOr("reduction", "sum");
  if (kind == "sum") return ReduceOp::Sum;
  if (kind == "average") return ReduceOp::Average;
  if (kind == "max") return ReduceOp::Max;
  if (kind == "min") return ReduceOp::Min;
  args.fail("unsupported reduction '" + kind + "'");
}

std::vector<std::string> variablesOf(KernelArgs &args, size_t n) {
  std::vector<std::string> names;
  if (args.has("variables"))
    names = args.kernel.attrs["variables"].get<std::vector<std::string>>();
  names.resize(n, names.empty() ? "(other)" : names.back());
  return names;
}

int64_t tokenOf(KernelArgs &args) {
  int64_t token = args.i64Or("token", -1);
  if (token >= (int64_t)args.env.pending.size())
    args.fail("token " + std::to_string(token) + " out of range");
  return token;
}

BucketLayout bucketLayoutOf(KernelArgs &args, int groupSize) {
  if (args.ins.empty() || args.ins.size() != args.outs.size())
    args.fail("all_reduce needs as many outputs as inputs");
  BucketLayout b;
  b.dtype = args.in(0).dtype;
  b.inPlace = args.flag("in_place");
  for (size_t i = 0; i < args.ins.size(); ++i) {
    if (args.in(i).dtype != b.dtype || args.out(i).dtype != b.dtype ||
        args.in(i).shape != args.out(i).shape)
      args.fail("a fused all_reduce needs tensors of one element type, each "
                "output shaped as its input");
    b.offsets.push_back(b.totalBytes);
    int64_t bytes = args.in(i).bytes();
    // In place: the plan emitter's layout, each tensor at an aligned offset.
    b.totalBytes += b.inPlace ? alignToPlan(std::max<int64_t>(bytes, 1)) : bytes;
  }
  b.bucket = b.inPlace ? static_cast<char *>(args.in(0).data) : nullptr;
  for (size_t i = 0; b.inPlace && i < args.ins.size(); ++i)
    if (args.in(i).data != b.bucket + b.offsets[i] || args.out(i).data != args.in(i).data)
      args.fail("an in_place all_reduce needs its tensors back to back in one "
                "buffer, each output the memory of its input (tensor " +
                std::to_string(i) + " is not)");
  if (args.flag("shard_update")) {
    int64_t shard = args.i64("shard_bytes");
    int64_t eb = (int64_t)sizeOf(b.dtype);
    if (!b.inPlace || shard <= 0 || shard % eb != 0 || shard * groupSize < b.totalBytes)
      args.fail("shard_update needs an in_place bucket split into " +
                std::to_string(groupSize) + " blocks of whole elements covering its " +
                std::to_string(b.totalBytes) + " bytes, got shard_bytes " +
                std::to_string(shard));
    b.shardBytes = shard;
  }
  return b;
}

VariableBlockLayout variableBlockOf(KernelArgs &args, int groupSize) {
  if (args.ins.empty() || !args.outs.empty())
    args.fail("all_gather_variables takes the variables of one block and has "
              "no outputs");
  auto offsets = args.i64s("offsets");
  VariableBlockLayout v;
  v.shardBytes = args.i64("shard_bytes");
  if (offsets.size() != args.ins.size() || offsets[0] != 0 || args.in(0).bytes() == 0)
    args.fail("all_gather_variables needs one offset per variable, the first 0 "
              "and its variable not empty (its address is the block's)");
  v.block = static_cast<char *>(args.in(0).data);
  int64_t end = 0;
  for (size_t i = 0; i < args.ins.size(); ++i) {
    if (args.in(i).bytes() > 0 && args.in(i).data != v.block + offsets[i])
      args.fail("all_gather_variables: variable " + std::to_string(i) +
                " is not at offset " + std::to_string(offsets[i]) +
                " of the first one's block");
    end = std::max(end, offsets[i] + args.in(i).bytes());
    v.bytes.push_back(args.in(i).bytes());
  }
  if (v.shardBytes <= 0 || v.shardBytes * groupSize < end)
    args.fail("all_gather_variables: " + std::to_string(groupSize) + " blocks of " +
              std::to_string(v.shardBytes) + " bytes do not cover " +
              std::to_string(end) + " bytes of variables");
  return v;
}

namespace {

/// x's slices before the axis that `attr` names (which must split into
/// `parts`), of `perMember`'s bytes each.
AxisSlices slicesAlong(KernelArgs &args, const char *attr, int parts,
                       const TensorView &perMember) {
  const TensorView &x = args.in(0);
  int64_t axis = args.i64(attr);
  if (axis < 0 || axis >= x.rank() || x.dim(axis) % parts != 0)
    args.fail(std::string(attr) + (parts > 1 ? " out of range or not divisible by the group"
                                             : " out of range"));
  AxisSlices s;
  for (int64_t d = 0; d < axis; ++d)
    s.outer *= x.dim(d);
  s.inner = perMember.bytes() / std::max<int64_t>(s.outer, 1);
  return s;
}

} // namespace

AxisSlices allGatherSlicesOf(KernelArgs &args) {
  return slicesAlong(args, "gather_axis", 1, args.in(0));
}

AxisSlices reduceScatterSlicesOf(KernelArgs &args, int groupSize) {
  return slicesAlong(args, "scatter_axis", groupSize, args.out(0));
}

AxisSlices allSliceSlicesOf(KernelArgs &args, int groupSize) {
  return slicesAlong(args, "slice_axis", groupSize, args.out(0));
}

void copyOnHost(const PitchedCopy &c, char *dst, const char *src) {
  if (c.width <= 0)
    return;
  for (int64_t r = 0; r < c.rows; ++r)
    std::memcpy(dst + c.dstOffset + r * c.dstPitch, src + c.srcOffset + r * c.srcPitch,
                c.width);
}

std::vector<PitchedCopy> allGatherPlacement(const AxisSlices &s, int groupSize,
                                            int64_t blockBytes) {
  std::vector<PitchedCopy> copies;
  for (int r = 0; r < groupSize; ++r)
    copies.push_back({r * s.inner, groupSize * s.inner, r * blockBytes, s.inner, s.inner,
                      s.outer});
  return copies;
}

PitchedCopy reduceScatterSlice(const AxisSlices &s, int groupSize, int rank) {
  return {0, s.inner, rank * s.inner, groupSize * s.inner, s.inner, s.outer};
}

std::vector<PitchedCopy> reduceScatterPacking(const AxisSlices &s, int groupSize) {
  std::vector<PitchedCopy> copies;
  for (int r = 0; r < groupSize; ++r) {
    PitchedCopy c = reduceScatterSlice(s, groupSize, r);
    c.dstOffset = r * s.outer * s.inner;
    copies.push_back(c);
  }
  return copies;
}

std::pair<PitchedCopy, PitchedCopy> allGatherVSplit(int64_t indexBytes, int64_t rowBytes,
                                                    int groupSize) {
  int64_t block = indexBytes + rowBytes;
  return {{0, indexBytes, 0, block, indexBytes, groupSize},
          {0, rowBytes, indexBytes, block, rowBytes, groupSize}};
}

AllToAllLayout allToAllLayoutOf(KernelArgs &args, int groupSize) {
  const TensorView &x = args.in(0);
  int64_t split = args.i64("split_axis"), concat = args.i64("concat_axis");
  if (split < 0 || split >= x.rank() || concat < 0 || concat >= x.rank() ||
      x.dim(split) % groupSize != 0)
    args.fail("split/concat axis out of range or not divisible by the group");
  std::vector<int64_t> piece = x.shape;
  piece[split] /= groupSize;
  // A piece as [outer][rows along `axis`][inner bytes].
  auto rowBytes = [&](int64_t axis, int64_t &outer) {
    int64_t inner = (int64_t)sizeOf(x.dtype);
    outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= piece[d];
    for (size_t d = axis + 1; d < piece.size(); ++d)
      inner *= piece[d];
    return piece[axis] * inner;
  };
  int64_t sOuter, cOuter;
  int64_t sRow = rowBytes(split, sOuter), cRow = rowBytes(concat, cOuter);
  AllToAllLayout l;
  l.pieceBytes = x.bytes() / groupSize;
  for (int i = 0; i < groupSize; ++i) {
    l.pack.push_back({i * l.pieceBytes, sRow, i * sRow, groupSize * sRow, sRow, sOuter});
    l.unpack.push_back({i * cRow, groupSize * cRow, i * l.pieceBytes, cRow, cRow, cOuter});
  }
  return l;
}

void fillOnHost(const PitchedCopy &c, char *dst, double value, DType dtype) {
  auto run = [&](auto v) {
    using T = decltype(v);
    int64_t n = c.width / (int64_t)sizeof(T);
    for (int64_t r = 0; r < c.rows; ++r) {
      T *d = reinterpret_cast<T *>(dst + c.dstOffset + r * c.dstPitch);
      std::fill(d, d + n, v);
    }
  };
  if (dtype == DType::F64)
    run(value);
  else
    run((float)value);
}

void addOnHost(const PitchedCopy &c, char *dst, const char *src, DType dtype) {
  auto run = [&](auto zero) {
    using T = decltype(zero);
    int64_t n = c.width / (int64_t)sizeof(T);
    for (int64_t r = 0; r < c.rows; ++r) {
      T *d = reinterpret_cast<T *>(dst + c.dstOffset + r * c.dstPitch);
      const T *s = reinterpret_cast<const T *>(src + c.srcOffset + r * c.srcPitch);
      for (int64_t k = 0; k < n; ++k)
        d[k] += s[k];
    }
  };
  if (dtype == DType::F64)
    run(0.0);
  else
    run(0.0f);
}

std::vector<PeerTransfer> HaloLayout::transfers(const void *send, void *recv) const {
  std::vector<PeerTransfer> t;
  for (const Peer *p : {&prev, &next})
    if (p->rank >= 0 && (p->sendBytes > 0 || p->recvBytes > 0))
      t.push_back({p->rank, static_cast<const char *>(send) + p->sendOffset, p->sendBytes,
                   static_cast<char *>(recv) + p->recvOffset, p->recvBytes});
  return t;
}

HaloLayout haloLayoutOf(KernelArgs &args, int groupSize, int member) {
  HaloLayout l;
  l.reduce = args.kernel.op == "halo_reduce";
  if (args.ins.size() != 1 || args.outs.size() != 1)
    args.fail(args.kernel.op + " takes one tensor and returns one");
  const TensorView &x = args.in(0), &y = args.out(0);
  // The block (S rows along the axis) and the extended block (lo + S + hi).
  const TensorView &block = l.reduce ? y : x, &extended = l.reduce ? x : y;
  l.dtype = x.dtype;
  if ((x.dtype != DType::F32 && x.dtype != DType::F64) || y.dtype != x.dtype)
    args.fail(args.kernel.op + " supports f32 and f64 tensors, its output of its input's type");
  int64_t axis = args.i64("axis"), lo = args.i64("lo"), hi = args.i64("hi");
  l.edge = args.f64Or("edge", 0.0);
  if (axis < 0 || axis >= x.rank())
    args.fail("axis " + std::to_string(axis) + " is out of range for rank " +
              std::to_string(x.rank()));
  if (lo < 0 || hi < 0)
    args.fail("halos must not be negative, got lo " + std::to_string(lo) + " and hi " +
              std::to_string(hi));
  if (y.rank() != x.rank())
    args.fail(args.kernel.op + "'s output must have its input's rank");
  int64_t rows = block.dim(axis);
  std::vector<int64_t> want = block.shape;
  want[axis] = lo + rows + hi;
  if (extended.shape != want)
    args.fail("the extended block must be " + detail::shapeStr(want) + " (" +
              std::to_string(lo) + " + " + std::to_string(rows) + " + " + std::to_string(hi) +
              " rows along axis " + std::to_string(axis) + "), got " +
              detail::shapeStr(extended.shape));
  if (lo > rows || hi > rows)
    args.fail("halos of " + std::to_string(lo) + " and " + std::to_string(hi) +
              " rows exceed the block's " + std::to_string(rows) + " rows along axis " +
              std::to_string(axis));
  int64_t outer = 1, rb = (int64_t)sizeOf(x.dtype);
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    rb *= x.dim(d);
  const int64_t S = rows, E = lo + rows + hi;
  l.loBytes = outer * lo * rb;
  l.hiBytes = outer * hi * rb;
  // Rows to and from each neighbour: the exchange sends hi rows to m-1 and
  // lo rows to m+1; the reduce the other way.
  int64_t toPrev = l.reduce ? lo : hi, toNext = l.reduce ? hi : lo;
  int64_t fromPrev = l.reduce ? hi : lo, fromNext = l.reduce ? lo : hi;
  if (member > 0) {
    l.prev.rank = member - 1;
    l.prev.sendBytes = outer * toPrev * rb;
    l.prev.recvBytes = outer * fromPrev * rb;
  }
  if (member + 1 < groupSize) {
    l.next.rank = member + 1;
    l.next.sendOffset = l.prev.sendBytes;
    l.next.sendBytes = outer * toNext * rb;
    l.next.recvOffset = l.prev.recvBytes;
    l.next.recvBytes = outer * fromNext * rb;
  }
  l.sendBytes = l.prev.sendBytes + l.next.sendBytes;
  l.recvBytes = l.prev.recvBytes + l.next.recvBytes;
  // Row r of the block is row lo + r of the extended block.
  const int64_t bp = S * rb, ep = E * rb;
  auto slab = [&](int64_t n) { return n * rb; };
  if (!l.reduce) {
    if (l.prev.sendBytes > 0) // x's first hi rows
      l.pack.push_back({l.prev.sendOffset, slab(hi), 0, bp, slab(hi), outer});
    if (l.next.sendBytes > 0) // x's last lo rows
      l.pack.push_back({l.next.sendOffset, slab(lo), slab(S - lo), bp, slab(lo), outer});
    l.body = {slab(lo), ep, 0, bp, bp, outer};
    if (l.prev.recvBytes > 0) // m-1's last lo rows, first
      l.unpack.push_back({0, ep, l.prev.recvOffset, slab(lo), slab(lo), outer});
    if (l.next.recvBytes > 0) // m+1's first hi rows, last
      l.unpack.push_back({slab(lo + S), ep, l.next.recvOffset, slab(hi), slab(hi), outer});
    if (l.prev.rank < 0 && lo > 0)
      l.fill.push_back({0, ep, 0, 0, slab(lo), outer});
    if (l.next.rank < 0 && hi > 0)
      l.fill.push_back({slab(lo + S), ep, 0, 0, slab(hi), outer});
  } else {
    if (l.prev.sendBytes > 0) // the lo halo
      l.pack.push_back({l.prev.sendOffset, slab(lo), 0, ep, slab(lo), outer});
    if (l.next.sendBytes > 0) // the hi halo
      l.pack.push_back({l.next.sendOffset, slab(hi), slab(lo + S), ep, slab(hi), outer});
    l.body = {0, bp, slab(lo), ep, bp, outer};
    if (l.prev.recvBytes > 0) // m-1's hi halo onto the first hi rows
      l.unpack.push_back({0, bp, l.prev.recvOffset, slab(hi), slab(hi), outer});
    if (l.next.recvBytes > 0) // m+1's lo halo onto the last lo rows
      l.unpack.push_back({slab(S - lo), bp, l.next.recvOffset, slab(lo), slab(lo), outer});
  }
  return l;
}

Group &batchNormGroup(KernelArgs &args) {
  if (!args.env.comm)
    args.fail("a synchronized batch norm needs a communicator");
  return collectiveGroup(args);
}

void checkAllGatherV(KernelArgs &args, int groupSize) {
  if (args.out(0).numElements() != args.in(0).numElements() * groupSize)
    args.fail("all_gatherv output must hold the rows of every rank");
}

} // namespace parallax::rt
