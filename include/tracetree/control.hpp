// tracetree control: ask the recorder for traces, profiles and timelines. SPDX-License-Identifier: MIT
//
//   #include <tracetree/control.hpp>
//   tracetree::Profile all = tracetree::profile();  // everything, every thread; render it with render.hpp
//   tracetree::reset();
//
// Only the files that control tracing include this header (annotated files include tracetree.hpp;
// sessions.hpp asks for single invocations). The first file of a process that includes either starts
// the process's recorder; every copy of the library in the process (the executable, shared
// libraries, plugins) records into that one. Reading order: switches and limits, profiles, the
// timeline; the implementation is runtime/control-inl.hpp over runtime/runtime.hpp.
//
// Compiling the runtime once. A program with a build system links the tracetree-runtime library
// (meson `dependency('tracetree-runtime')`, CMake `tracetree::runtime`, pkg-config
// `tracetree-runtime`): the runtime and TRACETREE_ADMIN's listener, compiled once, and every file
// built with TRACETREE_SEPARATE_RUNTIME, so that it compiles declarations only. Header-only (include/
// copied, nothing linked), every file that includes this header or sessions.hpp compiles its own
// copy of the runtime, seconds per file, and TRACETREE_ADMIN's listener is compiled only where
// admin/server.hpp is included. A build of its own can do what the library does:
// TRACETREE_SEPARATE_RUNTIME for every file and TRACETREE_RUNTIME_IMPLEMENTATION in exactly one
// (src/runtime.cpp); without that one file, the link fails naming the fix
// (tracetree_runtime_<abi>_is_compiled_by_...).
#ifndef TRACETREE_CONTROL_HPP
#define TRACETREE_CONTROL_HPP

#include "runtime/linkage.hpp"  // first: the platform check, and where this file's runtime is
#include "core/recorder.hpp"
#include "tracetree.hpp"  // the scope macros: a file that controls tracing often annotates too
#include "values.hpp"

#if !defined(__cpp_exceptions) && !defined(__EXCEPTIONS)
#error "tracetree: control.hpp reports bad patterns and limits with exceptions: build this file with exceptions (annotated files, with tracetree.hpp only, may use -fno-exceptions)"
#endif

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

// ---- switches and limits ----------------------------------------------------------------------

void set_enabled(bool on) noexcept;  // the process-wide switch; on by default; off costs one branch per scope
bool enabled() noexcept;

// Limits (values.hpp): bounds on what the recorder keeps.
void set_limits(const Limits& limits);  // std::invalid_argument naming the field when out of range
Limits limits();

void set_thread_name(std::string_view name);  // this thread's name in traces (default: the OS thread name)

// Request context for traces captured on this thread (a request id, the URI), like a logging MDC:
// kept until set again or removed (an empty value removes the key), shown in the header of every trace
// captured on this thread while it is set.
void annotate(std::string_view key, std::string_view value);
void clear_annotations();

// Replaces the clock for every thread (nullptr restores it): tests make timings exact with it.
// Set it while no scope is open; the function returns nanoseconds (ClockFunction: values.hpp).
void set_clock(ClockFunction now) noexcept;

// What the process's recorder is, and how much of its budgets it uses (RecorderInfo: values.hpp).
RecorderInfo recorder_info();

// ---- profiles (Arthas `monitor`, cumulative) ----------------------------------------------------

Profile profile();  // every thread's tree, from any thread, without stopping anyone; exited threads folded
void reset();       // forgets everything recorded: exited threads at once, each live thread at its next scope
// The names of the scopes run so far, as patterns match them ("ns::Class::method", a scope's text),
// unsorted; the admin handler answers a pattern that matches none of them, nor any function, at once.
std::vector<std::string> scope_names();

// ---- timeline (optional): every scope with its start, for Chrome/Perfetto views (views.hpp) ------
// Off by default; while on, every scope takes the slow path and a per-thread lock at its end. Each
// thread keeps its first `max_spans_per_thread` spans since start_timeline(); later ones are counted
// in `dropped`. A span is recorded when its scope ends: running scopes are not in a snapshot.

void start_timeline(std::size_t max_spans_per_thread = 65536);  // std::invalid_argument: 0 or > 16777216
void stop_timeline() noexcept;
Timeline timeline();

TRACETREE_END_NAMESPACE

#if TRACETREE_DETAIL_RUNTIME_HERE
#include "runtime/control-inl.hpp"
#endif
#include "sessions.hpp"  // control.hpp has always brought the sessions along

#endif  // TRACETREE_CONTROL_HPP
