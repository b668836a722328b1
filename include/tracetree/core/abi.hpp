// tracetree ABI: the namespace every entity lives in. SPDX-License-Identifier: MIT
//
// Copies of the library meet in one process (the executable, shared libraries, plugins), and their
// inline functions share mangled names. Two copies whose objects differ in layout must never bind to
// each other's functions, so the inline namespace names both the library's version and the standard
// library's ABI: a file built with -D_GLIBCXX_DEBUG, -D_GLIBCXX_USE_CXX11_ABI=0 or libc++ gets a
// namespace of its own, and with it a recorder of its own (core/anchor.hpp), beside the others.
#ifndef TRACETREE_CORE_ABI_HPP
#define TRACETREE_CORE_ABI_HPP

#include <cstddef>  // the standard library's configuration macros, read below

#define TRACETREE_DETAIL_CAT2(a, b) a##b
#define TRACETREE_DETAIL_CAT(a, b) TRACETREE_DETAIL_CAT2(a, b)
#define TRACETREE_DETAIL_STRING2(a) #a
#define TRACETREE_DETAIL_STRING(a) TRACETREE_DETAIL_STRING2(a)

#if defined(_LIBCPP_VERSION)
#define TRACETREE_DETAIL_STDLIB_ABI TRACETREE_DETAIL_CAT(_libcxx, _LIBCPP_ABI_VERSION)
#elif defined(__GLIBCXX__) && !_GLIBCXX_USE_CXX11_ABI
#define TRACETREE_DETAIL_STDLIB_ABI _cxx98
#else
#define TRACETREE_DETAIL_STDLIB_ABI  // libstdc++'s default ABI: the plain name
#endif
#if defined(_GLIBCXX_DEBUG) || defined(_LIBCPP_DEBUG)
#define TRACETREE_DETAIL_DEBUG_ABI _debug
#else
#define TRACETREE_DETAIL_DEBUG_ABI
#endif

// v0_2, v0_2_debug, v0_2_cxx98, v0_2_libcxx1, ... (recorder.hpp checks the version against core/version.hpp's)
#define TRACETREE_ABI TRACETREE_DETAIL_CAT(TRACETREE_DETAIL_CAT(v0_2, TRACETREE_DETAIL_STDLIB_ABI), TRACETREE_DETAIL_DEBUG_ABI)
#define TRACETREE_DETAIL_ABI_NAME TRACETREE_DETAIL_STRING(TRACETREE_ABI)  // "v0_2", ...: in the anchors' names
// Every function the headers define is kept out of XRay (docs/xray.md): a file that includes them,
// built with -fxray-instrument, would otherwise give hundreds of the recorder's own functions sleds,
// which every "patch everything" writes and unwrites, and which the handler would call into.
#if defined(__clang__)
#define TRACETREE_DETAIL_NO_XRAY_BEGIN _Pragma("clang attribute push(__attribute__((xray_never_instrument)), apply_to = function)")
#define TRACETREE_DETAIL_NO_XRAY_END _Pragma("clang attribute pop")
#else
#define TRACETREE_DETAIL_NO_XRAY_BEGIN
#define TRACETREE_DETAIL_NO_XRAY_END
#endif
#define TRACETREE_BEGIN_NAMESPACE TRACETREE_DETAIL_NO_XRAY_BEGIN namespace tracetree { inline namespace TRACETREE_ABI {
#define TRACETREE_END_NAMESPACE } } TRACETREE_DETAIL_NO_XRAY_END

#if defined(__GNUC__) || defined(__clang__)
#if defined(__OPTIMIZE__)
#define TRACETREE_DETAIL_INLINE __attribute__((always_inline)) inline  // the fast path stays in the caller
#else
// Unoptimised, an inlined fast path is kilobytes of naive code at every scope (600 scopes took a test
// file 18 s of g++ -O0): one out-of-line copy is called instead.
#define TRACETREE_DETAIL_INLINE inline
#endif
// Inlined even unoptimised: where a scope starts, so that the copy it hands the runtime lies in the
// caller's frame, which a stack session's walk starts from (runtime/stack.hpp).
#define TRACETREE_DETAIL_IN_CALLER __attribute__((always_inline)) inline
#define TRACETREE_DETAIL_COLD __attribute__((noinline, cold))         // slow paths stay out of it
#define TRACETREE_DETAIL_NOINLINE __attribute__((noinline))            // one copy, called: code size at each caller
#define TRACETREE_DETAIL_LIKELY(x) __builtin_expect(!!(x), 1)
// Per-copy state (copies meet only through their anchors): hidden, so that g++ does not make it
// STB_GNU_UNIQUE, which would keep a plugin that records mapped after dlclose.
#define TRACETREE_DETAIL_LOCAL __attribute__((visibility("hidden")))
// A part of this copy that only some builds contain (the admin listener, runtime/control-inl.hpp): its
// address is null where no file of the copy defines it, and copies never bind to each other's.
#define TRACETREE_DETAIL_OPTIONAL_PART __attribute__((weak, visibility("hidden")))
#else
#define TRACETREE_DETAIL_LOCAL
#define TRACETREE_DETAIL_INLINE inline
#define TRACETREE_DETAIL_IN_CALLER inline
#define TRACETREE_DETAIL_COLD
#define TRACETREE_DETAIL_NOINLINE
#define TRACETREE_DETAIL_LIKELY(x) (x)
#endif

#endif  // TRACETREE_CORE_ABI_HPP
