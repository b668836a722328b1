// tracetree views: folded stacks, SVG flame graphs, Chrome trace-event JSON, a JSON tree that loads
// back, and before/after diffs. SPDX-License-Identifier: MIT
//
//   #include <tracetree/views.hpp>
//   std::ofstream svg("profile.svg");
//   tracetree::write_flamegraph_svg(svg, tracetree::profile());  // profile(): control.hpp
//
// Everything here only reads the plain values of values.hpp (Trace, Profile, Timeline),
// so a saved trace renders exactly as a live one. Reading order: the public declarations, then
// `detail::views` (text helpers, the frame layout shared by both flame graphs, the diff tree, the JSON
// reader), then the definitions in the order of the declarations.
//
// Every writer escapes what it writes: any name (quotes, backslashes, control characters, `;`, bytes
// that are not UTF-8) gives valid output. Bytes that are not UTF-8 become U+FFFD, so a JSON round trip
// is exact for UTF-8 names only.
#ifndef TRACETREE_VIEWS_HPP
#define TRACETREE_VIEWS_HPP

#include "text/format.hpp"
#include "text/text.hpp"
#include "values.hpp"

#include <algorithm>         // std::stable_sort, std::max
#include <charconv>          // std::to_chars/from_chars: numbers without the stream's locale
#include <chrono>
#include <cmath>             // std::sqrt for the diff colour scale
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <sstream>           // diff_to_string
#include <stdexcept>         // JsonError is a std::invalid_argument
#include <string>
#include <string_view>
#include <unordered_map>     // diff: siblings by name
#include <variant>           // read_json: a Trace or a Profile
#include <vector>

TRACETREE_BEGIN_NAMESPACE

// ---- folded stacks: `root;child;grandchild 1234` per line (flamegraph.pl, inferno, speedscope) ----

enum class FoldedValue {
    self_us,   // time spent in the frame itself, in microseconds: what flame-graph tools expect
    total_us,  // the frame's whole time: each line stands alone (tools would count children twice)
    count,     // completed calls of the frame
};
struct FoldedOptions {
    FoldedValue value = FoldedValue::self_us;
    bool thread_frames = false;  // first frame is "[thread-name tid=N]" (N: the OS thread id when known); a profile is otherwise merged
};
// Each line is `frame;frame;frame VALUE`: VALUE in whole microseconds (rounded) for self_us and
// total_us, in calls for count. Lines whose value is 0 are left out (throw nodes have no time, so
// they appear only with FoldedValue::count). In names `;` becomes `,` and control characters `?`.
void write_folded(std::ostream& out, const Trace& trace, const FoldedOptions& options = {});
void write_folded(std::ostream& out, const Profile& profile, const FoldedOptions& options = {});
void write_folded(std::ostream& out, const ThreadProfile& thread, const FoldedOptions& options = {});

// ---- SVG flame graph: one self-contained file, no scripts ---------------------------------------

enum class DiffWidths { before, after };  // which side sizes the frames of a diff flame graph
struct FlameGraphOptions {
    std::string title;                 // empty: "Flame graph" or "Diff flame graph"
    std::uint32_t width = 1200;        // pixels, 200 ..= 100000
    bool icicle = false;               // root at the top instead of the bottom
    bool thread_frames = false;        // profiles: one frame per thread under "all" (else merged)
    double min_frame_width = 0.1;      // pixels: narrower frames (and all below them) are not drawn
    DiffWidths diff_widths = DiffWidths::before;  // diffs: "before" shows what a fix removed
};
void write_flamegraph_svg(std::ostream& out, const Trace& trace, const FlameGraphOptions& options = {});
void write_flamegraph_svg(std::ostream& out, const Profile& profile, const FlameGraphOptions& options = {});
void write_flamegraph_svg(std::ostream& out, const ThreadProfile& thread, const FlameGraphOptions& options = {});

// ---- Chrome trace-event JSON (Perfetto UI, chrome://tracing) from the timeline recorder ----------

// One "X" event per span (µs with ns precision), pid the recording process's id, thread_name/process_name
// metadata, and per thread
// whose bound was hit an instant event "tracetree: N spans dropped" at the end of its last kept span.
void write_chrome_trace(std::ostream& out, const Timeline& timeline);

// ---- JSON tree of a trace or profile, and loading it back ---------------------------------------

void write_json(std::ostream& out, const Trace& trace);
void write_json(std::ostream& out, const Profile& profile);
void write_json(std::ostream& out, const ThreadProfile& thread);  // a profile of that one thread

// Malformed input: where, and what was expected.
class JsonError : public std::invalid_argument {
public:
    JsonError(const std::string& what, std::size_t offset, std::size_t line, std::size_t column);
    std::size_t offset() const noexcept { return offset_; }  // bytes from the start
    std::size_t line() const noexcept { return line_; }      // from 1
    std::size_t column() const noexcept { return column_; }  // bytes from the line start, from 1

private:
    std::size_t offset_, line_, column_;
};

// The single entry point of the loader: any input either gives a value or throws JsonError (nesting
// is bounded, so hostile input cannot exhaust the stack). Unknown keys are skipped; missing numbers
// read as 0; "name" is required.
std::variant<Trace, Profile> read_json(std::string_view text);
Trace read_trace_json(std::string_view text);      // JsonError also when the text holds a profile
Profile read_profile_json(std::string_view text);  // and vice versa

// ---- diffs: before (say, buggy) against after (fixed) ------------------------------------------

struct DiffOptions {
    Nanos min_change{0};  // hide nodes whose total changed by less, whose count is unchanged, and
                          // below which nothing is shown
};
// Nodes are matched by call site, then by name (line numbers move between builds); each line shows
// `[74.2ms -> 0ms (-74.2ms), count 31 -> 0]`; the largest change comes first among siblings.
void render_diff(std::ostream& out, const Trace& before, const Trace& after, const DiffOptions& options = {});
void render_diff(std::ostream& out, const Profile& before, const Profile& after, const DiffOptions& options = {});
std::string diff_to_string(const Trace& before, const Trace& after, const DiffOptions& options = {});
void render_diff(std::ostream& out, const ThreadProfile& before, const ThreadProfile& after, const DiffOptions& options = {});
std::string diff_to_string(const Profile& before, const Profile& after, const DiffOptions& options = {});
std::string diff_to_string(const ThreadProfile& before, const ThreadProfile& after, const DiffOptions& options = {});

// Red: self time grew, blue: it shrank, grey: unchanged; the deeper the colour, the larger the change.
void write_diff_flamegraph_svg(std::ostream& out, const Trace& before, const Trace& after,
                               const FlameGraphOptions& options = {});
void write_diff_flamegraph_svg(std::ostream& out, const Profile& before, const Profile& after,
                               const FlameGraphOptions& options = {});
void write_diff_flamegraph_svg(std::ostream& out, const ThreadProfile& before, const ThreadProfile& after,
                               const FlameGraphOptions& options = {});

// =================================================================================================

namespace detail {
namespace views {

// ---- text ----------------------------------------------------------------------------------


inline std::string json_string(std::string_view raw) {
    static const char hex[] = "0123456789abcdef";
    std::string out = "\"";
    for (char c : utf8(raw)) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') (out += '\\') += c;
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (u < 0x20 || u == 0x7F) ((out += "\\u00") += hex[u >> 4]) += hex[u & 15];
        else out += c;
    }
    return out += '"';
}

inline std::string folded_frame(std::string_view raw) {
    std::string out = utf8(raw);
    for (char& c : out) {
        if (c == ';') c = ',';
        else if (is_control(static_cast<unsigned char>(c))) c = '?';
    }
    return out;
}

inline std::string plain_text(std::string_view raw) {  // one terminal line: no control characters
    std::string out = utf8(raw);
    for (char& c : out)
        if (is_control(static_cast<unsigned char>(c))) c = '?';
    return out;
}

inline std::size_t code_points(std::string_view text) noexcept {  // of valid UTF-8
    std::size_t n = 0;
    for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

// The first `keep` code points and "…" when `text` has more than `fit` of them (valid UTF-8 in).
inline std::string ellipsize(const std::string& text, std::size_t fit) {
    if (code_points(text) <= fit) return text;
    if (fit == 0) return "";
    std::size_t kept = 0, at = 0;
    while (at < text.size() && kept < fit - 1) {
        ++at;
        while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        ++kept;
    }
    return text.substr(0, at) + "\xE2\x80\xA6";
}

inline std::string signed_duration(Nanos d) { return d.count() > 0 ? "+" + duration(d) : duration(d); }

inline std::string share(Nanos part, Nanos whole) { return whole.count() > 0 ? percent(part, whole) + "%" : "0%"; }

// async-profiler's `[name tid=N]`: the OS thread id where the value knows it (os_thread_id), so
// that the frame matches top -H and perf; else the recorder's own thread_id, as before.
template <class Value>
std::string thread_frame(const Value& thread) {
    const std::uint32_t tid = thread.os_thread_id != 0 ? thread.os_thread_id : thread.thread_id;
    return "[" + thread.thread_name + " tid=" + std::to_string(tid) + "]";
}

// ---- flame-graph layout, shared by the plain and the diff graph --------------------------------

struct Frame {
    std::string label;    // drawn in the box (shortened to fit)
    std::string tooltip;  // the <title>: the full name and every number
    int red = 0, green = 0, blue = 0;
    Nanos size{};         // the box width in time
    std::vector<Frame> children;
};

inline std::uint32_t fnv1a(std::string_view text) noexcept {
    std::uint32_t hash = 2166136261u;
    for (char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
    return hash;
}

// Warm colours from the name alone, so a function keeps its colour across graphs and runs.
inline void name_colour(Frame& frame, std::string_view name) {
    const std::uint32_t h = fnv1a(name);
    frame.red = static_cast<int>(205 + (h & 0xFF) % 51);
    frame.green = static_cast<int>(90 + ((h >> 8) & 0xFF) % 131);
    frame.blue = static_cast<int>(30 + ((h >> 16) & 0xFF) % 51);
}

inline Frame plain_frame(const Node& node, Nanos whole) {
    Frame frame;
    frame.size = std::max(node.total, Nanos(0));
    const std::string part = share(node.total, whole);
    frame.label = node.name + " (" + duration(node.total) + ", " + part + ", " + std::to_string(node.count) +
                  (node.count == 1 ? " call)" : " calls)");
    frame.tooltip = node.name + "\ntotal " + duration(node.total) + " (" + part + "), self " +
                    duration(node.self()) + "\ncount " + std::to_string(node.count) + ", min " +
                    duration(node.min) + ", max " + duration(node.max);
    if (node.throws != 0) frame.tooltip += "\nthrew " + std::to_string(node.throws);
    if (node.dropped != 0) frame.tooltip += "\n" + std::to_string(node.dropped) + " calls below not recorded";
    if (node.parallel) {  // its width is of the parent's wall time too: parallel siblings are scaled to fit
        frame.label += " [parallel]";
        frame.tooltip += "\nparallel: ran on another thread meanwhile, not part of the parent's total";
    }
    if (!node.file.empty()) frame.tooltip += "\n" + node.file + ":" + std::to_string(node.line);
    name_colour(frame, node.name);
    if (node.off_cpu && node.total.count() > 0) {
        const OffCpu& off = *node.off_cpu;
        frame.tooltip += std::string("\noff CPU ") + (off.at_least ? ">= " : "") + duration(off.off) + " (" + share(off.off, node.total) + ")";
        if (off.runnable)
            frame.tooltip += ": runnable " + duration(*off.runnable) + ", blocked " + duration(off.off - *off.runnable);
        if (node.mostly_off_cpu()) {  // cool grey-blue: time the thread did not run, not code to look at
            frame.label += " [off CPU]";
            frame.red = 150;
            frame.green = 170;
            frame.blue = 200;
        }
    }
    for (const Node& child : node.children)
        if (child.kind == NodeKind::call) frame.children.push_back(plain_frame(child, whole));  // a throw has no width
    return frame;
}

inline Frame synthetic_frame(const std::string& name, std::vector<Frame> children, const std::string& text) {
    Frame frame;
    for (const Frame& child : children) frame.size += child.size;
    frame.label = name + " (" + duration(frame.size) + ", " + text + ")";
    frame.tooltip = name + "\ntotal " + duration(frame.size) + "\n" + text;
    frame.red = frame.green = frame.blue = 200;
    frame.children = std::move(children);
    return frame;
}

struct Box {
    const Frame* frame;
    double x, width;
    std::size_t depth;
};

// Boxes in time order along x: a child starts where its previous sibling ends. Children whose sizes add
// up to more than their parent (clock rounding, or a hand-edited file) are scaled down to fit in it.
inline void layout(const Frame& frame, double x, double width, std::size_t depth, double min_width,
                   std::vector<Box>& boxes) {
    if (width < min_width || width <= 0) return;
    boxes.push_back({&frame, x, width, depth});
    double sum = 0;
    for (const Frame& child : frame.children) sum += static_cast<double>(child.size.count());
    const double parent = static_cast<double>(frame.size.count());
    const double scale = parent <= 0 ? 0 : width / std::max(parent, sum);
    for (const Frame& child : frame.children) {
        const double child_width = static_cast<double>(child.size.count()) * scale;
        layout(child, x, child_width, depth + 1, min_width, boxes);
        x += child_width;
    }
}

inline void write_svg(std::ostream& out, const Frame& root, const FlameGraphOptions& options,
                      const std::string& title, const std::string& subtitle) {
    if (options.width < 200 || options.width > 100000)
        throw std::invalid_argument("tracetree: flame graph width must be between 200 and 100000, got " +
                                    std::to_string(options.width));
    constexpr double kFrameHeight = 17, kGap = 1, kTop = 36, kBottom = 26, kSide = 10;
    constexpr double kCharWidth = 7.3;  // a 12px monospace face is 7.2px per character: a little spare
    const double usable = options.width - 2 * kSide;
    std::vector<Box> boxes;
    layout(root, kSide, usable, 0, std::max(options.min_frame_width, 0.0), boxes);
    std::size_t levels = 1;
    for (const Box& box : boxes) levels = std::max(levels, box.depth + 1);
    const double height = kTop + static_cast<double>(levels) * (kFrameHeight + kGap) + kBottom;
    const std::string w = std::to_string(options.width), h = fixed(height, 0);

    out << "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
        << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << w << "\" height=\"" << h
        << "\" viewBox=\"0 0 " << w << ' ' << h
        << "\" font-family=\"DejaVu Sans Mono,Menlo,Consolas,monospace\" font-size=\"12\">\n"
        << "<style>.f:hover rect{stroke:#000;stroke-width:1}.f rect{stroke:#fff;stroke-width:0.5}</style>\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"#f8f8f8\"/>\n"
        << "<text x=\"" << fixed(options.width / 2.0, 1) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"16\">"
        << markup(title, false) << "</text>\n"
        << "<text x=\"" << fixed(kSide, 0) << "\" y=\"" << fixed(height - 9, 0) << "\" fill=\"#555\">"
        << markup(subtitle, false) << "</text>\n";
    for (const Box& box : boxes) {
        const Frame& frame = *box.frame;
        const double level = static_cast<double>(box.depth);
        const double y = options.icicle ? kTop + level * (kFrameHeight + kGap)
                                        : height - kBottom - (level + 1) * (kFrameHeight + kGap);
        const double room = box.width - 6;
        const std::string label = room < 4 * kCharWidth
                                      ? ""
                                      : ellipsize(plain_text(box.frame->label), static_cast<std::size_t>(room / kCharWidth));
        out << "<g class=\"f\"><title>" << markup(box.frame->tooltip, false) << "</title><rect x=\"" << fixed(box.x, 3)
            << "\" y=\"" << fixed(y, 1) << "\" width=\"" << fixed(box.width, 3) << "\" height=\"" << fixed(kFrameHeight, 0)
            << "\" fill=\"rgb(" << std::to_string(frame.red) << ',' << std::to_string(frame.green) << ','
            << std::to_string(frame.blue) << ")\"/>";
        // Perceived brightness (ITU-R BT.601 weights): dark fills get white labels.
        const bool dark = 299 * frame.red + 587 * frame.green + 114 * frame.blue < 140000;
        if (!label.empty())
            out << "<text x=\"" << fixed(box.x + 3, 3) << "\" y=\"" << fixed(y + 12.5, 1)
                << (dark ? "\" fill=\"#fff\">" : "\">") << markup(label, false) << "</text>";
        out << "</g>\n";
    }
    out << "</svg>\n";
}

// ---- diff tree -----------------------------------------------------------------------------

struct DiffNode {
    const Node* before = nullptr;  // null: only in after
    const Node* after = nullptr;   // null: only in before
    std::vector<DiffNode> children;

    const Node& any() const { return after != nullptr ? *after : *before; }
    Nanos total_before() const { return before != nullptr ? before->total : Nanos(0); }
    Nanos total_after() const { return after != nullptr ? after->total : Nanos(0); }
    Nanos change() const { return total_after() - total_before(); }
    Nanos self_change() const {
        return (after != nullptr ? after->self() : Nanos(0)) - (before != nullptr ? before->self() : Nanos(0));
    }
    std::uint64_t count_before() const { return before != nullptr ? before->count : 0; }
    std::uint64_t count_after() const { return after != nullptr ? after->count : 0; }
};

inline Nanos magnitude(Nanos d) { return d < Nanos(0) ? -d : d; }

// Pairs by call site first, then by name in order, so a function that moved lines between the two
// builds still lines up. Siblings come out largest change first; equal changes keep their order.
inline std::vector<DiffNode> diff_children(const std::vector<Node>* before, const std::vector<Node>* after) {
    static const std::vector<Node> none;
    const std::vector<Node>& b = before != nullptr ? *before : none;
    const std::vector<Node>& a = after != nullptr ? *after : none;
    std::unordered_map<std::string_view, std::vector<std::size_t>> by_name;
    for (std::size_t i = a.size(); i-- > 0;) by_name[a[i].name].push_back(i);  // reversed: pop from back
    std::vector<const Node*> partner(b.size(), nullptr);
    std::vector<bool> used(a.size(), false);
    for (int pass = 0; pass < 2; ++pass) {
        for (std::size_t i = 0; i < b.size(); ++i) {
            if (partner[i] != nullptr) continue;
            const auto found = by_name.find(b[i].name);
            if (found == by_name.end()) continue;
            std::vector<std::size_t>& candidates = found->second;
            for (std::size_t k = candidates.size(); k-- > 0;) {
                const std::size_t j = candidates[k];
                if (used[j] || (pass == 0 && !b[i].same_site(a[j]))) continue;
                used[j] = true;
                partner[i] = &a[j];
                candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(k));
                break;
            }
        }
    }
    std::vector<DiffNode> out;
    for (std::size_t i = 0; i < b.size(); ++i) out.push_back({&b[i], partner[i], {}});
    for (std::size_t j = 0; j < a.size(); ++j)
        if (!used[j]) out.push_back({nullptr, &a[j], {}});
    for (DiffNode& node : out)
        node.children = diff_children(node.before != nullptr ? &node.before->children : nullptr,
                                      node.after != nullptr ? &node.after->children : nullptr);
    std::stable_sort(out.begin(), out.end(),
                     [](const DiffNode& x, const DiffNode& y) { return magnitude(x.change()) > magnitude(y.change()); });
    return out;
}

// A node is shown when it changed enough, or when something below it did (its path stays visible).
inline bool shown(const DiffNode& node, const DiffOptions& options) {
    if (magnitude(node.change()) >= options.min_change || node.count_before() != node.count_after()) return true;
    for (const DiffNode& child : node.children)
        if (shown(child, options)) return true;
    return false;
}

inline void diff_rows(std::ostream& out, const DiffNode& node, const std::string& prefix, bool last,
                      const DiffOptions& options) {
    out << prefix << (last ? "`---[" : "+---[") << duration(node.total_before()) << " -> "
        << duration(node.total_after()) << " (" << signed_duration(node.change()) << "), count "
        << node.count_before() << " -> " << node.count_after() << "] " << plain_text(node.any().name);
    if (node.after == nullptr) out << "  [only in before]";
    if (node.before == nullptr) out << "  [only in after]";
    out << '\n';
    std::vector<const DiffNode*> visible;
    for (const DiffNode& child : node.children)
        if (shown(child, options)) visible.push_back(&child);
    const std::size_t hidden = node.children.size() - visible.size();
    const std::string inner = prefix + (last ? "    " : "|   ");
    for (std::size_t i = 0; i < visible.size(); ++i)
        diff_rows(out, *visible[i], inner, i + 1 == visible.size() && hidden == 0, options);
    if (hidden != 0)
        out << inner << "`---[" << hidden << (hidden == 1 ? " call site" : " call sites")
            << " changed by less than " << duration(options.min_change) << "]\n";
}

inline void diff_forest(std::ostream& out, const std::vector<DiffNode>& roots, const DiffOptions& options) {
    if (options.min_change < Nanos(0)) throw std::invalid_argument("tracetree: negative min_change");
    Nanos before{0}, after{0};
    for (const DiffNode& root : roots) before += root.total_before(), after += root.total_after();
    out << "diff before -> after: " << duration(before) << " -> " << duration(after) << " ("
        << signed_duration(after - before) << "), largest change first\n";
    for (std::size_t i = 0; i < roots.size(); ++i) diff_rows(out, roots[i], "", i + 1 == roots.size(), options);
}

inline Frame diff_frame(const DiffNode& node, DiffWidths widths, Nanos largest) {
    Frame frame;
    const Node& any = node.any();
    frame.size = std::max(widths == DiffWidths::before ? node.total_before() : node.total_after(), Nanos(0));
    frame.label = any.name + " (" + duration(node.total_before()) + " -> " + duration(node.total_after()) +
                  (node.after == nullptr ? ", only in before)" : node.before == nullptr ? ", only in after)" : ")");
    frame.tooltip = any.name + "\ntotal " + duration(node.total_before()) + " -> " + duration(node.total_after()) +
                    " (" + signed_duration(node.change()) + ")\nself change " + signed_duration(node.self_change()) +
                    "\ncount " + std::to_string(node.count_before()) + " -> " + std::to_string(node.count_after());
    if (node.after == nullptr) frame.tooltip += "\nonly in before";
    if (node.before == nullptr) frame.tooltip += "\nonly in after";
    // Grey when unchanged, full colour for the largest change; the square root keeps a change of a
    // tenth of the largest visible (a third of the colour) while microseconds stay grey.
    const Nanos change = node.self_change();
    const double t = largest.count() <= 0
                         ? 0.0
                         : std::sqrt(static_cast<double>(magnitude(change).count()) / static_cast<double>(largest.count()));
    const double grey = 220, r = change > Nanos(0) ? 225 : 40, g = change > Nanos(0) ? 45 : 100,
                 b = change > Nanos(0) ? 40 : 225;
    const auto mix = [&](double to) { return static_cast<int>(grey + (to - grey) * t + 0.5); };
    frame.red = mix(r), frame.green = mix(g), frame.blue = mix(b);
    for (const DiffNode& child : node.children) frame.children.push_back(diff_frame(child, widths, largest));
    return frame;
}

inline Nanos largest_self_change(const std::vector<DiffNode>& nodes, Nanos best) {
    for (const DiffNode& node : nodes)
        best = largest_self_change(node.children, std::max(best, magnitude(node.self_change())));
    return best;
}

inline void write_diff_svg(std::ostream& out, const std::vector<DiffNode>& roots, const FlameGraphOptions& options) {
    const Nanos largest = largest_self_change(roots, Nanos(0));
    std::vector<Frame> frames;
    for (const DiffNode& root : roots) frames.push_back(diff_frame(root, options.diff_widths, largest));
    const char* side = options.diff_widths == DiffWidths::before ? "before" : "after";
    Frame root = frames.size() == 1 ? std::move(frames.front())
                                    : synthetic_frame("all", std::move(frames), std::string("widths: ") + side);
    write_svg(out, root, options, options.title.empty() ? "Diff flame graph" : options.title,
              std::string("widths: ") + side + "; colour: self time after - before (red slower, blue faster, "
                  "grey unchanged)");
}

// ---- JSON reader ---------------------------------------------------------------------------

// JSON nesting allowed: a node takes two levels (object and children array), so about 1000 levels
// of calls load; deeper input is refused before recursion could exhaust the stack.
inline constexpr std::size_t kMaxJsonDepth = 2048;

class JsonReader {
public:
    explicit JsonReader(std::string_view text) : text_(text) {}

    [[noreturn]] void fail_at(const std::string& what, std::size_t at) const {
        at = std::min(at, text_.size());
        std::size_t line = 1, line_start = 0;
        for (std::size_t i = 0; i < at; ++i)
            if (text_[i] == '\n') ++line, line_start = i + 1;
        throw JsonError(what, at, line, at - line_start + 1);
    }
    [[noreturn]] void fail(const std::string& what) const { fail_at(what, pos_); }

    std::size_t position() { return skip_space(), pos_; }
    void finish() {
        if (skip_space(), pos_ != text_.size()) fail("unexpected text after the JSON value");
    }

    char peek() {
        skip_space();
        if (pos_ >= text_.size()) fail("unexpected end of input");
        return text_[pos_];
    }

    // Calls on_key(key, offset of the key) with the reader at the value, which on_key must consume.
    template <class OnKey>
    void object(OnKey&& on_key) {
        expect('{', "expected '{'");
        nest();
        if (peek() == '}') {
            ++pos_, --depth_;
            return;
        }
        for (;;) {
            if (peek() != '"') fail("expected a string key");
            const std::size_t at = pos_;
            const std::string key = string();
            expect(':', "expected ':' after a key");
            on_key(key, at);
            const char c = peek();
            ++pos_;
            if (c == '}') break;
            if (c != ',') --pos_, fail("expected ',' or '}'");
        }
        --depth_;
    }

    template <class OnItem>
    void array(OnItem&& on_item) {
        expect('[', "expected '['");
        nest();
        if (peek() == ']') {
            ++pos_, --depth_;
            return;
        }
        for (;;) {
            on_item();
            const char c = peek();
            ++pos_;
            if (c == ']') break;
            if (c != ',') --pos_, fail("expected ',' or ']'");
        }
        --depth_;
    }

    std::string string() {
        expect('"', "expected a string");
        std::string out;
        for (;;) {
            if (pos_ >= text_.size()) fail("unterminated string");
            const char c = text_[pos_];
            const auto u = static_cast<unsigned char>(c);
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (c == '\\') {
                escape(out);
            } else if (u < 0x20) {
                fail("control character in a string (must be escaped)");
            } else {
                const std::size_t length = utf8_length(text_, pos_);
                if (length == 0) fail("invalid UTF-8 in a string");
                out.append(text_, pos_, length);
                pos_ += length;
            }
        }
    }

    bool boolean() {
        if (literal("true")) return true;
        if (literal("false")) return false;
        fail("expected true or false");
    }

    std::int64_t integer(std::int64_t low, std::int64_t high) {
        const std::size_t at = position();
        const std::string_view digits = number_token();
        std::int64_t value = 0;
        const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (result.ptr != digits.data() + digits.size()) fail_at("expected an integer", at);
        if (result.ec != std::errc() || value < low || value > high)
            fail_at("integer out of range (" + std::to_string(low) + " ..= " + std::to_string(high) + ")", at);
        return value;
    }

    std::uint64_t unsigned_integer() {
        const std::size_t at = position();
        const std::string_view digits = number_token();
        std::uint64_t value = 0;
        if (!digits.empty() && digits.front() == '-') fail_at("expected a non-negative integer", at);
        const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (result.ptr != digits.data() + digits.size()) fail_at("expected an integer", at);
        if (result.ec != std::errc()) fail_at("integer out of range (0 ..= 18446744073709551615)", at);
        return value;
    }

    void skip_value() {
        const char c = peek();
        if (c == '{') object([this](const std::string&, std::size_t) { skip_value(); });
        else if (c == '[') array([this] { skip_value(); });
        else if (c == '"') string();
        else if (literal("true") || literal("false") || literal("null")) return;
        else number_token();
    }

private:
    void skip_space() noexcept {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
            ++pos_;
    }
    void expect(char c, const char* what) {
        if (peek() != c) fail(what);
        ++pos_;
    }
    void nest() {
        if (++depth_ > kMaxJsonDepth) fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    bool literal(std::string_view word) {
        skip_space();
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    // The JSON number grammar; the caller decides which numbers it accepts.
    std::string_view number_token() {
        const std::size_t start = position();
        const auto digit = [&] { return pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; };
        const auto digits = [&] {
            if (!digit()) fail("expected a digit");
            while (digit()) ++pos_;
        };
        if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
        if (!digit()) fail(pos_ == start ? "expected a value" : "expected a digit");
        if (text_[pos_] == '0') ++pos_;
        else digits();
        if (pos_ < text_.size() && text_[pos_] == '.') ++pos_, digits();
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            ++pos_;
            if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
            digits();
        }
        return text_.substr(start, pos_ - start);
    }

    unsigned hex4() {
        unsigned value = 0;
        for (int i = 0; i < 4; ++i, ++pos_) {
            if (pos_ >= text_.size()) fail("unterminated \\u escape");
            const char c = text_[pos_];
            unsigned digit = 0;
            if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') digit = static_cast<unsigned>(c - 'A' + 10);
            else fail("expected four hex digits after \\u");
            value = value * 16 + digit;
        }
        return value;
    }

    void escape(std::string& out) {
        const std::size_t at = pos_++;
        if (pos_ >= text_.size()) fail("unterminated string");
        const char c = text_[pos_++];
        switch (c) {
        case '"': out += '"'; return;
        case '\\': out += '\\'; return;
        case '/': out += '/'; return;
        case 'b': out += '\b'; return;
        case 'f': out += '\f'; return;
        case 'n': out += '\n'; return;
        case 'r': out += '\r'; return;
        case 't': out += '\t'; return;
        case 'u': break;
        default: fail_at("unknown escape in a string", at);
        }
        unsigned code = hex4();
        if (code >= 0xDC00 && code <= 0xDFFF) fail_at("lone low surrogate in a \\u escape", at);
        if (code >= 0xD800 && code <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") fail_at("high surrogate without its low half", at);
            pos_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail_at("high surrogate without its low half", at);
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        const auto put = [&](unsigned bits) { out += static_cast<char>(bits); };
        if (code < 0x80) {
            put(code);
        } else if (code < 0x800) {
            put(0xC0 | (code >> 6)), put(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
            put(0xE0 | (code >> 12)), put(0x80 | ((code >> 6) & 0x3F)), put(0x80 | (code & 0x3F));
        } else {
            put(0xF0 | (code >> 18)), put(0x80 | ((code >> 12) & 0x3F)), put(0x80 | ((code >> 6) & 0x3F)),
                put(0x80 | (code & 0x3F));
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
    std::size_t depth_ = 0;
};

// Each known key once: a repeated one would be ambiguous (first or last?), so it is an error.
class Keys {
public:
    Keys(JsonReader& reader, std::initializer_list<const char*> names) : reader_(reader), names_(names) {}
    // The index of `key` among the names, or -1 for an unknown key (skipped by the caller).
    int find(const std::string& key, std::size_t at) {
        for (std::size_t i = 0; i < names_.size(); ++i) {
            if (key != names_[i]) continue;
            if ((seen_ >> i) & 1) reader_.fail_at("duplicate key \"" + key + "\"", at);
            seen_ |= std::uint64_t{1} << i;
            return static_cast<int>(i);
        }
        return -1;
    }
    bool seen(std::size_t index) const { return ((seen_ >> index) & 1) != 0; }

private:
    JsonReader& reader_;
    std::vector<const char*> names_;
    std::uint64_t seen_ = 0;
};

inline Nanos read_nanos(JsonReader& reader) {
    return Nanos(reader.integer(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
}

inline Node read_node(JsonReader& reader) {
    Node node;
    const std::size_t start = reader.position();
    Keys keys(reader, {"name", "file", "line", "count", "total_ns", "min_ns", "max_ns", "throws", "dropped", "children",
                       "kind", "message", "values", "continued", "continued_on", "continued_ns", "parallel", "off_cpu_ns", "runnable_ns",
                       "off_cpu_at_least"});
    OffCpu off;
    bool has_off = false;
    reader.object([&](const std::string& key, std::size_t at) {
        switch (keys.find(key, at)) {
        case 0: node.name = reader.string(); break;
        case 1: node.file = reader.string(); break;
        case 2: node.line = static_cast<std::uint32_t>(reader.integer(0, 0xFFFFFFFF)); break;
        case 3: node.count = reader.unsigned_integer(); break;
        case 4: node.total = read_nanos(reader); break;
        case 5: node.min = read_nanos(reader); break;
        case 6: node.max = read_nanos(reader); break;
        case 7: node.throws = reader.unsigned_integer(); break;
        case 8: node.dropped = reader.unsigned_integer(); break;
        case 9: reader.array([&] { node.children.push_back(read_node(reader)); }); break;
        case 10: {
            const std::size_t kind_at = reader.position();
            const std::string kind = reader.string();
            if (kind == "throw") node.kind = NodeKind::thrown;
            else if (kind != "call") reader.fail_at("\"kind\" must be \"call\" or \"throw\"", kind_at);
            break;
        }
        case 11: node.message = reader.string(); break;
        case 12:
            reader.array([&] {
                const std::size_t pair_at = reader.position();
                std::vector<std::string> pair;
                reader.array([&] { pair.push_back(reader.string()); });
                if (pair.size() != 2) reader.fail_at("a value must be [name, text]", pair_at);
                node.values.emplace_back(std::move(pair[0]), std::move(pair[1]));
            });
            break;
        case 13: node.continued = reader.boolean(); break;
        case 14: node.continued_on = reader.string(); break;
        case 15: node.continued_total = read_nanos(reader); break;
        case 16: node.parallel = reader.boolean(); break;
        case 17: off.off = read_nanos(reader); has_off = true; break;
        case 18: off.runnable = read_nanos(reader); break;
        case 19: off.at_least = reader.boolean(); break;
        default: reader.skip_value();
        }
    });
    if (!keys.seen(0)) reader.fail_at("node without a \"name\"", start);
    if ((keys.seen(18) || keys.seen(19)) && !has_off) reader.fail_at("\"runnable_ns\" or \"off_cpu_at_least\" without \"off_cpu_ns\"", start);
    if (has_off) node.off_cpu = off;
    return node;
}

inline std::vector<Node> read_nodes(JsonReader& reader) {
    std::vector<Node> nodes;
    reader.array([&] { nodes.push_back(read_node(reader)); });
    return nodes;
}

inline std::chrono::system_clock::time_point read_time(JsonReader& reader) {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(read_nanos(reader)));
}

inline std::uint32_t read_thread_id(JsonReader& reader) {
    return static_cast<std::uint32_t>(reader.integer(0, 0xFFFFFFFF));
}

inline ThreadProfile read_thread(JsonReader& reader) {
    ThreadProfile thread;
    Keys keys(reader, {"thread_name", "thread_id", "exited", "dropped_depth", "dropped_nodes", "roots", "tid"});
    reader.object([&](const std::string& key, std::size_t at) {
        switch (keys.find(key, at)) {
        case 0: thread.thread_name = reader.string(); break;
        case 1: thread.thread_id = read_thread_id(reader); break;
        case 2: thread.exited = reader.boolean(); break;
        case 3: thread.dropped_depth = reader.unsigned_integer(); break;
        case 4: thread.dropped_nodes = reader.unsigned_integer(); break;
        case 5: thread.roots = read_nodes(reader); break;
        case 6: thread.os_thread_id = read_thread_id(reader); break;
        default: reader.skip_value();
        }
    });
    return thread;
}

inline std::string time_ns(std::chrono::system_clock::time_point time) {
    return std::to_string(std::chrono::duration_cast<Nanos>(time.time_since_epoch()).count());
}

// `,"tid":N`, the OS thread id, only when known: files without it read as before.
inline std::string tid_field(std::uint32_t os_thread_id) {
    return os_thread_id == 0 ? std::string() : ",\"tid\":" + std::to_string(os_thread_id);
}

inline void write_pairs(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& pairs) {
    out << '[';
    for (std::size_t i = 0; i < pairs.size(); ++i)
        out << (i == 0 ? "" : ",") << '[' << json_string(pairs[i].first) << ',' << json_string(pairs[i].second) << ']';
    out << ']';
}

// "kind", "message" and "values" are written only when they say something: files of calls alone
// read as they did in version 1.
inline void write_node(std::ostream& out, const Node& node, std::size_t depth) {
    out << '\n' << std::string(2 * depth, ' ') << "{\"name\":" << json_string(node.name);
    if (node.kind == NodeKind::thrown) out << ",\"kind\":\"throw\"";
    if (node.message) out << ",\"message\":" << json_string(*node.message);
    if (node.continued) out << ",\"continued\":true";
    if (!node.continued_on.empty()) out << ",\"continued_on\":" << json_string(node.continued_on);
    if (node.continued_total.count() != 0) out << ",\"continued_ns\":" << std::to_string(node.continued_total.count());
    if (node.parallel) out << ",\"parallel\":true";
    if (node.off_cpu) {
        out << ",\"off_cpu_ns\":" << std::to_string(node.off_cpu->off.count());
        if (node.off_cpu->runnable) out << ",\"runnable_ns\":" << std::to_string(node.off_cpu->runnable->count());
        if (node.off_cpu->at_least) out << ",\"off_cpu_at_least\":true";
    }
    if (!node.values.empty()) {
        out << ",\"values\":";
        write_pairs(out, node.values);
    }
    out
        << ",\"file\":" << json_string(node.file) << ",\"line\":" << std::to_string(node.line)
        << ",\"count\":" << std::to_string(node.count) << ",\"total_ns\":" << std::to_string(node.total.count())
        << ",\"min_ns\":" << std::to_string(node.min.count()) << ",\"max_ns\":" << std::to_string(node.max.count())
        << ",\"throws\":" << std::to_string(node.throws) << ",\"dropped\":" << std::to_string(node.dropped)
        << ",\"children\":[";
    for (std::size_t i = 0; i < node.children.size(); ++i) {
        if (i != 0) out << ',';
        write_node(out, node.children[i], depth + 1);
    }
    out << "]}";
}

// ---- folded stacks -------------------------------------------------------------------------

inline void folded_lines(std::ostream& out, const Node& node, std::string path, FoldedValue value) {
    if (!path.empty()) path += ';';
    path += folded_frame(node.name);
    std::uint64_t amount = node.count;
    if (value != FoldedValue::count) {
        const Nanos time = value == FoldedValue::self_us ? node.self() : node.total;
        amount = time.count() <= 0 ? 0 : (static_cast<std::uint64_t>(time.count()) + 500) / 1000;
    }
    if (amount != 0) out << path << ' ' << std::to_string(amount) << '\n';
    for (const Node& child : node.children) folded_lines(out, child, path, value);
}

// ---- Chrome trace events -------------------------------------------------------------------

inline std::string micros(Nanos time) {  // "12.345": microseconds with every nanosecond kept
    const std::int64_t ns = time.count();
    const std::uint64_t m = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
    std::string fraction = std::to_string(m % 1000);
    return (ns < 0 ? "-" : "") + std::to_string(m / 1000) + "." + std::string(3 - fraction.size(), '0') + fraction;
}

}  // namespace views
}  // namespace detail

// ==== definitions ================================================================================

inline void write_folded(std::ostream& out, const Trace& trace, const FoldedOptions& options) {
    detail::views::folded_lines(
        out, trace.root,
        options.thread_frames ? detail::views::folded_frame(detail::views::thread_frame(trace)) : "",
        options.value);
}

inline void write_folded(std::ostream& out, const Profile& profile, const FoldedOptions& options) {
    if (!options.thread_frames) {
        for (const Node& root : profile.merged().roots) detail::views::folded_lines(out, root, "", options.value);
        return;
    }
    for (const ThreadProfile& thread : profile.threads) write_folded(out, thread, options);
}

inline void write_folded(std::ostream& out, const ThreadProfile& thread, const FoldedOptions& options) {
    const std::string frame =
        options.thread_frames ? detail::views::folded_frame(detail::views::thread_frame(thread)) : "";
    for (const Node& root : thread.roots) detail::views::folded_lines(out, root, frame, options.value);
}

inline void write_flamegraph_svg(std::ostream& out, const Trace& trace, const FlameGraphOptions& options) {
    const detail::views::Frame root = detail::views::plain_frame(trace.root, trace.root.total);
    detail::views::write_svg(out, root, options, options.title.empty() ? "Flame graph" : options.title,
                             "trace of " + trace.root.name + " on " + trace.thread_name + "; width: total time" +
                                 (trace.root.off_cpu ? "; off CPU " + detail::views::share(trace.root.off_cpu->off, trace.root.total) +
                                                           " (grey-blue: calls mostly off CPU)"
                                                     : std::string()));
}

inline void write_flamegraph_svg(std::ostream& out, const Profile& profile, const FlameGraphOptions& options) {
    using detail::views::Frame;
    Nanos whole{0};
    for (const ThreadProfile& thread : profile.threads)
        for (const Node& root : thread.roots) whole += std::max(root.total, Nanos(0));
    std::vector<Frame> frames;
    if (options.thread_frames) {
        for (const ThreadProfile& thread : profile.threads) {
            std::vector<Frame> roots;
            for (const Node& root : thread.roots) roots.push_back(detail::views::plain_frame(root, whole));
            Frame frame = detail::views::synthetic_frame(
                detail::views::thread_frame(thread), std::move(roots), "thread");
            detail::views::name_colour(frame, thread.thread_name);
            frames.push_back(std::move(frame));
        }
    } else {
        for (const Node& root : profile.merged().roots) frames.push_back(detail::views::plain_frame(root, whole));
    }
    const std::size_t threads = profile.threads.size();
    const Frame root = detail::views::synthetic_frame(
        "all", std::move(frames), std::to_string(threads) + (threads == 1 ? " thread" : " threads"));
    detail::views::write_svg(out, root, options, options.title.empty() ? "Flame graph" : options.title,
                             "profile of " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                                 "; width: total time");
}

inline void write_flamegraph_svg(std::ostream& out, const ThreadProfile& thread, const FlameGraphOptions& options) {
    Profile profile;
    profile.threads.push_back(thread);
    write_flamegraph_svg(out, profile, options);
}

inline void write_chrome_trace(std::ostream& out, const Timeline& timeline) {
    using detail::views::json_string;
    using detail::views::micros;
    const std::string pid = std::to_string(timeline.process_id);
    out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"tracetree\",\"origin_unix_ns\":"
        << detail::views::time_ns(timeline.origin) << "},\"traceEvents\":[\n"
        << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":0,\"args\":{\"name\":\"tracetree\"}}";
    for (const ThreadTimeline& thread : timeline.threads) {
        const std::string tid = std::to_string(thread.thread_id);
        out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid
            << ",\"args\":{\"name\":" << json_string(thread.thread_name) << "}}";
        // Start order, outer first on ties: viewers nest "X" events by the order they meet them.
        std::vector<const Span*> spans;
        for (const Span& span : thread.spans) spans.push_back(&span);
        std::stable_sort(spans.begin(), spans.end(), [](const Span* a, const Span* b) {
            return a->start != b->start ? a->start < b->start : a->depth < b->depth;
        });
        Nanos last_end{0};
        for (const Span* span : spans) {
            last_end = std::max(last_end, span->start + span->duration);
            out << ",\n{\"name\":" << json_string(span->name) << ",\"cat\":\"tracetree\",\"ph\":\"X\",\"ts\":"
                << micros(span->start) << ",\"dur\":" << micros(span->duration) << ",\"pid\":" << pid << ",\"tid\":" << tid
                << ",\"args\":{\"file\":" << json_string(span->file) << ",\"line\":" << std::to_string(span->line)
                << ",\"depth\":" << std::to_string(span->depth) << (span->threw ? ",\"threw\":true" : "") << "}}";
        }
        if (thread.dropped != 0)
            out << ",\n{\"name\":\"tracetree: " << std::to_string(thread.dropped)
                << " spans dropped (per-thread bound reached; the first spans were kept)\",\"cat\":\"tracetree\","
                   "\"ph\":\"i\",\"s\":\"t\",\"ts\":"
                << micros(last_end) << ",\"pid\":" << pid << ",\"tid\":" << tid
                << ",\"args\":{\"dropped\":" << std::to_string(thread.dropped) << "}}";
    }
    out << "\n]}\n";
}

inline JsonError::JsonError(const std::string& what, std::size_t offset, std::size_t line, std::size_t column)
    : std::invalid_argument("tracetree: bad JSON at line " + std::to_string(line) + ", column " +
                            std::to_string(column) + " (byte " + std::to_string(offset) + "): " + what),
      offset_(offset), line_(line), column_(column) {}

inline void write_json(std::ostream& out, const Trace& trace) {
    using detail::views::json_string;
    out << "{\"format\":\"tracetree\",\"version\":1,\"kind\":\"trace\",\"start_ns\":"
        << detail::views::time_ns(trace.start) << ",\"thread_name\":" << json_string(trace.thread_name)
        << ",\"thread_id\":" << std::to_string(trace.thread_id) << detail::views::tid_field(trace.os_thread_id)
        << ",\"fields\":";
    detail::views::write_pairs(out, trace.fields);
    out << ",\"root\":";
    detail::views::write_node(out, trace.root, 1);
    out << "\n}\n";
}

namespace detail {
namespace views {
inline void write_thread(std::ostream& out, const ThreadProfile& thread) {
    out << "{\"thread_name\":" << json_string(thread.thread_name)
        << ",\"thread_id\":" << std::to_string(thread.thread_id) << tid_field(thread.os_thread_id) << ",\"exited\":" << (thread.exited ? "true" : "false")
        << ",\"dropped_depth\":" << std::to_string(thread.dropped_depth)
        << ",\"dropped_nodes\":" << std::to_string(thread.dropped_nodes) << ",\"roots\":[";
    for (std::size_t i = 0; i < thread.roots.size(); ++i) {
        if (i != 0) out << ',';
        write_node(out, thread.roots[i], 1);
    }
    out << "]}";
}
}  // namespace views
}  // namespace detail

inline void write_json(std::ostream& out, const Profile& profile) {
    out << "{\"format\":\"tracetree\",\"version\":1,\"kind\":\"profile\",\"taken_ns\":"
        << detail::views::time_ns(profile.taken) << ",\"threads\":[";
    for (std::size_t t = 0; t < profile.threads.size(); ++t) {
        out << (t == 0 ? "\n" : ",\n");
        detail::views::write_thread(out, profile.threads[t]);
    }
    out << "\n]}\n";
}

inline void write_json(std::ostream& out, const ThreadProfile& thread) {  // no taken_ns: a thread has none (it reads as 0)
    out << "{\"format\":\"tracetree\",\"version\":1,\"kind\":\"profile\",\"threads\":[\n";
    detail::views::write_thread(out, thread);
    out << "\n]}\n";
}

inline std::variant<Trace, Profile> read_json(std::string_view text) {
    using namespace detail::views;
    JsonReader reader(text);
    Trace trace;
    Profile profile;
    std::string format, kind;
    std::int64_t version = 0;
    std::size_t kind_at = 0;
    Keys keys(reader, {"format", "version", "kind", "start_ns", "thread_name", "thread_id", "fields", "root",
                       "taken_ns", "threads", "tid"});
    reader.object([&](const std::string& key, std::size_t at) {
        switch (keys.find(key, at)) {
        case 0: format = reader.string(); break;
        case 1: version = reader.integer(0, std::numeric_limits<std::int64_t>::max()); break;
        case 2: kind_at = reader.position(), kind = reader.string(); break;
        case 3: trace.start = read_time(reader); break;
        case 4: trace.thread_name = reader.string(); break;
        case 5: trace.thread_id = read_thread_id(reader); break;
        case 6:
            reader.array([&] {
                const std::size_t pair_at = reader.position();
                std::vector<std::string> pair;
                reader.array([&] { pair.push_back(reader.string()); });
                if (pair.size() != 2) reader.fail_at("a field must be [key, value]", pair_at);
                trace.fields.emplace_back(std::move(pair[0]), std::move(pair[1]));
            });
            break;
        case 7: trace.root = read_node(reader); break;
        case 8: profile.taken = read_time(reader); break;
        case 9: reader.array([&] { profile.threads.push_back(read_thread(reader)); }); break;
        case 10: trace.os_thread_id = read_thread_id(reader); break;
        default: reader.skip_value();
        }
    });
    reader.finish();
    if (format != "tracetree") reader.fail_at("not a tracetree file: \"format\" must be \"tracetree\"", 0);
    if (version != 1) reader.fail_at("unsupported version " + std::to_string(version) + " (this reader reads 1)", 0);
    if (kind == "trace") {
        if (!keys.seen(7)) reader.fail_at("trace without a \"root\"", 0);
        return trace;
    }
    if (kind == "profile") return profile;
    reader.fail_at("\"kind\" must be \"trace\" or \"profile\"", kind_at);
}

inline Trace read_trace_json(std::string_view text) {
    std::variant<Trace, Profile> value = read_json(text);
    if (Trace* trace = std::get_if<Trace>(&value)) return std::move(*trace);
    throw JsonError("expected a trace, found a profile", 0, 1, 1);
}

inline Profile read_profile_json(std::string_view text) {
    std::variant<Trace, Profile> value = read_json(text);
    if (Profile* profile = std::get_if<Profile>(&value)) return std::move(*profile);
    throw JsonError("expected a profile, found a trace", 0, 1, 1);
}

inline void render_diff(std::ostream& out, const Trace& before, const Trace& after, const DiffOptions& options) {
    const std::vector<Node> b{before.root}, a{after.root};
    detail::views::diff_forest(out, detail::views::diff_children(&b, &a), options);
}

inline void render_diff(std::ostream& out, const Profile& before, const Profile& after, const DiffOptions& options) {
    render_diff(out, before.merged(), after.merged(), options);
}

inline void render_diff(std::ostream& out, const ThreadProfile& before, const ThreadProfile& after, const DiffOptions& options) {
    detail::views::diff_forest(out, detail::views::diff_children(&before.roots, &after.roots), options);
}

inline std::string diff_to_string(const Trace& before, const Trace& after, const DiffOptions& options) {
    std::ostringstream out;
    render_diff(out, before, after, options);
    return out.str();
}

inline std::string diff_to_string(const Profile& before, const Profile& after, const DiffOptions& options) {
    std::ostringstream out;
    render_diff(out, before, after, options);
    return out.str();
}

inline std::string diff_to_string(const ThreadProfile& before, const ThreadProfile& after, const DiffOptions& options) {
    std::ostringstream out;
    render_diff(out, before, after, options);
    return out.str();
}

inline void write_diff_flamegraph_svg(std::ostream& out, const Trace& before, const Trace& after,
                                      const FlameGraphOptions& options) {
    const std::vector<Node> b{before.root}, a{after.root};
    detail::views::write_diff_svg(out, detail::views::diff_children(&b, &a), options);
}

inline void write_diff_flamegraph_svg(std::ostream& out, const Profile& before, const Profile& after,
                                      const FlameGraphOptions& options) {
    write_diff_flamegraph_svg(out, before.merged(), after.merged(), options);
}

inline void write_diff_flamegraph_svg(std::ostream& out, const ThreadProfile& before, const ThreadProfile& after,
                                      const FlameGraphOptions& options) {
    detail::views::write_diff_svg(out, detail::views::diff_children(&before.roots, &after.roots), options);
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_VIEWS_HPP
