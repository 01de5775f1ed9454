//===- ClusterMachine.h - the cost models' view of the cluster --*- C++ -*-===//
//
// What px-cluster recorded (links, calibrated rates, ranks per machine) as
// the grid cost model's Machine, for the passes and tools that price a
// split (px-shard-model's conv-split=auto, --grid-costs, --report).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TRANSFORMS_CLUSTERMACHINE_H
#define PARALLAX_TRANSFORMS_CLUSTERMACHINE_H

#include "parallax/Analysis/GridCost.h"
#include "parallax/Transforms/Cluster.h"

namespace parallax {

/// `optimizerSlots`: optimizer state per parameter (Adam 2, SGD 0).
grid::Machine machineOf(const ClusterModel &cluster, int optimizerSlots = 0);

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_CLUSTERMACHINE_H
