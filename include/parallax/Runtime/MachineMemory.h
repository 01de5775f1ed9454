//===- MachineMemory.h - how much memory a plan may use here ---*- C++ -*-===//
//
// A plan's storage is allocated and zeroed when a session starts, so all of
// it is touched: a plan that needs more than the machine has cannot run
// there. parallax-opt warns when its predicted peak exceeds this machine's
// memory; parallax-run refuses to start such a plan, with a message, rather
// than be killed by the kernel half-way through zeroing its arena.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_MACHINEMEMORY_H
#define PARALLAX_RUNTIME_MACHINEMEMORY_H

#include <cstdint>
#include <string>

namespace parallax::rt {

/// Memory processes here can use: physical memory (or the cgroup's
/// memory.max when lower, as in a container) plus swap. 0 if unknown.
int64_t usableMemoryBytes();

/// "512 B", "3.2 KiB", "1.5 MiB", "12.0 GiB", "32.0 TiB".
std::string bytesText(int64_t bytes);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_MACHINEMEMORY_H
