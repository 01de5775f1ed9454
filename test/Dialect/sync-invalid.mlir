// Verification of the px synchronization ops against the shard.grid they
// name (verifySymbolUses): grid, axes, result shapes, partitioning.
// RUN: parallax-opt %s --split-input-file --verify-diagnostics

func.func @grid_not_found(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op grid @nowhere is not a shard.grid}}
  %0 = px.all_reduce %x on @nowhere : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @not_a_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op grid @not_a_grid is not a shard.grid}}
  %0 = px.all_reduce %x on @not_a_grid : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x2)
func.func @axis_out_of_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op grid axis 2 is out of range for grid @g of rank 2}}
  %0 = px.all_reduce %x on @g grid_axes = [2] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2x2)
func.func @negative_axis(%x: tensor<4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'px.all_gather' op grid axis -1 is out of range for grid @g of rank 2}}
  %0 = px.all_gather %x on @g grid_axes = [-1] gather_axis = 0 : tensor<4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
func.func @axis_repeats(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.reduce_scatter' op grid axis 1 repeats}}
  %0 = px.reduce_scatter %x on @g grid_axes = [1, 1] scatter_axis = 0 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @d(shape = 2x?)
func.func @dynamic_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op grid @d must have a static shape}}
  %0 = px.all_reduce %x on @d : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @d(shape = 3x?)
func.func @dynamic_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_to_all' op grid @d must have a static shape}}
  %0 = px.all_to_all %x on @d grid_axes = [1] split_axis = 0 concat_axis = 0 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @z(shape = 0)
func.func @empty_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op grid @z has an empty axis}}
  %0 = px.all_reduce %x on @z : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Every axis of the grid must be static, not only the group's: ranks are
// numbered over all of them (and the group helpers of Grid.h refuse such a
// grid).
shard.grid @d(shape = 2x?)
func.func @dynamic_other_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op grid @d must have a static shape}}
  %0 = px.all_reduce %x on @d grid_axes = [0] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_reduce_result_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'px.all_reduce' op requires the same type for all operands and results}}
  %0 = "px.all_reduce"(%x) {grid = @world} : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

shard.grid @world(shape = 4)
func.func @all_reduce_negative_bucket(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'px.all_reduce' op attribute 'bucket' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = px.all_reduce %x on @world bucket = -1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_reduce_bool(%x: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'px.all_reduce' op operand #0 must be statically shaped tensor}}
  %0 = px.all_reduce %x on @world : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

shard.grid @world(shape = 4)
func.func @all_reduce_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{expected ::mlir::shard::ReductionKind to be one of: sum, max, min, product, average, bitwise_and, bitwise_or, bitwise_xor, generic}}
  // expected-error @+1 {{failed to parse Shard_ReductionKindAttr parameter 'value'}}
  %0 = px.all_reduce %x on @world reduction = mean : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_gather_shape(%x: tensor<3x5xf32>) -> tensor<3x20xf32> {
  // expected-error @+1 {{'px.all_gather' op result shape must be 12x5 for a group of 4 ranks, got 3x20}}
  %0 = px.all_gather %x on @world gather_axis = 0 : tensor<3x5xf32> -> tensor<3x20xf32>
  return %0 : tensor<3x20xf32>
}

// -----

shard.grid @g(shape = 2x2)
func.func @all_gather_group(%x: tensor<3x5xf32>) -> tensor<12x5xf32> {
  // A column communicator of the 2x2 grid has 2 ranks, not 4.
  // expected-error @+1 {{'px.all_gather' op result shape must be 6x5 for a group of 2 ranks, got 12x5}}
  %0 = px.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<3x5xf32> -> tensor<12x5xf32>
  return %0 : tensor<12x5xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_gather_element_type(%x: tensor<3x5xf32>) -> tensor<12x5xf16> {
  // expected-error @+1 {{'px.all_gather' op result must keep the element type}}
  %0 = px.all_gather %x on @world gather_axis = 0 : tensor<3x5xf32> -> tensor<12x5xf16>
  return %0 : tensor<12x5xf16>
}

// -----

shard.grid @world(shape = 4)
func.func @all_gather_axis(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'px.all_gather' op axis 2 is out of range for rank 2}}
  %0 = px.all_gather %x on @world gather_axis = 2 : tensor<3x5xf32> -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_gather_negative_axis(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'px.all_gather' op axis -1 is out of range for rank 2}}
  %0 = px.all_gather %x on @world gather_axis = -1 : tensor<3x5xf32> -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @reduce_scatter_divide(%x: tensor<6x5xf32>) -> tensor<6x5xf32> {
  // expected-error @+1 {{'px.reduce_scatter' op dimension 0 of size 6 does not divide among 4 ranks}}
  %0 = px.reduce_scatter %x on @world scatter_axis = 0 : tensor<6x5xf32> -> tensor<6x5xf32>
  return %0 : tensor<6x5xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @reduce_scatter_shape(%x: tensor<8x5xf32>) -> tensor<8x5xf32> {
  // expected-error @+1 {{'px.reduce_scatter' op result shape must be 2x5 for a group of 4 ranks, got 8x5}}
  %0 = px.reduce_scatter %x on @world scatter_axis = 0 : tensor<8x5xf32> -> tensor<8x5xf32>
  return %0 : tensor<8x5xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @reduce_scatter_axis(%x: tensor<8x5xf32>) -> tensor<8x5xf32> {
  // expected-error @+1 {{'px.reduce_scatter' op axis -2 is out of range for rank 2}}
  %0 = px.reduce_scatter %x on @world scatter_axis = -2 : tensor<8x5xf32> -> tensor<8x5xf32>
  return %0 : tensor<8x5xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @reduce_scatter_element_type(%x: tensor<8xi32>) -> tensor<2xi64> {
  // expected-error @+1 {{'px.reduce_scatter' op result must keep the element type}}
  %0 = px.reduce_scatter %x on @world scatter_axis = 0 : tensor<8xi32> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

shard.grid @world(shape = 4)
func.func @all_to_all_shape(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'px.all_to_all' op result shape must be 2x24 for a group of 4 ranks, got 8x6}}
  %0 = px.all_to_all %x on @world split_axis = 0 concat_axis = 1 : tensor<8x6xf32> -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_to_all_divide(%x: tensor<8x6xf32>) -> tensor<32x1xf32> {
  // expected-error @+1 {{'px.all_to_all' op dimension 1 of size 6 does not divide among 4 ranks}}
  %0 = px.all_to_all %x on @world split_axis = 1 concat_axis = 0 : tensor<8x6xf32> -> tensor<32x1xf32>
  return %0 : tensor<32x1xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_to_all_same_axis_divide(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // Splitting and concatenating along one axis keeps the shape, but the axis
  // must still split among the ranks.
  // expected-error @+1 {{'px.all_to_all' op dimension 1 of size 6 does not divide among 4 ranks}}
  %0 = px.all_to_all %x on @world split_axis = 1 concat_axis = 1 : tensor<8x6xf32> -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_to_all_same_axis_range(%x: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-error @+1 {{'px.all_to_all' op axis 5 is out of range for rank 2}}
  %0 = px.all_to_all %x on @world split_axis = 5 concat_axis = 5 : tensor<8x6xf32> -> tensor<8x6xf32>
  return %0 : tensor<8x6xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @all_to_all_element_type(%x: tensor<8x6xi1>) -> tensor<2x24xi8> {
  // expected-error @+1 {{'px.all_to_all' op result must keep the element type}}
  %0 = px.all_to_all %x on @world split_axis = 0 concat_axis = 1 : tensor<8x6xi1> -> tensor<2x24xi8>
  return %0 : tensor<2x24xi8>
}

// -----

shard.grid @world(shape = 4)
func.func @all_gatherv_rows(%s: !px.sparse_grad<6, tensor<100x8xf32>>) -> !px.sparse_grad<12, tensor<100x8xf32>> {
  // expected-error @+1 {{'px.all_gatherv' op result must have 24 rows (6 x 4 ranks), got 12}}
  %0 = px.all_gatherv %s on @world : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<12, tensor<100x8xf32>>
  return %0 : !px.sparse_grad<12, tensor<100x8xf32>>
}

// -----

shard.grid @world(shape = 4)
func.func @all_gatherv_dense_type(%s: !px.sparse_grad<6, tensor<100x8xf32>>) -> !px.sparse_grad<24, tensor<100x4xf32>> {
  // expected-error @+1 {{'px.all_gatherv' op result must have the dense type 'tensor<100x8xf32>'}}
  %0 = px.all_gatherv %s on @world : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x4xf32>>
  return %0 : !px.sparse_grad<24, tensor<100x4xf32>>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_table_rank(%t: tensor<f32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{'px.ps_pull' op table must have rank >= 1}}
  %0 = px.ps_pull %t[%i] on @world partitions = 1 placement = [0] : tensor<f32>, tensor<3xi64> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_partitions(%t: tensor<3x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op cannot split 3 rows into 4 partitions}}
  %0 = px.ps_pull %t[%i] on @world partitions = 4 placement = [0, 1, 2, 3] : tensor<3x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_placement_length(%t: tensor<100x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op placement must name one rank per partition (2), got 3}}
  %0 = px.ps_pull %t[%i] on @world partitions = 2 placement = [0, 1, 2] : tensor<100x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @g(shape = 2x2)
func.func @ps_pull_placement_rank(%t: tensor<100x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // The group of a row communicator has ranks 0 and 1 only.
  // expected-error @+1 {{'px.ps_pull' op placement rank 2 is outside the group of 2 ranks}}
  %0 = px.ps_pull %t[%i] on @g grid_axes = [1] partitions = 2 placement = [0, 2] : tensor<100x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_placement_negative(%t: tensor<100x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op placement rank -1 is outside the group of 4 ranks}}
  %0 = px.ps_pull %t[%i] on @world partitions = 1 placement = [-1] : tensor<100x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_result(%t: tensor<100x8xf32>, %i: tensor<3xi64>) -> tensor<3x100xf32> {
  // expected-error @+1 {{'px.ps_pull' op pulled rows must be 'tensor<3x8xf32>'}}
  %0 = px.ps_pull %t[%i] on @world partitions = 2 placement = [0, 1] : tensor<100x8xf32>, tensor<3xi64> -> tensor<3x100xf32>
  return %0 : tensor<3x100xf32>
}

// -----

shard.grid @world(shape = 2x2)
func.func @ps_pull_block_serves(%t: tensor<50x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op grid axis 0 both serves the rows and splits them (block_axes)}}
  %0 = px.ps_pull %t[%i] on @world grid_axes = [0] partitions = 2 placement = [0, 1] block of block_axes = [0] : tensor<50x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 2x2)
func.func @ps_pull_block_served_by_all(%t: tensor<50x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op grid axis 1 both serves the rows and splits them (block_axes)}}
  %0 = px.ps_pull %t[%i] on @world partitions = 2 placement = [0, 1] block of block_axes = [1] : tensor<50x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 2x2)
func.func @ps_pull_block_empty(%t: tensor<50x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op block_axes must name the axes the table's rows are split over}}
  %0 = px.ps_pull %t[%i] on @world grid_axes = [0] partitions = 2 placement = [0, 1] block of block_axes = [] : tensor<50x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_result_element_type(%t: tensor<100x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf16> {
  // expected-error @+1 {{'px.ps_pull' op pulled rows must be 'tensor<3x8xf32>'}}
  %0 = px.ps_pull %t[%i] on @world partitions = 2 placement = [0, 1] : tensor<100x8xf32>, tensor<3xi64> -> tensor<3x8xf16>
  return %0 : tensor<3x8xf16>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_zero_partitions(%t: tensor<100x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op attribute 'partitions' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = px.ps_pull %t[%i] on @world partitions = 0 placement = [] : tensor<100x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_pull_float_ids(%t: tensor<100x8xf32>, %i: tensor<3xf32>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = px.ps_pull %t[%i] on @world partitions = 1 placement = [0] : tensor<100x8xf32>, tensor<3xf32> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

func.func @ps_pull_no_grid(%t: tensor<100x8xf32>, %i: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{'px.ps_pull' op grid @world is not a shard.grid}}
  %0 = px.ps_pull %t[%i] on @world partitions = 1 placement = [0] : tensor<100x8xf32>, tensor<3xi64> -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_push_rows(%s: !px.sparse_grad<6, tensor<100x8xf32>>) -> !px.sparse_grad<6, tensor<100x8xf32>> {
  // expected-error @+1 {{'px.ps_push' op result must have 24 rows (6 x 4 ranks), got 6}}
  %0 = px.ps_push %s on @world partitions = 2 placement = [0, 1] : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<6, tensor<100x8xf32>>
  return %0 : !px.sparse_grad<6, tensor<100x8xf32>>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_push_dense_type(%s: !px.sparse_grad<6, tensor<100x8xf32>>) -> !px.sparse_grad<24, tensor<100x8xf16>> {
  // expected-error @+1 {{'px.ps_push' op result must have the dense type 'tensor<100x8xf32>'}}
  %0 = px.ps_push %s on @world partitions = 2 placement = [0, 1] local_aggregation : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x8xf16>>
  return %0 : !px.sparse_grad<24, tensor<100x8xf16>>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_push_partitions(%s: !px.sparse_grad<2, tensor<3x8xf32>>) -> !px.sparse_grad<8, tensor<3x8xf32>> {
  // expected-error @+1 {{'px.ps_push' op cannot split 3 rows into 5 partitions}}
  %0 = px.ps_push %s on @world partitions = 5 placement = [0, 1, 2, 3, 0] : !px.sparse_grad<2, tensor<3x8xf32>> -> !px.sparse_grad<8, tensor<3x8xf32>>
  return %0 : !px.sparse_grad<8, tensor<3x8xf32>>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_push_placement_length(%s: !px.sparse_grad<6, tensor<100x8xf32>>) -> !px.sparse_grad<24, tensor<100x8xf32>> {
  // expected-error @+1 {{'px.ps_push' op placement must name one rank per partition (3), got 1}}
  %0 = px.ps_push %s on @world partitions = 3 placement = [0] : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x8xf32>>
  return %0 : !px.sparse_grad<24, tensor<100x8xf32>>
}

// -----

shard.grid @world(shape = 4)
func.func @ps_push_placement_rank(%s: !px.sparse_grad<6, tensor<100x8xf32>>) -> !px.sparse_grad<24, tensor<100x8xf32>> {
  // expected-error @+1 {{'px.ps_push' op placement rank 4 is outside the group of 4 ranks}}
  %0 = px.ps_push %s on @world partitions = 1 placement = [4] : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<24, tensor<100x8xf32>>
  return %0 : !px.sparse_grad<24, tensor<100x8xf32>>
}

// -----

shard.grid @g(shape = 2x2)
func.func @ps_push_axis(%s: !px.sparse_grad<6, tensor<100x8xf32>>) -> !px.sparse_grad<12, tensor<100x8xf32>> {
  // expected-error @+1 {{'px.ps_push' op grid axis 0 repeats}}
  %0 = px.ps_push %s on @g grid_axes = [0, 0] partitions = 1 placement = [0] : !px.sparse_grad<6, tensor<100x8xf32>> -> !px.sparse_grad<12, tensor<100x8xf32>>
  return %0 : !px.sparse_grad<12, tensor<100x8xf32>>
}

// -----

shard.grid @world(shape = 2)
func.func @halo_shape(%x: tensor<2x8xf32>) -> tensor<2x9xf32> {
  // expected-error @+1 {{'px.halo_exchange' op the extended block must be 2x10 (1 + 8 + 1 rows along axis 1), got 2x9}}
  %0 = px.halo_exchange %x on @world axis = 1 lo = 1 hi = 1 : tensor<2x8xf32> -> tensor<2x9xf32>
  return %0 : tensor<2x9xf32>
}

// -----

shard.grid @world(shape = 2)
func.func @halo_too_wide(%e: tensor<2x8xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'px.halo_reduce' op halos of 3 and 3 rows exceed the block's 2 rows along axis 1}}
  %0 = px.halo_reduce %e on @world axis = 1 lo = 3 hi = 3 : tensor<2x8xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

shard.grid @world(shape = 2)
func.func @halo_axis(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'px.halo_exchange' op axis 2 is out of range for rank 2}}
  %0 = px.halo_exchange %x on @world axis = 2 lo = 0 hi = 0 : tensor<2x8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
