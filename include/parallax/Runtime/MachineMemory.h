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
#include <optional>
#include <string>

namespace parallax::rt {

/// Memory processes here can use: physical memory (or the cgroup's
/// memory.max when lower, as in a container) plus swap. 0 if unknown.
int64_t usableMemoryBytes();

/// This process's resident memory now, and its high-water mark (Linux's
/// VmRSS and VmHWM); -1 where /proc does not say.
int64_t residentBytes();
int64_t peakResidentBytes();
/// The part of residentBytes() that other processes map too: files
/// (RssFile: the code of the program and its libraries) and shared memory
/// (RssShmem: Open MPI's shared-memory segments, mapped by the machine's ranks).
int64_t sharedResidentBytes();
/// Bytes the C library's allocator has handed out and not had back (glibc's
/// mallinfo2); -1 where it cannot say.
int64_t heapInUseBytes();
/// Starts the high-water mark again from the resident memory now (Linux 4.0
/// and later), so that a transient peak (loading a model) is forgotten;
/// false where it cannot.
bool resetPeakResident();

/// Resident memory that passes its last high mark between two steps while
/// the plan's own memory stays put is the heap fragmenting: a library's
/// per-call scratch (oneDNN's sgemm packing buffer) freed, a block that
/// lives on (Open MPI's, allocated inside a collective on the same thread)
/// placed in its hole, the next scratch placed higher. Hands the heap's
/// free pages back to the system (glibc's malloc_trim) when resident memory
/// is more than `threshold` bytes above `highMark` (-1: none yet), which it
/// then raises; true when it trimmed. Refaulting pages it gave back does
/// not pass the mark again, so a steady step never trims.
bool trimHeapAbove(int64_t &highMark, int64_t threshold);

/// "2GiB", "512 MiB", "1.5e9", "3GB" as bytes (binary and decimal units);
/// nullopt for anything else or a negative count.
std::optional<int64_t> parseBytes(const std::string &text);

/// "512 B", "3.2 KiB", "1.5 MiB", "12.0 GiB", "32.0 TiB".
std::string bytesText(int64_t bytes);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_MACHINEMEMORY_H
