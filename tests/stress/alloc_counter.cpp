// Heap-byte counts for the stress tests' memory bounds: exact and independent of timing, page sizes
// or allocator caches, unlike resident-set sizes.
//
// Plain builds replace the global operator new/delete with ones that count live bytes; each block
// carries its size in a 16-byte header, which keeps the user pointer aligned for every fundamental
// type (aligned align_val_t forms are left to the library: tracetree allocates nothing over-aligned).
// ASan and TSan own operator new (clang links it statically, so a second one does not link); there the
// sanitizer's own count of allocated bytes is used, and no peak is kept.
#include "stress.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRESS_SANITIZER_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STRESS_SANITIZER_HEAP 1
#endif
#endif

#ifdef STRESS_SANITIZER_HEAP
#include <sanitizer/allocator_interface.h>

namespace stress {
std::int64_t heap_live_bytes() noexcept { return static_cast<std::int64_t>(__sanitizer_get_current_allocated_bytes()); }
std::int64_t heap_peak_bytes() noexcept { return -1; }
void heap_reset_peak() noexcept {}
}  // namespace stress

#else

namespace {

std::atomic<std::int64_t> live{0};
std::atomic<std::int64_t> peak{0};
constexpr std::size_t kHeader = 16;

void* allocate(std::size_t size) noexcept {
    void* block = std::malloc(size + kHeader);
    if (block == nullptr) return nullptr;
    *static_cast<std::size_t*>(block) = size;
    const std::int64_t now = live.fetch_add(static_cast<std::int64_t>(size)) + static_cast<std::int64_t>(size);
    std::int64_t seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    return static_cast<char*>(block) + kHeader;
}

void release(void* pointer) noexcept {
    if (pointer == nullptr) return;
    void* block = static_cast<char*>(pointer) - kHeader;
    live.fetch_sub(static_cast<std::int64_t>(*static_cast<std::size_t*>(block)));
    std::free(block);
}

void* allocate_or_throw(std::size_t size) {
    void* pointer = allocate(size);
    if (pointer == nullptr) throw std::bad_alloc();
    return pointer;
}

}  // namespace

namespace stress {
std::int64_t heap_live_bytes() noexcept { return live.load(); }
std::int64_t heap_peak_bytes() noexcept { return peak.load(); }
void heap_reset_peak() noexcept { peak.store(live.load()); }
}  // namespace stress

#include "../replace_new.hpp"

#endif
