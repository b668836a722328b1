// Which sanitizer a test program is built with, for the tests whose subject a sanitizer changes (its
// shadow memory under an address-space limit, its allocator across fork(), its thread rules).
#ifndef TRACETREE_TESTS_SANITIZERS_HPP
#define TRACETREE_TESTS_SANITIZERS_HPP

namespace sanitizers {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddress = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddress = true;
#else
inline constexpr bool kAddress = false;
#endif
#else
inline constexpr bool kAddress = false;
#endif

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThread = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThread = true;
#else
inline constexpr bool kThread = false;
#endif
#else
inline constexpr bool kThread = false;
#endif

inline constexpr bool kAddressOrThread = kAddress || kThread;

}  // namespace sanitizers

#endif  // TRACETREE_TESTS_SANITIZERS_HPP
