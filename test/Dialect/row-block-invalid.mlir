// px.gather and px.make_sparse_grad `block of` a grid: the group must be
// one the grid has, and a row block is gathered on axis 0 only.
// RUN: parallax-opt %s --split-input-file --verify-diagnostics

shard.grid @g(shape = 2x2)
func.func @other_axis(%t: tensor<4x6xf32>, %ids: tensor<3xi64>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'px.gather' op a row block (`block of` a grid) is gathered on axis 0 only, not 1}}
  %e = px.gather %t[%ids] block of @g grid_axes = [1] {axis = 1 : i64} : tensor<4x6xf32>, tensor<3xi64>
  return %e : tensor<4x3xf32>
}

// -----

func.func @no_grid(%t: tensor<4x6xf32>, %ids: tensor<3xi64>) -> tensor<3x6xf32> {
  // expected-error @+1 {{'px.gather' op grid @g is not a shard.grid}}
  %e = px.gather %t[%ids] block of @g : tensor<4x6xf32>, tensor<3xi64>
  return %e : tensor<3x6xf32>
}

// -----

shard.grid @g(shape = 2x2)
func.func @bad_axis(%t: tensor<4x6xf32>, %ids: tensor<3xi64>) -> tensor<3x6xf32> {
  // expected-error @+1 {{'px.gather' op grid axis 2 is out of range for grid @g of rank 2}}
  %e = px.gather %t[%ids] block of @g grid_axes = [2] : tensor<4x6xf32>, tensor<3xi64>
  return %e : tensor<3x6xf32>
}

// -----

func.func @axes_without_grid(%t: tensor<4x6xf32>, %ids: tensor<3xi64>) -> tensor<3x6xf32> {
  // expected-error @+1 {{'px.gather' op grid_axes without a grid (`block of`)}}
  %e = "px.gather"(%t, %ids) {grid_axes = array<i16: 1>} : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<3x6xf32>
  return %e : tensor<3x6xf32>
}

// -----

shard.grid @g(shape = 2)
func.func @sparse_grad_axis(%ids: tensor<3xi64>, %rows: tensor<3x6xf32>) {
  // expected-error @+1 {{'px.make_sparse_grad' op grid axis 1 is out of range for grid @g of rank 1}}
  %g = px.make_sparse_grad %ids, %rows block of @g grid_axes = [1] : tensor<3xi64>, tensor<3x6xf32> -> !px.sparse_grad<3, tensor<4x6xf32>>
  return
}
