// tracetree: Arthas-style call-tree tracing for C++17. SPDX-License-Identifier: MIT
//
// The one header an annotated file includes. It is priced per file, so it holds only the scope
// macros and the recorder's hot path (core/recorder.hpp); asking for traces, profiles and their
// rendering lives in headers that only the files controlling tracing include:
//
//   #include <tracetree/tracetree.hpp>                 // in every annotated file
//   void handle() { TRACETREE_FUNCTION(); { TRACETREE_SCOPE("parse"); parse(); } }
//
//   #include <tracetree/all.hpp>                       // in the file that asks (or control.hpp + render.hpp)
//   tracetree::TraceSession trace(tracetree::TraceRequest("handle").min_cost(10ms).limit(3));
//   for (auto& t : trace.collect(30s)) tracetree::render(std::cout, t);
//
// The map of the library is the README's "How it works" (docs/images/house.svg, drawn from the
// includes): the hot path in core/, the recorder in runtime/, text helpers in text/, and the optional
// parts in admin/, otel/ and xray/, with the public headers here at the top.
#ifndef TRACETREE_TRACETREE_HPP
#define TRACETREE_TRACETREE_HPP

#include "core/version.hpp"  // TRACETREE_VERSION_*, defined with TRACETREE_DISABLE too

// The namespace every entity lives in (versioned, and keyed by the standard library's ABI) is
// defined in core/abi.hpp, which every header that declares anything includes.

// ---- configuration --------------------------------------------------------------------------
// One switch, and it only changes macros: files built with and without it link together safely.
//   TRACETREE_DISABLE  defined: every macro below compiles to `static_cast<void>(0)` (or a plain
//                      `throw`), evaluates none of its arguments, and this header includes nothing.
// Everything else (limits, name length, memory budgets, the clock) is a run-time setting:
// tracetree::set_limits() in control.hpp.

#ifdef TRACETREE_DISABLE

#define TRACETREE_FUNCTION() static_cast<void>(0)
#define TRACETREE_SCOPE(name) static_cast<void>(0)
#define TRACETREE_SCOPE_DYNAMIC(name) static_cast<void>(0)
#define TRACETREE_WATCH(name, ...) static_cast<void>(0)
#define TRACETREE_THROW(exception) throw exception

#else

#include "core/recorder.hpp"

// __COUNTER__ gives each expansion its own names, so two scopes on one line do not shadow each other.
#if defined(__COUNTER__)
#define TRACETREE_DETAIL_ID __COUNTER__
#else
#define TRACETREE_DETAIL_ID __LINE__
#endif
#if defined(_MSC_VER) && !defined(__clang__)
#define TRACETREE_DETAIL_SIGNATURE __FUNCSIG__
#else
#define TRACETREE_DETAIL_SIGNATURE __PRETTY_FUNCTION__
#endif

// A scope named after the enclosing function: `ns::Class::method()`.
#define TRACETREE_FUNCTION() TRACETREE_DETAIL_SCOPE(TRACETREE_DETAIL_ID, TRACETREE_DETAIL_SIGNATURE, function)
// A scope with a fixed name (a string literal).
#define TRACETREE_SCOPE(name) TRACETREE_DETAIL_SCOPE(TRACETREE_DETAIL_ID, "" name, scope)
// A scope named at run time (a `const char*`, or anything with .data() and .size(): std::string,
// std::string_view), evaluated only while recording is on. A name seen before costs a hash and a
// compare; the first sight of a name takes a bounded slow path. Names are cut at the name-length limit.
#define TRACETREE_SCOPE_DYNAMIC(name) TRACETREE_DETAIL_SCOPE_DYNAMIC(TRACETREE_DETAIL_ID, name)
// Attaches `value` to the innermost open scope under `name` (a string literal) for watch sessions
// (Arthas `watch`) and traces that ask for values. `value` is evaluated and formatted only when one
// does: otherwise the statement costs a load and a compare. See core/recorder.hpp, record_value,
// for how each type is formatted and how to format your own.
#define TRACETREE_WATCH(name, ...) ::tracetree::detail::watch("" name, [&]() -> decltype(auto) { return (__VA_ARGS__); })
// `TRACETREE_THROW(std::invalid_argument("no"));` throws it, and the trace's throw node knows the line.
#define TRACETREE_THROW(exception) throw ::tracetree::detail::note_throw(__FILE__, __LINE__, exception)

#define TRACETREE_DETAIL_SCOPE(id, text, kind)                                                        \
    static ::tracetree::detail::Site TRACETREE_DETAIL_CAT(tracetree_site_, id){                        \
        text, __FILE__, __LINE__, ::tracetree::detail::SiteKind::kind};                                \
    ::tracetree::detail::Scope TRACETREE_DETAIL_CAT(tracetree_scope_, id) {                            \
        TRACETREE_DETAIL_CAT(tracetree_site_, id)                                                      \
    }
#define TRACETREE_DETAIL_SCOPE_DYNAMIC(id, name)                                                       \
    static ::tracetree::detail::Site TRACETREE_DETAIL_CAT(tracetree_site_, id){                        \
        "", __FILE__, __LINE__, ::tracetree::detail::SiteKind::dynamic};                               \
    ::tracetree::detail::Scope TRACETREE_DETAIL_CAT(tracetree_scope_, id) {                            \
        TRACETREE_DETAIL_CAT(tracetree_site_, id), [&]() -> decltype(auto) { return (name); }          \
    }

#endif  // TRACETREE_DISABLE

#endif  // TRACETREE_TRACETREE_HPP
