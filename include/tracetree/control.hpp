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
// timeline; the implementation is detail/runtime.hpp.
#ifndef TRACETREE_CONTROL_HPP
#define TRACETREE_CONTROL_HPP

#include "detail/platform.hpp"  // first: a platform without what the recorder needs gets an #error saying so
#include "detail/recorder.hpp"
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

// Bounds on what the recorder keeps. What they cut is counted and shown (`dropped`), never lost
// silently; memory stays bounded whatever the program names or however many threads it starts.
struct Limits {
    std::uint32_t max_depth = 256;        // nesting recorded per thread, 1 ..= 4096 (applies at once)
    std::uint32_t max_nodes = 65536;      // call-tree nodes per thread, 16 ..= 16777216 (trees started later)
    std::uint64_t max_total_nodes = 1u << 22;  // nodes of all live threads (64 bytes each), and apart of all exited ones, >= 256
    std::uint32_t max_name_length = 1024;      // run-time names and annotations are cut here, 1 ..= 65536
    std::uint64_t max_name_bytes = 16u << 20;  // memory held by distinct run-time names, all threads, >= 1024
    std::uint32_t max_exited_threads = 256;    // exited threads kept apart (by name); the rest fold into one
};
void set_limits(const Limits& limits);  // std::invalid_argument naming the field when out of range
Limits limits();

void set_thread_name(std::string_view name);  // this thread's name in traces (default: the OS thread name)

// Request context for traces captured on this thread (a request id, the URI), like a logging MDC:
// kept until set again or removed (an empty value removes the key), shown in the header of every trace
// captured on this thread while it is set.
void annotate(std::string_view key, std::string_view value);
void clear_annotations();

// Replaces the clock for every thread (nullptr restores it): tests make timings exact with it.
// Set it while no scope is open; the function returns nanoseconds.
using ClockFunction = std::uint64_t (*)() noexcept;
void set_clock(ClockFunction now) noexcept;

// What the process's recorder is, and how much of its budgets it uses.
struct RecorderInfo {
    std::string version;             // "0.2.0"
    std::string module;              // the executable or library whose copy runs the recorder
    std::vector<std::string> others; // recorders of other tracetree versions or standard libraries in this process
    std::uint64_t threads = 0;       // live threads that have recorded
    std::uint64_t nodes = 0;         // node capacity allocated, all threads
    std::uint64_t spare_nodes = 0;   // freed with exited threads' trees, kept for new ones (at most 65,536)
    std::uint64_t name_bytes = 0;    // memory held by interned run-time names
    std::uint64_t dropped_names = 0; // scopes not recorded: the name budget was full
    bool throw_hook = false;         // throws are recorded as throw nodes (checked when the recorder starts)
    std::string throw_hook_note;     // why not, when throw_hook is false
    bool exported = false;           // copies loaded later (plugins, RTLD_LOCAL too) find this recorder
};
RecorderInfo recorder_info();

// ---- profiles (Arthas `monitor`, cumulative) ----------------------------------------------------

Profile profile();  // every thread's tree, from any thread, without stopping anyone; exited threads folded
void reset();       // forgets everything recorded: exited threads at once, each live thread at its next scope

// ---- timeline (optional): every scope with its start, for Chrome/Perfetto views (views.hpp) ------
// Off by default; while on, every scope takes the slow path and a per-thread lock at its end. Each
// thread keeps its first `max_spans_per_thread` spans since start_timeline(); later ones are counted
// in `dropped`. A span is recorded when its scope ends: running scopes are not in a snapshot.

void start_timeline(std::size_t max_spans_per_thread = 65536);  // std::invalid_argument: 0 or > 16777216
void stop_timeline() noexcept;
Timeline timeline();

TRACETREE_END_NAMESPACE

// The implementation needs sessions.hpp's declarations too; sessions.hpp ends by including it.
#include "sessions.hpp"

#endif  // TRACETREE_CONTROL_HPP
