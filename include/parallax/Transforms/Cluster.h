//===- Cluster.h - the link model the synchronization passes use -*- C++ -*-===//
//
// What px-cluster records on a module and the later passes read back: the
// world, its machines, and an alpha-beta model of the links (a message of n
// bytes costs latency + n / bandwidth).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TRANSFORMS_CLUSTER_H
#define PARALLAX_TRANSFORMS_CLUSTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

#include "parallax/Runtime/KernelRates.h"

#include <map>
#include <string>

namespace parallax {

/// The name of the grid of all ranks that px-cluster declares.
constexpr const char *kWorldGrid = "world";

struct ClusterModel {
  int64_t worldSize = 1;
  int64_t ranksPerMachine = 1;
  /// Bytes per second and seconds per message, inside a machine (shared
  /// memory) and between machines (10 Gb/s Ethernet by default).
  double intraBandwidth = 5e9, intraLatency = 5e-6;
  double interBandwidth = 1.25e9, interLatency = 50e-6;
  /// Seconds a server spends per byte of sparse gradient it applies.
  double updateSecondsPerByte = 2e-10;
  /// Sustained floating-point operations per second of one rank's matrix
  /// products (parallax-run --calibrate measures it; a modest core's
  /// figure by default).
  double flopsPerSecond = 50e9;
  /// The same for convolutions (their own kernels).
  double convFlopsPerSecond = 20e9;
  /// Bytes per second a memory-bound op (element-wise, an optimizer
  /// update) streams through one rank (--calibrate measures it too).
  double streamBytesPerSecond = 5e9;
  /// Seconds every kernel costs beyond its work (a call through the
  /// runtime's kernel function).
  double kernelSeconds = 1e-6;
  /// Work per second of the kernels that have a rate of their own
  /// (parallax/Runtime/KernelRates.h), by kernel name and against a call's
  /// work: none unless a profile measured them.
  std::map<std::string, rt::RateCurve> opRates;

  /// Pr of a Pr x Pc grid (--grid): the ranks each layer's model is split
  /// over, the grid's last axis; 1 for data parallelism.
  int64_t modelRanks = 1;

  int64_t machines() const { return worldSize / ranksPerMachine; }
  /// Pc: the ranks the batch is split over (the data-parallel group).
  int64_t dataRanks() const { return worldSize / modelRanks; }
  /// The data-parallel group's axes of a grid of `gridAxes` axes (@world):
  /// every axis but a Pr x Pc grid's model axis, the last.
  llvm::SmallVector<int16_t> batchAxes(int64_t gridAxes) const {
    llvm::SmallVector<int16_t> axes;
    for (int16_t a = 0; a < (int16_t)(gridAxes - (modelRanks > 1 ? 1 : 0)); ++a)
      axes.push_back(a);
    return axes;
  }
  /// The link that limits an exchange over the whole world.
  double bandwidth() const;
  double latency() const;

  /// What px-cluster recorded (a world of one if it did not run).
  static ClusterModel fromModule(mlir::ModuleOp module);
};

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_CLUSTER_H
