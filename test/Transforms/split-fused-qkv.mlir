// px-split-fused-qkv: a product by a [E, 3E] (or [E, 2E]) weight read as
// its thirds (halves) becomes three (two) products by variables that are
// blocks of the initializer.
// RUN: parallax-opt %s --split-input-file --px-split-fused-qkv | FileCheck %s

// CHECK-LABEL: func.func @fused
// CHECK-DAG: %[[WQ:.*]] = px.variable "w.q" trainable = #px.onnx_initializer<"w", block at [0, 0] of [4, 12]> : tensor<4x4xf32>
// CHECK-DAG: %[[WK:.*]] = px.variable "w.k" trainable = #px.onnx_initializer<"w", block at [0, 4] of [4, 12]> : tensor<4x4xf32>
// CHECK-DAG: %[[WV:.*]] = px.variable "w.v" trainable = #px.onnx_initializer<"w", block at [0, 8] of [4, 12]> : tensor<4x4xf32>
// CHECK-DAG: %[[BQ:.*]] = px.variable "b.q" trainable = #px.onnx_initializer<"b", block at [0] of [12]> : tensor<4xf32>
// CHECK-DAG: %[[BV:.*]] = px.variable "b.v" trainable = #px.onnx_initializer<"b", block at [8] of [12]> : tensor<4xf32>
// CHECK: %[[Q:.*]] = px.matmul %[[X:.*]], %[[WQ]] : tensor<5x2x4xf32>, tensor<4x4xf32>
// CHECK: px.add %[[BQ]], %[[Q]] : tensor<4xf32>, tensor<5x2x4xf32>
// CHECK: px.matmul %[[X]], %[[WK]]
// CHECK: %[[V:.*]] = px.matmul %[[X]], %[[WV]]
// CHECK: px.add %[[BV]], %[[V]]
// CHECK-NOT: px.slice
// CHECK-NOT: px.variable "w"
module attributes {px.model_ranks = 2 : i64} {
  func.func @fused() -> (tensor<5x2x4xf32>, tensor<5x2x4xf32>, tensor<5x2x4xf32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<5x2x4xf32>
    %w = px.variable "w" trainable = #px.onnx_initializer<"w"> : tensor<4x12xf32>
    %b = px.variable "b" trainable = #px.onnx_initializer<"b"> : tensor<12xf32>
    %p = px.matmul %x, %w : tensor<5x2x4xf32>, tensor<4x12xf32>
    %y = px.add %b, %p : tensor<12xf32>, tensor<5x2x12xf32>
    %q = px.slice %y starts = [0, 0, 0] steps = [1, 1, 1] : tensor<5x2x12xf32> -> tensor<5x2x4xf32>
    %k = px.slice %y starts = [0, 0, 4] steps = [1, 1, 1] : tensor<5x2x12xf32> -> tensor<5x2x4xf32>
    %v = px.slice %y starts = [0, 0, 8] steps = [1, 1, 1] : tensor<5x2x12xf32> -> tensor<5x2x4xf32>
    return %q, %k, %v : tensor<5x2x4xf32>, tensor<5x2x4xf32>, tensor<5x2x4xf32>
  }
}

// -----

// Two layers whose equal biases the export merged into one initializer:
// both products split, the bias once.
// CHECK-LABEL: func.func @shared_bias
// CHECK-COUNT-3: px.variable "b.{{[qkv]}}"
// CHECK-COUNT-6: px.matmul
// CHECK-NOT: px.slice
module attributes {px.model_ranks = 2 : i64} {
  func.func @shared_bias() -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<3x4xf32>
    %w1 = px.variable "w1" trainable = #px.onnx_initializer<"w1"> : tensor<4x12xf32>
    %w2 = px.variable "w2" trainable = #px.onnx_initializer<"w2"> : tensor<4x12xf32>
    %b = px.variable "b" trainable = #px.onnx_initializer<"b"> : tensor<12xf32>
    %p1 = px.matmul %x, %w1 : tensor<3x4xf32>, tensor<4x12xf32>
    %y1 = px.add %p1, %b : tensor<3x12xf32>, tensor<12xf32>
    %q1 = px.slice %y1 starts = [0, 0] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %k1 = px.slice %y1 starts = [0, 4] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %v1 = px.slice %y1 starts = [0, 8] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %p2 = px.matmul %q1, %w2 : tensor<3x4xf32>, tensor<4x12xf32>
    %y2 = px.add %p2, %b : tensor<3x12xf32>, tensor<12xf32>
    %q2 = px.slice %y2 starts = [0, 0] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %k2 = px.slice %y2 starts = [0, 4] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %v2 = px.slice %y2 starts = [0, 8] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    return %k1, %v1, %k2, %v2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
  }
}

// -----

// Left as it is: a product also read whole (returned) besides its thirds.
// CHECK-LABEL: func.func @read_whole
// CHECK: px.variable "w" trainable
// CHECK-COUNT-3: px.slice
module attributes {px.model_ranks = 2 : i64} {
  func.func @read_whole() -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x12xf32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<3x4xf32>
    %w = px.variable "w" trainable = #px.onnx_initializer<"w"> : tensor<4x12xf32>
    %p = px.matmul %x, %w : tensor<3x4xf32>, tensor<4x12xf32>
    %q = px.slice %p starts = [0, 0] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %k = px.slice %p starts = [0, 4] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %v = px.slice %p starts = [0, 8] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    return %q, %k, %v, %p : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x12xf32>
  }
}

// -----

// Without a bias (nn.MultiheadAttention(bias=False)).
// CHECK-LABEL: func.func @no_bias
// CHECK-DAG: px.variable "w.q" trainable = #px.onnx_initializer<"w", block at [0, 0] of [4, 12]>
// CHECK-DAG: px.variable "w.v" trainable = #px.onnx_initializer<"w", block at [0, 8] of [4, 12]>
// CHECK-COUNT-3: px.matmul
// CHECK-NOT: px.slice
module {
  func.func @no_bias() -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<3x4xf32>
    %w = px.variable "w" trainable = #px.onnx_initializer<"w"> : tensor<4x12xf32>
    %p = px.matmul %x, %w : tensor<3x4xf32>, tensor<4x12xf32>
    %q = px.slice %p starts = [0, 0] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %k = px.slice %p starts = [0, 4] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %v = px.slice %p starts = [0, 8] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    return %q, %k, %v : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
  }
}

// -----

// A bias shared with a product that is not split (w2 is also read whole):
// splitting w1 would make the bias two parameters, so neither is split.
// CHECK-LABEL: func.func @bias_shared_with_whole
// CHECK-DAG: px.variable "w1" trainable
// CHECK-DAG: px.variable "b" trainable
// CHECK-NOT: block at
module {
  func.func @bias_shared_with_whole() -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x12xf32>, tensor<4x12xf32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<3x4xf32>
    %w1 = px.variable "w1" trainable = #px.onnx_initializer<"w1"> : tensor<4x12xf32>
    %w2 = px.variable "w2" trainable = #px.onnx_initializer<"w2"> : tensor<4x12xf32>
    %b = px.variable "b" trainable = #px.onnx_initializer<"b"> : tensor<12xf32>
    %p1 = px.matmul %x, %w1 : tensor<3x4xf32>, tensor<4x12xf32>
    %y1 = px.add %p1, %b : tensor<3x12xf32>, tensor<12xf32>
    %q = px.slice %y1 starts = [0, 0] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %k = px.slice %y1 starts = [0, 4] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %v = px.slice %y1 starts = [0, 8] steps = [1, 1] : tensor<3x12xf32> -> tensor<3x4xf32>
    %p2 = px.matmul %x, %w2 : tensor<3x4xf32>, tensor<4x12xf32>
    %y2 = px.add %p2, %b : tensor<3x12xf32>, tensor<12xf32>
    return %q, %k, %v, %y2, %w2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x12xf32>, tensor<4x12xf32>
  }
}

// -----

// A cross-attention's keys and values: one product read in two halves.
// CHECK-LABEL: func.func @halves
// CHECK-DAG: px.variable "kv.0" trainable = #px.onnx_initializer<"kv", block at [0, 0] of [4, 8]> : tensor<4x4xf32>
// CHECK-DAG: px.variable "kv.1" trainable = #px.onnx_initializer<"kv", block at [0, 4] of [4, 8]> : tensor<4x4xf32>
// CHECK-COUNT-2: px.matmul
// CHECK-NOT: px.slice
module {
  func.func @halves() -> (tensor<3x4xf32>, tensor<3x4xf32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<3x4xf32>
    %w = px.variable "kv" trainable = #px.onnx_initializer<"kv"> : tensor<4x8xf32>
    %p = px.matmul %x, %w : tensor<3x4xf32>, tensor<4x8xf32>
    %k = px.slice %p starts = [0, 0] steps = [1, 1] : tensor<3x8xf32> -> tensor<3x4xf32>
    %v = px.slice %p starts = [0, 4] steps = [1, 1] : tensor<3x8xf32> -> tensor<3x4xf32>
    return %k, %v : tensor<3x4xf32>, tensor<3x4xf32>
  }
}
