// px-split-batch refuses a static model whose samples it cannot follow,
// naming the op (its ONNX node) and how it combines samples, when the batch
// must be split (ranks > 1).
// RUN: parallax-opt %s --split-input-file --px-split-batch='ranks=2' --verify-diagnostics

// A product that contracts over the samples combines them: no batch.
// expected-error @below {{px-split-batch: cannot tell which inputs hold the batch of this static model: node 'gram' (px.matmul) sums over the samples (they lie along a contracted dimension). Pass --batch-inputs NAMES}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32>
    %t = px.transpose %x {perm = array<i64: 1, 0>} : tensor<4x3xf32>
    %g = px.matmul %t, %x : tensor<3x4xf32>, tensor<4x3xf32> loc("gram")
    %r = px.reduce_mean %g {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x3xf32>
    return %r : tensor<f32>
  }
}

// -----

// A loss summed over the samples cannot be averaged over ranks.
// expected-error @below {{px-split-batch: cannot tell which inputs hold the batch of this static model: node 'ce' (px.softmax_cross_entropy_loss) sums over the samples, and the step returns that sum: data parallelism averages the ranks' losses, so divide it by the batch size or use a mean (reduction='mean'). Pass --batch-inputs NAMES}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32>
    %y = px.input "y" : tensor<4xi64>
    %loss, %lp = px.softmax_cross_entropy_loss %x, %y {reduction = "sum"} : tensor<4x3xf32>, tensor<4xi64> loc("ce")
    return %loss : tensor<f32>
  }
}

// -----

// A mean over the samples used inside the model (batch centring).
// expected-error @below {{px-split-batch: cannot tell which inputs hold the batch of this static model: node 'centre' (px.sub) uses a mean over the samples inside the model: only the loss may average over them. Pass --batch-inputs NAMES}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32>
    %m = px.reduce_mean %x {axes = array<i64: 0>, keepdims = true} : tensor<4x3xf32>
    %c = px.sub %x, %m : tensor<4x3xf32>, tensor<1x3xf32> loc("centre")
    %r = px.reduce_mean %c {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32>
    return %r : tensor<f32>
  }
}

// -----

// A reshape that splits the samples' dimension.
// expected-error @below {{px-split-batch: cannot tell which inputs hold the batch of this static model: node 'split' (px.reshape) splits the samples' dimension across several dimensions. Pass --batch-inputs NAMES}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32>
    %s = px.reshape %x : tensor<4x3xf32> -> tensor<2x2x3xf32> loc("split")
    %r = px.reduce_mean %s {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x2x3xf32>
    return %r : tensor<f32>
  }
}

// -----

// A model exported with one sample cannot show its batch.
// expected-error @below {{px-split-batch: the model was exported with a batch of 1 sample, which cannot be split or show which dimensions are the batch}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<1x3xf32>
    %r = px.reduce_mean %x {axes = array<i64: 0, 1>, keepdims = false} : tensor<1x3xf32>
    return %r : tensor<f32>
  }
}

// -----

// A sum over the samples used inside the model.
// expected-error @below {{px-split-batch: cannot tell which inputs hold the batch of this static model: node 'total' (px.reduce_sum) sums over the samples, and px.mul uses that sum inside the model. Pass --batch-inputs NAMES}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32>
    %s = px.reduce_sum %x {axes = array<i64: 0>, keepdims = true} : tensor<4x3xf32> loc("total")
    %c = px.mul %x, %s : tensor<4x3xf32>, tensor<1x3xf32>
    %r = px.reduce_mean %c {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32>
    return %r : tensor<f32>
  }
}

// -----

// Padding the samples' dimension adds samples that are no one's.
// expected-error @below {{px-split-batch: cannot tell which inputs hold the batch of this static model: node 'padded' (px.pad) pads or crops the samples' dimension. Pass --batch-inputs NAMES}}
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32>
    %p = px.pad %x {pads = array<i64: 1, 0, 0, 0>} : tensor<4x3xf32> loc("padded")
    %r = px.reduce_mean %p {axes = array<i64: 0, 1>, keepdims = false} : tensor<5x3xf32>
    return %r : tensor<f32>
  }
}

