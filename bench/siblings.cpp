// One parent calling K distinct call sites. Each instantiation of site<I> is a call site of its own
// (the recorder interns a macro's site by its address as well as its text), so the parent's node gets
// K children, all named "sibling". The calls are direct calls in a fixed order, in order or shuffled
// at compile time, so that neither order pays for an indirect branch the other does not.
#include "kernels.hpp"

#include <tracetree/tracetree.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace bench {
namespace {

template <int I>
[[gnu::noinline]] void site() {
    TRACETREE_SCOPE("sibling");
    clobber();
}

// A fixed permutation of 0 .. K-1: Fisher-Yates driven by a 64-bit linear congruential generator.
template <std::size_t K>
constexpr std::array<int, K> shuffled_order() {
    std::array<int, K> order{};
    for (std::size_t i = 0; i < K; ++i) order[i] = static_cast<int>(i);
    std::uint64_t state = 0x2545F4914F6CDD1Du + K;
    for (std::size_t i = K - 1; i > 0; --i) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        const std::size_t j = static_cast<std::size_t>((state >> 33) % (i + 1));
        const int swapped = order[i];
        order[i] = order[j];
        order[j] = swapped;
    }
    return order;
}
template <std::size_t K>
constexpr std::array<int, K> kShuffled = shuffled_order<K>();

template <std::size_t K, bool Shuffled>
constexpr int site_at(std::size_t position) {
    if constexpr (Shuffled)
        return kShuffled<K>[position];
    else
        return static_cast<int>(position);
}
// In chunks of at most 100 calls: clang++ expands no fold expression of more than 256 terms.
constexpr std::size_t kChunk = 100;
template <std::size_t K, bool Shuffled, std::size_t First, std::size_t... I>
void call_chunk(std::index_sequence<I...>) {
    (site<site_at<K, Shuffled>(First + I)>(), ...);
}
template <std::size_t K, bool Shuffled, std::size_t... Chunk>
void call_chunks(std::index_sequence<Chunk...>) {
    (call_chunk<K, Shuffled, Chunk * kChunk>(std::make_index_sequence<std::min(kChunk, K - Chunk * kChunk)>{}), ...);
}
template <std::size_t K, bool Shuffled>
[[gnu::noinline]] void call_all() {
    call_chunks<K, Shuffled>(std::make_index_sequence<(K + kChunk - 1) / kChunk>{});
}

// The 4 x 2 cases: their sibling calls so far, per sibling node.
constexpr std::array<int, 5> kCounts = {1, 2, 20, 200, 1000};
std::uint64_t g_calls[kCounts.size()][2] = {};

std::size_t case_of(int count) {
    return static_cast<std::size_t>(std::find(kCounts.begin(), kCounts.end(), count) - kCounts.begin());
}

template <std::size_t K, bool Shuffled>
std::uint64_t run(std::uint64_t n, Timer& timer) {
    // A site record like the one TRACETREE_SCOPE leaves, with a name chosen at run time: one parent per case.
    static const std::string name = siblings_parent(static_cast<int>(K), Shuffled);
    static tracetree::detail::Site parent(name.c_str(), __FILE__, __LINE__, tracetree::detail::SiteKind::scope);
    const tracetree::detail::Scope scope(parent);
    const std::uint64_t reps = std::max<std::uint64_t>(1, n / K);
    if (Shuffled) call_all<K, false>();  // the nodes are made in order (the first time), then called out of it
    timer.start();
    for (std::uint64_t i = 0; i < reps; ++i) call_all<K, Shuffled>();
    timer.stop();
    g_calls[case_of(static_cast<int>(K))][Shuffled] += reps + (Shuffled ? 1 : 0);
    return reps * K;
}

}  // namespace

std::string siblings_parent(int count, bool shuffled) {
    return "siblings." + std::to_string(count) + (shuffled ? ".shuffled" : ".in-order");
}

std::uint64_t sibling_calls(int count, bool shuffled) {
    const std::size_t at = case_of(count);
    return at < kCounts.size() ? g_calls[at][shuffled] : 0;
}

std::uint64_t run_siblings(int count, bool shuffled, std::uint64_t n, Timer& timer) {
    switch (count) {
    case 1: return run<1, false>(n, timer);
    case 2: return shuffled ? run<2, true>(n, timer) : run<2, false>(n, timer);
    case 20: return shuffled ? run<20, true>(n, timer) : run<20, false>(n, timer);
    case 200: return shuffled ? run<200, true>(n, timer) : run<200, false>(n, timer);
    case 1000: return shuffled ? run<1000, true>(n, timer) : run<1000, false>(n, timer);
    default: return 0;
    }
}

void call_19_siblings() { call_all<19, false>(); }

}  // namespace bench
