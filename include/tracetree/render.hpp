// tracetree rendering: traces and profiles as Arthas prints them, and as a table for people.
// SPDX-License-Identifier: MIT
//
//   #include <tracetree/render.hpp>
//   tracetree::render(std::cout, trace);                         // Arthas `trace` text
//   tracetree::render(std::cout, tracetree::profile().merged()); // every thread folded into one tree
//   tracetree::render_human(std::cout, trace);                   // aligned columns, ns/µs/ms/s
//
// Renderers only read the plain values of values.hpp, so a saved trace renders as a live one.
// Reading order: the options and functions, then `detail` (the Arthas tree writer, the human table),
// then the definitions.
//
// Arthas's rules: `` `--- `` / `+---` connectors, `"|   "` / `"    "` indents; the traced root as
// `[Xms]`; a call as `[P.PP% Xms ]`, folded calls as `[P.PP% min=Xms,max=Yms,total=Zms,count=N]`,
// the percentage of the direct parent's total as Java's `%.2f` prints it; milliseconds as Java's
// Double.toString prints them (`3.0`, `0.096584`, `8.55E-4`); ` #line` (the scope macro's line);
// `[throws Exception]` or `[throws Exception,N]`; a throw as `throw:<type> #<line> [<what()>]`,
// folded throws with a leading `[count=N]`; TRACETREE_WATCH values (traces that asked for them) as
// `@name=value` lines before a node's children; in a trace, work handed off that ran on another thread
// meanwhile as `[parallel]` after its name, its root's line then saying that percentages may add up to
// more than 100% (kParallelNote); a hand-off's path (continued here, not called here:
// handoff.hpp) as `[continued]`, its innermost node `[continued on <thread>]`, in place of the cost; a
// call merged with such a path (`profile().merged()`) as `[total includes Xms continued under it;
// min,max: its own calls]` after its name; header `ts=yyyy-MM-dd HH:mm:ss.SSS;thread_name=...;id=N`
// (id in decimal, as Arthas 4 prints it); the costliest node below the root in red. Where colour is off
// and the options ask for it (to_string's default does, render()'s does not), that node's line ends
// with ` <- hot` instead: without it the text is Arthas's byte for byte. Likewise the off-CPU brackets
// (cpu_marker; to_string's default, not render()'s): a trace's root ends with
// ` [on CPU 12.00%, off CPU 88.00%: runnable 80.00%, blocked 8.00%]`, a call below it that was
// mostly off CPU with ` [off CPU >= 87.50%]` (values.hpp, OffCpu). And the kernel's thread id
// (tid_marker; neither default asks for it, the admin's HTML pages do): `;tid=N` after `id=N` in a
// trace's, a profile's and a stack's header, where the value knows it (os_thread_id not 0).
#ifndef TRACETREE_RENDER_HPP
#define TRACETREE_RENDER_HPP

#include "text/format.hpp"
#include "values.hpp"

#include <chrono>
#include <iostream>  // std::cout/cerr: colour is automatic only for terminals
#include <ostream>
#include <sstream>   // to_string
#include <string>
#include <utility>
#include <vector>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // isatty
#endif

TRACETREE_BEGIN_NAMESPACE

enum class Colour { automatic, never, always };  // automatic: only when the stream is a terminal

// Named setters: RenderOptions().colour(Colour::never).utc()
class RenderOptions {
public:
    RenderOptions& colour(Colour colour) { colour_ = colour; return *this; }
    RenderOptions& utc(bool on = true) { utc_ = on; return *this; }  // ts= in UTC instead of local time
    // Without colour, end the costliest node's line with ` <- hot` (with colour that node is red instead).
    RenderOptions& hot_marker(bool on = true) { hot_marker_ = on; return *this; }
    // End a trace's root line with its time on and off CPU, and each call mostly off CPU with its share.
    RenderOptions& cpu_marker(bool on = true) { cpu_marker_ = on; return *this; }
    // Add `;tid=N` (the OS thread id, as top -H and perf show it) after a header's `id=N`.
    RenderOptions& tid_marker(bool on = true) { tid_marker_ = on; return *this; }
    Colour colour() const { return colour_; }
    bool utc() const { return utc_; }
    bool hot_marker() const { return hot_marker_; }
    bool cpu_marker() const { return cpu_marker_; }
    bool tid_marker() const { return tid_marker_; }

private:
    Colour colour_ = Colour::automatic;
    bool utc_ = false;
    bool hot_marker_ = false;
    bool cpu_marker_ = false;
    bool tid_marker_ = false;
};

void render(std::ostream& out, const Trace& trace, const RenderOptions& options = {});
void render(std::ostream& out, const Profile& profile, const RenderOptions& options = {});
// One thread's tree, or `profile.merged()`; `taken` is the header's time (default: now).
void render(std::ostream& out, const ThreadProfile& thread, const RenderOptions& options = {});
void render(std::ostream& out, const ThreadProfile& thread, std::chrono::system_clock::time_point taken,
            const RenderOptions& options = {});
// As render(), without colour unless asked and, by default, with the ` <- hot` marker and the off-CPU brackets.
std::string to_string(const Trace& trace, const RenderOptions& options = RenderOptions().colour(Colour::never).hot_marker().cpu_marker());
std::string to_string(const Profile& profile, const RenderOptions& options = RenderOptions().colour(Colour::never).hot_marker().cpu_marker());
std::string to_string(const ThreadProfile& thread, const RenderOptions& options = RenderOptions().colour(Colour::never).hot_marker().cpu_marker());

// The other sessions, as Arthas prints them.
void render(std::ostream& out, const StackTrace& stack, const RenderOptions& options = {});  // `stack`
void render(std::ostream& out, const WatchEvent& event, const RenderOptions& options = {});  // `watch`
void render(std::ostream& out, const MonitorInterval& interval, const RenderOptions& options = {});  // `monitor`

// Aligned columns (total, self, count, min, max) in ns/µs/ms/s, then the tree.
void render_human(std::ostream& out, const Trace& trace);
void render_human(std::ostream& out, const Profile& profile);
void render_human(std::ostream& out, const ThreadProfile& thread);

namespace detail {

inline bool use_colour(std::ostream& out, Colour colour) {
    if (colour != Colour::automatic) return colour == Colour::always;
#if defined(__unix__) || defined(__APPLE__)
    if (out.rdbuf() == std::cout.rdbuf()) return isatty(1) != 0;
    if (out.rdbuf() == std::cerr.rdbuf() || out.rdbuf() == std::clog.rdbuf()) return isatty(2) != 0;
#endif
    return false;
}

// Ends the hot node's line when colour is off; admin/handler.hpp finds it to mark the line in its HTML.
inline constexpr const char* kHotMarker = " <- hot";

// A trace's root: ` [on CPU P%, off CPU P%: runnable P%, blocked P%]` (the split when the source
// knows it), ` [on CPU <= P%, off CPU >= P%]` when the source saw only part of it; a call below it
// whose lower bound is more than half its total: ` [off CPU >= P%]`.
inline void append_off_cpu(std::string& out, const Node& node, bool root) {
    if (!node.off_cpu || node.total.count() <= 0) return;
    const OffCpu& off = *node.off_cpu;
    if (off.at_least && root) {
        out += " [on CPU <= ";
        append_percent(out, node.total - off.off, node.total);
        out += "%, off CPU >= ";
        append_percent(out, off.off, node.total);
        out += "%]";
        return;
    }
    if (off.at_least) {
        if (!node.mostly_off_cpu()) return;
        out += " [off CPU >= ";
        append_percent(out, off.off, node.total);
        out += "%]";
        return;
    }
    out += " [on CPU ";
    append_percent(out, node.total - off.off, node.total);
    out += "%, off CPU ";
    append_percent(out, off.off, node.total);
    if (off.runnable) {
        out += "%: runnable ";
        append_percent(out, *off.runnable, node.total);
        out += "%, blocked ";
        append_percent(out, off.off - *off.runnable, node.total);
    }
    out += "%]";
}

// The cost bracket: root `[Xms]`, a call `[P.PP% Xms ]`, folded `[P.PP% min=..,max=..,total=..,count=N]`.
// `parent` is null for roots and for children of a still-running node (no total to divide by).
inline void append_cost(std::string& out, const Node& node, const Node* parent) {
    if (node.continued) {
        out += node.continued_on.empty() ? "[continued]" : "[continued on " + node.continued_on + ']';
        return;
    }
    if (node.count == 0) {
        out += "[running]";
        return;
    }
    out += '[';
    if (parent != nullptr) {
        append_percent(out, node.total, parent->total);
        out += "% ";
    }
    if (node.count == 1) {
        append_java_millis(out, node.total);
        out += parent != nullptr ? "ms ]" : "ms]";
        return;
    }
    out += "min=";
    append_java_millis(out, node.min);
    out += "ms,max=";
    append_java_millis(out, node.max);
    out += "ms,total=";
    append_java_millis(out, node.total);
    out += "ms,count=";
    out += std::to_string(node.count);
    out += ']';
}

inline const Node* costliest_below(const Node& node, const Node* best) {
    for (const Node& child : node.children) {
        if (child.kind == NodeKind::call && (best == nullptr || child.total > best->total)) best = &child;
        best = costliest_below(child, best);
    }
    return best;
}

// `throw:std::invalid_argument #46 [need >= 2]`: the type, the line when known, what() when there is one.
inline std::string throw_text(const Node& node) {
    std::string text = "throw:" + node.name;
    if (node.line != 0) text += " #" + std::to_string(node.line);
    if (node.message) text += " [" + *node.message + "]";
    return text;
}

// After a root with parallel work below it (a trace's hand-offs): what its percentages mean then.
inline constexpr const char* kParallelNote =
    " [wall time; [parallel] work ran on other threads meanwhile: % of the parent's wall time, may add up to over 100%]";
inline bool has_parallel(const Node& node) {
    for (const Node& child : node.children)
        if (child.parallel || has_parallel(child)) return true;
    return false;
}

// Writes a tree line by line. One buffer holds the current line and one the indent, so a node costs
// appends and a single write, not strings of its own.
struct TreeWriter {
    std::ostream& out;
    const Node* highlighted;  // null: no colour, no marker
    bool colour;              // false: the marker instead
    bool cpu = false;         // the off-CPU brackets
    std::string prefix = "    ";
    std::string text{};

    void line(bool last, const Node& node, const Node* parent, bool with_line) {
        text.assign(prefix).append(last ? "`---" : "+---");
        if (node.kind == NodeKind::thrown) {
            if (node.count > 1) text.append("[count=").append(std::to_string(node.count)).append("] ");
            text.append(throw_text(node)).append(1, '\n');
            out.write(text.data(), static_cast<std::streamsize>(text.size()));
            return;
        }
        const bool red = colour && &node == highlighted;
        if (red) text += "\x1b[31m";
        append_cost(text, node, parent);
        text += red ? " \x1b[m" : " ";
        text += node.name;
        if (with_line && node.line != 0) text.append(" #").append(std::to_string(node.line));
        if (node.file == detail::kTailCallFile) text += " [tail call]";
        if (node.throws == 1) text += " [throws Exception]";
        if (node.throws > 1) text.append(" [throws Exception,").append(std::to_string(node.throws)).append(1, ']');
        if (node.parallel) text += " [parallel]";
        if (parent == nullptr && has_parallel(node)) text += kParallelNote;
        if (node.continued_total.count() != 0 && !node.continued) {
            text += " [total includes ";
            append_java_millis(text, node.continued_total);
            text += node.count > 1 ? "ms continued under it; min,max: its own calls]" : "ms continued under it]";
        }
        if (cpu) append_off_cpu(text, node, parent == nullptr);
        if (!colour && &node == highlighted) text += kHotMarker;
        text += '\n';
        const std::size_t outer = prefix.size();
        prefix += last ? "    " : "|   ";
        for (std::size_t i = 0; i < node.values.size(); ++i)  // TRACETREE_WATCH values, when a trace asked for them
            text.append(prefix)
                .append(i + 1 == node.values.size() && node.children.empty() && node.dropped == 0 ? "`---@" : "+---@")
                .append(node.values[i].first)
                .append(1, '=')
                .append(node.values[i].second)
                .append(1, '\n');
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        const Node* total_holder = node.count != 0 || node.continued ? &node : nullptr;
        for (std::size_t i = 0; i < node.children.size(); ++i)
            line(i + 1 == node.children.size() && node.dropped == 0, node.children[i], total_holder, true);
        if (node.dropped != 0)
            out << prefix << "`---[not recorded: " << node.dropped << " calls past the depth or node limit]\n";
        prefix.resize(outer);
    }
};

// `;tid=N` when asked and known: nothing by default, so that the header stays Arthas's.
inline void write_tid(std::ostream& out, std::uint32_t os_thread_id, const RenderOptions& options) {
    if (options.tid_marker() && os_thread_id != 0) out << ";tid=" << os_thread_id;
}

template <class Value>
void write_header(std::ostream& out, std::chrono::system_clock::time_point time, const Value& value,
                  const std::vector<std::pair<std::string, std::string>>& fields, const RenderOptions& options) {
    out << "`---ts=" << timestamp(time, options.utc()) << ";thread_name=" << value.thread_name << ";id=" << value.thread_id;
    write_tid(out, value.os_thread_id, options);
    for (const auto& field : fields) out << ';' << field.first << '=' << field.second;
    out << '\n';
}

inline std::string without_parentheses(const std::string& name) {  // "a::f()" -> "a::f"
    return name.size() > 2 && name.compare(name.size() - 2, 2, "()") == 0 ? name.substr(0, name.size() - 2) : name;
}
inline std::string basename(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

inline std::string pad_right(const std::string& text, std::size_t width);

inline std::string pad_left(const std::string& text, std::size_t width) {  // by code points, for "µ"
    std::size_t visible = 0;
    for (const char c : text) visible += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return visible >= width ? text : std::string(width - visible, ' ') + text;
}

inline std::string pad_right(const std::string& text, std::size_t width) {
    std::size_t visible = 0;
    for (const char c : text) visible += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return visible >= width ? text : text + std::string(width - visible, ' ');
}

inline void human_rows(std::ostream& out, const Node& node, const std::string& prefix, const std::string& branch) {
    if (node.kind == NodeKind::thrown) {
        out << std::string(22, ' ') << pad_left(std::to_string(node.count), 8) << std::string(22, ' ') << "  " << prefix
            << branch << throw_text(node) << '\n';
        return;
    }
    out << pad_left(duration(node.total), 11) << pad_left(duration(node.self()), 11)
        << pad_left(std::to_string(node.count), 8) << pad_left(duration(node.min), 11)
        << pad_left(duration(node.max), 11) << "  " << prefix << branch << node.name;
    if (node.line != 0 && !branch.empty()) out << " #" << node.line;
    if (node.file == detail::kTailCallFile) out << "  (tail call)";
    if (node.continued) out << (node.continued_on.empty() ? "  (continued)" : "  (continued on " + node.continued_on + ")");
    if (node.throws != 0) out << "  (" << node.throws << " threw)";
    if (node.parallel) out << "  (parallel: ran on another thread meanwhile, not part of the total above)";
    if (node.continued_total.count() != 0 && !node.continued)
        out << "  (total includes " << duration(node.continued_total) << " continued under it; min, max: its own calls)";
    if (node.dropped != 0) out << "  (" << node.dropped << " calls below not recorded)";
    if (node.off_cpu && (!node.off_cpu->at_least || node.mostly_off_cpu() || branch.empty())) {
        std::string off;
        append_off_cpu(off, node, branch.empty());
        out << " " << off;
    }
    out << '\n';
    const std::string inner = branch.empty() ? prefix : prefix + (branch == "`- " ? "   " : "|  ");
    for (std::size_t i = 0; i < node.children.size(); ++i)
        human_rows(out, node.children[i], inner, i + 1 == node.children.size() ? "`- " : "+- ");
}

inline std::string human_tid(std::uint32_t os_thread_id) {  // the table's title is not Arthas's: always, when known
    return os_thread_id == 0 ? std::string() : ", tid " + std::to_string(os_thread_id);
}

inline void human_table(std::ostream& out, const std::string& title, const std::vector<Node>& roots) {
    out << title << '\n' << "      total       self   count        min        max  call tree\n";
    for (const Node& root : roots) human_rows(out, root, "", "");
    out << '\n';
}

}  // namespace detail

inline void render(std::ostream& out, const Trace& trace, const RenderOptions& options) {
    detail::write_header(out, trace.start, trace, trace.fields, options);
    const bool colour = detail::use_colour(out, options.colour());
    const Node* highlighted = colour || options.hot_marker() ? detail::costliest_below(trace.root, nullptr) : nullptr;
    detail::TreeWriter{out, highlighted, colour, options.cpu_marker()}.line(true, trace.root, nullptr, false);
    out << '\n';
}

inline void render(std::ostream& out, const ThreadProfile& thread, std::chrono::system_clock::time_point taken,
                   const RenderOptions& options) {
    std::vector<std::pair<std::string, std::string>> fields;
    if (thread.exited) fields.emplace_back("exited", thread.exited_threads > 1 ? std::to_string(thread.exited_threads) : "true");
    if (thread.dropped_depth != 0) fields.emplace_back("dropped_depth", std::to_string(thread.dropped_depth));
    if (thread.dropped_nodes != 0) fields.emplace_back("dropped_nodes", std::to_string(thread.dropped_nodes));
    detail::write_header(out, taken, thread, fields, options);
    const bool colour = detail::use_colour(out, options.colour());
    const Node* highlighted = nullptr;
    if (colour || options.hot_marker())
        for (const Node& root : thread.roots) highlighted = detail::costliest_below(root, highlighted);
    detail::TreeWriter writer{out, highlighted, colour};
    for (std::size_t i = 0; i < thread.roots.size(); ++i) writer.line(i + 1 == thread.roots.size(), thread.roots[i], nullptr, false);
    out << '\n';
}

inline void render(std::ostream& out, const ThreadProfile& thread, const RenderOptions& options) {
    render(out, thread, std::chrono::system_clock::now(), options);
}

inline void render(std::ostream& out, const Profile& profile, const RenderOptions& options) {
    for (const ThreadProfile& thread : profile.threads) render(out, thread, profile.taken, options);
}

// `ts=...;thread_name=...;id=N[;tid=N]`, then `    @` the matching scope and `        at` each scope around it.
inline void render(std::ostream& out, const StackTrace& stack, const RenderOptions& options) {
    out << "ts=" << detail::timestamp(stack.start, options.utc()) << ";thread_name=" << stack.thread_name
        << ";id=" << stack.thread_id;
    detail::write_tid(out, stack.os_thread_id, options);
    for (const auto& field : stack.fields) out << ';' << field.first << '=' << field.second;
    out << '\n';
    // The machine stack's callers when it was walked, else the open scopes around the matching one.
    const bool machine = !stack.callers.empty();
    const std::vector<StackFrame>& at = machine ? stack.callers : stack.frames;
    if (!stack.frames.empty()) out << "    @" << detail::without_parentheses(stack.frames[0].name) << "()\n";
    for (std::size_t i = machine ? 0 : 1; i < at.size(); ++i) {
        const StackFrame& frame = at[i];
        out << "        at " << detail::without_parentheses(frame.name) << '(' << detail::basename(frame.file);
        if (frame.line != 0) out << ':' << frame.line;
        out << ")\n";
    }
    out << '\n';
}

// `method=... location=AtExit`, then `ts=...; [cost=Xms] result=@Values[` and one `name=value,` per line.
inline void render(std::ostream& out, const WatchEvent& event, const RenderOptions& options) {
    out << "method=" << detail::without_parentheses(event.scope)
        << " location=" << (event.threw ? "AtExceptionExit" : "AtExit") << '\n'
        << "ts=" << detail::timestamp(event.start, options.utc()) << "; [cost=" << detail::java_millis(event.cost)
        << "ms] result=@Values[";
    if (!event.values.empty()) out << '\n';
    for (const auto& value : event.values) out << "    " << value.first << '=' << value.second << ",\n";
    out << "]\n";
}

// Arthas's monitor table, with the interval's min and max besides the average.
inline void render(std::ostream& out, const MonitorInterval& interval, const RenderOptions& options) {
    std::vector<std::vector<std::string>> rows = {
        {"timestamp", "class", "method", "total", "success", "fail", "avg-rt(ms)", "min-rt(ms)", "max-rt(ms)", "fail-rate"}};
    const std::string ts = detail::timestamp(interval.end, options.utc()).substr(0, 19);
    for (const MonitorRow& row : interval.rows) {
        const std::string name = detail::without_parentheses(row.name);
        const std::size_t split = name.rfind("::");
        const auto millis = [](double ns) { return detail::fixed2(ns / 1e6); };
        rows.push_back({ts, split == std::string::npos ? "" : name.substr(0, split),
                        split == std::string::npos ? name : name.substr(split + 2), std::to_string(row.calls),
                        std::to_string(row.calls - row.failed), std::to_string(row.failed),
                        millis(static_cast<double>(row.total.count()) / static_cast<double>(row.calls)),
                        millis(static_cast<double>(row.min.count())), millis(static_cast<double>(row.max.count())),
                        detail::fixed2(100.0 * static_cast<double>(row.failed) / static_cast<double>(row.calls)) + "%"});
    }
    std::vector<std::size_t> widths(rows.front().size(), 0);
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    std::size_t line = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        std::string text;
        for (std::size_t c = 0; c < rows[i].size(); ++c) text += ' ' + detail::pad_right(rows[i][c], widths[c]) + ' ';
        while (!text.empty() && text.back() == ' ') text.pop_back();
        out << text << '\n';
        line = std::max(line, text.size());
        if (i == 0) out << std::string(line + 1, '-') << '\n';
    }
    out << '\n';
}

inline std::string to_string(const Trace& trace, const RenderOptions& options) {
    std::ostringstream out;
    render(out, trace, options);
    return out.str();
}
inline std::string to_string(const Profile& profile, const RenderOptions& options) {
    std::ostringstream out;
    render(out, profile, options);
    return out.str();
}
inline std::string to_string(const ThreadProfile& thread, const RenderOptions& options) {
    std::ostringstream out;
    render(out, thread, options);
    return out.str();
}

inline void render_human(std::ostream& out, const Trace& trace) {
    detail::human_table(out,
                        "trace of " + trace.root.name + " on " + trace.thread_name + " (id " +
                            std::to_string(trace.thread_id) + detail::human_tid(trace.os_thread_id) + ") at " +
                            detail::timestamp(trace.start, false),
                        {trace.root});
}
inline void render_human(std::ostream& out, const ThreadProfile& thread) {
    detail::human_table(out,
                        "profile of " + thread.thread_name + " (id " + std::to_string(thread.thread_id) +
                            detail::human_tid(thread.os_thread_id) + (thread.exited ? ", exited" : "") + ")",
                        thread.roots);
}
inline void render_human(std::ostream& out, const Profile& profile) {
    for (const ThreadProfile& thread : profile.threads) render_human(out, thread);
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RENDER_HPP
