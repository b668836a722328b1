// How a file gets the runtime: its definitions here (header-only, or the one file that defines
// TRACETREE_RUNTIME_IMPLEMENTATION: the tracetree-runtime library), or declarations only
// (TRACETREE_SEPARATE_RUNTIME), linked to the one copy. SPDX-License-Identifier: MIT
//
// Included first by control.hpp and sessions.hpp; control.hpp's comment says which to choose.
#ifndef TRACETREE_RUNTIME_LINKAGE_HPP
#define TRACETREE_RUNTIME_LINKAGE_HPP

#include "../core/platform.hpp"  // first: a platform without what the recorder needs gets an #error saying so

#if defined(TRACETREE_RUNTIME_IMPLEMENTATION)  // the one file: definitions the others link to
#define TRACETREE_DETAIL_RUNTIME_HERE 1
#define TRACETREE_DETAIL_RUNTIME_API
#elif defined(TRACETREE_SEPARATE_RUNTIME)  // declarations only
#define TRACETREE_DETAIL_RUNTIME_HERE 0
#else  // header-only: every file has its (inline) copy
#define TRACETREE_DETAIL_RUNTIME_HERE 1
#define TRACETREE_DETAIL_RUNTIME_API inline
#endif
#define TRACETREE_DETAIL_RUNTIME_LINK_CHECK \
    TRACETREE_DETAIL_CAT(tracetree_runtime_, TRACETREE_DETAIL_CAT(TRACETREE_ABI, _is_compiled_by_the_one_file_that_defines_TRACETREE_RUNTIME_IMPLEMENTATION))

#include "../core/recorder.hpp"  // the namespace, and the Recorder the runtime implements

#if !TRACETREE_DETAIL_RUNTIME_HERE
TRACETREE_BEGIN_NAMESPACE
namespace detail {
class RuntimeImpl;
RuntimeImpl& runtime();
}  // namespace detail
TRACETREE_END_NAMESPACE
extern "C" char TRACETREE_DETAIL_RUNTIME_LINK_CHECK;
// Each file's reference to the one file's symbol: without that file the link names it.
__attribute__((used)) static const char* const tracetree_detail_runtime_link_check = &TRACETREE_DETAIL_RUNTIME_LINK_CHECK;
#endif

#endif  // TRACETREE_RUNTIME_LINKAGE_HPP
