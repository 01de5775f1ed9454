// A px.variable that is a block of a split variable must have the block's
// type, on a grid that exists; and a plan needs even blocks (5 rows over 2
// ranks are not).
// RUN: parallax-opt %s --split-input-file --verify-diagnostics
// RUN: not parallax-opt %S/Inputs/variable-block.mlir --inference --emit=plan -o %t.pxplan 2>&1 | FileCheck %s --check-prefix=PLAN
// PLAN: error: cannot emit a plan for 'px.variable' {{.*}}: 'w' does not split evenly (dimension 0: 5 over blocks of 2)

shard.grid @g(shape = 2)
func.func @wrong_block() -> tensor<32x16xf32> {
  // expected-error @+1 {{a block of 'tensor<32x16xf32>' split as #shard<axisarray[[0]]> is 'tensor<16x16xf32>', not 'tensor<32x16xf32>'}}
  %w = px.variable "w" trainable = dense<1.0> : tensor<32x16xf32> -> tensor<32x16xf32> {grid = @g, split_axes = #shard<axisarray[[0]]>}
  return %w : tensor<32x16xf32>
}

// -----

func.func @no_grid() -> tensor<16x16xf32> {
  // expected-error @+1 {{grid @g is not a shard.grid}}
  %w = px.variable "w" trainable = dense<1.0> : tensor<32x16xf32> -> tensor<16x16xf32> {grid = @g, split_axes = #shard<axisarray[[0]]>}
  return %w : tensor<16x16xf32>
}

// -----

func.func @axes_without_grid() -> tensor<16x16xf32> {
  // expected-error @+1 {{grid and split_axes go together}}
  %w = px.variable "w" trainable = dense<1.0> : tensor<32x16xf32> -> tensor<16x16xf32> {split_axes = #shard<axisarray[[0]]>}
  return %w : tensor<16x16xf32>
}

// -----

func.func @unsplit_wrong_type() -> tensor<16x16xf32> {
  // expected-error @+1 {{initial value of type 'tensor<32x16xf32>' does not match result type 'tensor<16x16xf32>'}}
  %w = px.variable "w" trainable = dense<1.0> : tensor<32x16xf32> -> tensor<16x16xf32>
  return %w : tensor<16x16xf32>
}
