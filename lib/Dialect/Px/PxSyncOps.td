//===- PxSyncOps.td - px synchronization operations ----------*- tablegen -*-===//
//
// The vocabulary the synchronization passes insert. Every op names a
// `shard.grid` and the grid axes it acts over, with upstream shard semantics:
// the process group of a rank is every rank that shares its coordinates on
// the *other* axes, so on a Pr x Pc grid `grid_axes = [0]` is a column
// communicator and `grid_axes = [1]` a row communicator. An empty axis list
// means the whole grid. Reductions use shard's `#shard.partial<...>` kinds.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXSYNCOPS_TD
#define PARALLAX_DIALECT_PX_PXSYNCOPS_TD

include "PxAttrsAndTypes.td"
include "mlir/Dialect/Shard/IR/ShardBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Px_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Px_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  dag commonArgs = (ins FlatSymbolRefAttr:$grid,
                        DefaultValuedAttr<Shard_GridAxesAttr, "{}">:$grid_axes);
}

def Px_AllReduceOp : Px_CollectiveOp<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "Dense all-reduce of a gradient, optionally in a fusion bucket";
  let description = [{
    Every rank of the group receives the elementwise reduction of the group's
    inputs. Ops that share a `bucket` id are fused into one collective over a
    contiguous buffer, issued when the bucket's last member is ready (tensor
    fusion); buckets are numbered in issue order.

    ```mlir
    %g = px.all_reduce %dw on @world reduction = <average> bucket = 0 : tensor<256x256xf32>
    ```

    The layout passes add what the runtime needs to run a bucket without
    copies: `in_place` (px-bucket-in-place) lays the bucket's inputs out back
    to back in one buffer, this member at byte `offset`, and reduces that
    buffer where it lies, each result sharing its input's memory.
    `shard_update` (px-shard-weight-update) only reduce-scatters the bucket,
    padded to one block of `shard_bytes` per rank of the group: each rank
    gets the reduced block it updates, and `px.all_gather_variables` hands
    the updated blocks round.
  }];
  let arguments = !con(commonArgs, (ins Px_NumericTensor:$input,
      DefaultValuedAttr<Shard_ReductionKindAttr, "::mlir::shard::ReductionKind::Sum">:$reduction,
      OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$bucket,
      UnitAttr:$in_place,
      OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$offset,
      UnitAttr:$shard_update,
      OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$shard_bytes));
  let results = (outs Px_NumericTensor:$output);
  let hasVerifier = 1;
  // As px-sync builds it: the layout passes add the rest.
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::mlir::FlatSymbolRefAttr":$grid,
                   "::mlir::DenseI16ArrayAttr":$grid_axes, "::mlir::Value":$input,
                   "::mlir::shard::ReductionKindAttr":$reduction,
                   "::mlir::IntegerAttr":$bucket), [{
      build($_builder, $_state, type, grid, grid_axes, input, reduction, bucket,
            {}, {}, {}, {});
    }]>
  ];
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? (`reduction` `=` $reduction^)?
    (`bucket` `=` $bucket^)? attr-dict `:` type($input)
  }];
}

def Px_AllGatherVariablesOp : Px_CollectiveOp<"all_gather_variables",
    [MemoryEffects<[MemWrite]>]> {
  let summary = "Hand every rank the blocks of a sharded update's variables";
  let description = [{
    The second half of a sharded weight update (px-shard-weight-update):
    the variables of one all-reduce bucket share one block of
    `G * shard_bytes` bytes, each variable at its bucket offset `offsets[i]`,
    and rank r of the group has just updated bytes
    `[r * shard_bytes, (r + 1) * shard_bytes)` of it. After this op every
    rank holds every block. The block's order is the order of these ops.

    ```mlir
    px.all_gather_variables %w, %b on @world offsets = [0, 512] shard_bytes = 256 : tensor<8x16xf32>, tensor<8xf32>
    ```
  }];
  let arguments = !con(commonArgs, (ins Variadic<Px_FloatTensor>:$variables,
      DenseI64ArrayAttr:$offsets, ConfinedAttr<I64Attr, [IntPositive]>:$shard_bytes));
  let assemblyFormat = [{
    $variables `on` $grid (`grid_axes` `=` $grid_axes^)? `offsets` `=` $offsets
    `shard_bytes` `=` $shard_bytes attr-dict `:` type($variables)
  }];
  let hasVerifier = 1;
}

def Px_AllGatherOp : Px_CollectiveOp<"all_gather", [Pure]> {
  let summary = "Concatenate the group's tensors along `gather_axis`";
  let arguments = !con(commonArgs, (ins Px_AnyTensor:$input, I64Attr:$gather_axis));
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? `gather_axis` `=` $gather_axis
    attr-dict `:` type($input) `->` type($output)
  }];
}

def Px_ReduceScatterOp : Px_CollectiveOp<"reduce_scatter", [Pure]> {
  let summary = "Reduce the group's tensors, then give rank i the i-th slice along `scatter_axis`";
  let arguments = !con(commonArgs, (ins Px_NumericTensor:$input, I64Attr:$scatter_axis,
      DefaultValuedAttr<Shard_ReductionKindAttr, "::mlir::shard::ReductionKind::Sum">:$reduction));
  let results = (outs Px_NumericTensor:$output);
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? (`reduction` `=` $reduction^)?
    `scatter_axis` `=` $scatter_axis attr-dict `:` type($input) `->` type($output)
  }];
}

def Px_AllSliceOp : Px_CollectiveOp<"all_slice", [Pure]> {
  let summary = "Keep this rank's slice along `slice_axis` of a value the group shares";
  let description = [{
    Group rank i keeps the i-th of G equal slices of `input` along
    `slice_axis` (upstream `shard.all_slice`; no communication).

    ```mlir
    %s = px.all_slice %x on @world grid_axes = [1] slice_axis = 1 : tensor<8x10xf32> -> tensor<8x5xf32>
    ```
  }];
  let arguments = !con(commonArgs, (ins Px_AnyTensor:$input, I64Attr:$slice_axis));
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? `slice_axis` `=` $slice_axis
    attr-dict `:` type($input) `->` type($output)
  }];
}

def Px_AllToAllOp : Px_CollectiveOp<"all_to_all", [Pure]> {
  let summary = "Split along `split_axis`, exchange, concatenate along `concat_axis`";
  let arguments = !con(commonArgs, (ins Px_AnyTensor:$input, I64Attr:$split_axis,
                                        I64Attr:$concat_axis));
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? `split_axis` `=` $split_axis
    `concat_axis` `=` $concat_axis attr-dict `:` type($input) `->` type($output)
  }];
}

// Domain parallelism (SPAA'18): a tensor split along a spatial axis into
// consecutive blocks, block i on group member i. A convolution over such a
// block needs its neighbours' boundary rows: upstream shard.update_halo's
// semantics (halo_sizes [lo, hi] on the split axis), on a value, with the
// global edges zero (the convolution's zero padding), and with an adjoint.
def Px_HaloExchangeOp : Px_CollectiveOp<"halo_exchange", [Pure]> {
  let summary = "Extend this rank's block along `axis` with its neighbours' boundary rows";
  let description = [{
    Member i of the group returns, along `axis`: the last `lo` rows of
    member i-1's input (rows of `edge` on member 0), its own input, then the
    first `hi` rows of member i+1's input (rows of `edge` on the last
    member). `edge` is the padding of the op the block feeds: 0 for a
    convolution, -inf for a max pool. Both halos must fit in one block.
    Point-to-point with the two neighbours: bytes sent per rank are at most
    (lo + hi) rows.

    ```mlir
    %e = px.halo_exchange %x on @world grid_axes = [1] axis = 2 lo = 1 hi = 1 : tensor<4x8x16x32xf32> -> tensor<4x8x18x32xf32>
    ```
  }];
  let arguments = !con(commonArgs, (ins Px_FloatTensor:$input,
      ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
      ConfinedAttr<I64Attr, [IntNonNegative]>:$lo,
      ConfinedAttr<I64Attr, [IntNonNegative]>:$hi,
      DefaultValuedAttr<F64Attr, "0.0">:$edge));
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? `axis` `=` $axis `lo` `=` $lo
    `hi` `=` $hi (`edge` `=` $edge^)? attr-dict `:` type($input) `->` type($output)
  }];
}

def Px_HaloReduceOp : Px_CollectiveOp<"halo_reduce", [Pure]> {
  let summary = "The adjoint of px.halo_exchange: halo rows summed into the rows they copied";
  let description = [{
    The input is an extended block (`lo` halo rows, the block, `hi` halo
    rows along `axis`), as px.halo_exchange makes; the result is the block,
    to which are added member i+1's `lo` halo rows (into the last `lo` rows)
    and member i-1's `hi` halo rows (into the first `hi` rows). The halos of
    the group's edge members are dropped (they are the zero padding). A
    convolution's input gradient over an extended block becomes the block's.

    ```mlir
    %dx = px.halo_reduce %dxe on @world grid_axes = [1] axis = 2 lo = 1 hi = 1 : tensor<4x8x18x32xf32> -> tensor<4x8x16x32xf32>
    ```
  }];
  let arguments = !con(commonArgs, (ins Px_FloatTensor:$input,
      ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
      ConfinedAttr<I64Attr, [IntNonNegative]>:$lo,
      ConfinedAttr<I64Attr, [IntNonNegative]>:$hi));
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? `axis` `=` $axis `lo` `=` $lo
    `hi` `=` $hi attr-dict `:` type($input) `->` type($output)
  }];
}

def Px_AllGatherVOp : Px_CollectiveOp<"all_gatherv", [Pure]> {
  let summary = "Gather the group's sparse gradients (Horovod's sparse allreduce)";
  let description = [{
    Every rank receives the concatenation, in rank order, of the indices and
    rows of the group's sparse gradients: `G * rows` rows for a group of `G`.
    Bytes per rank per step: about alpha * w * (G - 1).
  }];
  let arguments = !con(commonArgs, (ins Px_SparseGrad:$input));
  let results = (outs Px_SparseGrad:$output);
  let assemblyFormat = [{
    $input `on` $grid (`grid_axes` `=` $grid_axes^)? attr-dict `:`
    qualified(type($input)) `->` qualified(type($output))
  }];
}

// Row partitioning shared by the parameter-server ops: a table of R rows in P
// partitions gives partition p the contiguous rows [p*ceil(R/P), (p+1)*ceil(R/P)),
// and `placement[p]` is the rank (in the group) of the server that owns it.
class Px_ParameterServerOp<string mnemonic, list<Trait> traits = []>
    : Px_CollectiveOp<mnemonic, traits> {
  dag partitionArgs = (ins ConfinedAttr<I64Attr, [IntPositive]>:$partitions,
                           DenseI64ArrayAttr:$placement);
}

def Px_PsPullOp : Px_ParameterServerOp<"ps_pull", [Pure]> {
  let summary = "Pull rows of a row-partitioned variable from their servers";
  let description = [{
    Returns `table[ids]` (as `px.gather` on axis 0) where `table` is the
    variable's value held, partition by partition, by the servers in
    `placement`. Each rank requests each distinct row once.

    With `block of` the axes of `block_axes`, `table` is this rank's block
    of rows of a table split over those axes (a vocabulary-parallel table,
    as `px.gather ... block of` reads it): `ids` name rows of the whole
    table, those in the block are pulled from the block's servers (over
    `grid_axes`) and the others read as zeros, so that the model axis's
    all-reduce of the partial lookups completes them.

    ```mlir
    %rows = px.ps_pull %emb[%ids] on @world grid_axes = [0] partitions = 2 placement = [0, 1] block of block_axes = [1] : tensor<500x16xf32>, tensor<64xi64> -> tensor<64x16xf32>
    ```
  }];
  let arguments = !con(commonArgs, partitionArgs,
                       (ins Px_FloatTensor:$table, Px_IndexTensor:$ids,
                        OptionalAttr<Shard_GridAxesAttr>:$block_axes));
  let results = (outs Px_FloatTensor:$rows);
  let assemblyFormat = [{
    $table `[` $ids `]` `on` $grid (`grid_axes` `=` $grid_axes^)?
    `partitions` `=` $partitions `placement` `=` $placement
    (`block` `of` `block_axes` `=` $block_axes^)? attr-dict
    `:` type($table) `,` type($ids) `->` type($rows)
  }];
}

def Px_PsPushOp : Px_ParameterServerOp<"ps_push", [Pure]> {
  let summary = "Push a sparse gradient to the servers of its rows";
  let description = [{
    Sends each row of `grad` to the server owning it. With
    `local_aggregation`, the gradients of the ranks of one machine are summed
    on that machine first, so a server receives one push per machine. The
    result, on every rank, is the summed gradient of the rows this rank
    serves, in a fixed capacity of `G * rows` slots whose unused slots have
    index -1; a rank that serves no partition gets only unused slots.
  }];
  let arguments = !con(commonArgs, partitionArgs,
                       (ins Px_SparseGrad:$grad, UnitAttr:$local_aggregation));
  let results = (outs Px_SparseGrad:$served);
  let assemblyFormat = [{
    $grad `on` $grid (`grid_axes` `=` $grid_axes^)?
    `partitions` `=` $partitions `placement` `=` $placement
    (`local_aggregation` $local_aggregation^)? attr-dict
    `:` qualified(type($grad)) `->` qualified(type($served))
  }];
}

#endif // PARALLAX_DIALECT_PX_PXSYNCOPS_TD
