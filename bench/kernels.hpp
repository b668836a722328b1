// Shared by the benchmark's translation units.
#ifndef TRACETREE_BENCH_KERNELS_HPP
#define TRACETREE_BENCH_KERNELS_HPP

#include <atomic>
#include <cstdint>

namespace bench {

// Stands for the traced code: the compiler must assume it reads and writes any memory, so it can
// neither delete a loop of scopes nor merge their counter updates across iterations.
inline void clobber() noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __asm__ __volatile__("" ::: "memory");
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// Bytes requested from the global operator new while g_counting is set (alloc_counter.cpp).
extern std::atomic<bool> g_counting;
extern std::atomic<std::uint64_t> g_allocated;

// n iterations of an empty scope from a translation unit built with -DTRACETREE_DISABLE.
std::uint64_t run_compiled_out(std::uint64_t n);

}  // namespace bench

#endif
