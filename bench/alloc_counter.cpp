// Replaces the global allocation functions so that the memory checks see every allocation the
// recorder makes. A translation unit of its own: inlined into the benchmark, GCC 12 takes the malloc/free
// pair for a new/free mismatch (-Wmismatched-new-delete).
#include "kernels.hpp"

#include <cstdlib>
#include <new>

namespace bench {
std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_allocated{0}, g_allocations{0};
}  // namespace bench

namespace {
void count(std::size_t size) noexcept {
    if (!bench::g_counting.load(std::memory_order_relaxed)) return;
    bench::g_allocated.fetch_add(size, std::memory_order_relaxed);
    bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

void* operator new(std::size_t size) {
    count(size);
    if (void* p = std::malloc(size != 0 ? size : 1)) return p;
    throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
    count(size);
    return std::malloc(size != 0 ? size : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The array forms are not replaced: their defaults call the ones above.
