// tracetree trace patterns: globs and a regex subset, matched in time linear in the name, without
// backtracking. SPDX-License-Identifier: MIT
//
//   tracetree::Pattern pattern("Mapper::(map|lookup)", tracetree::PatternSyntax::regex);
//   pattern.matches("shop::Mapper::lookup");   // true
//   pattern.matches("shop::Mapper::lookups");  // false
//
// Matching runs on application threads (once per call site and session), so it must be bounded:
// - a pattern is at most 256 bytes and compiles to at most 256 automaton states, or is refused with
//   a PatternError that says what and where;
// - matches() reads each byte of the name once, does a bounded amount of work per byte (at most 64
//   table look-ups of 32 bytes each), never backtracks, never allocates and never throws.
//
// Which names a pattern matches: the whole name, or the whole of what follows any "::" in it.
// `service` matches `demo::Http11Processor::service`; `apper::map` does not match
// `shop::Mapper::map`; `map` does not match `shop::Mapper::mapper`. Every "::" counts, overlapping
// ones too: `b` matches `a:::b`. Names and patterns are bytes (NUL, UTF-8, control bytes included);
// there is no case folding.
//
// Glob syntax: `*` is any run of bytes (possibly empty, including ':' and '*'), `?` is exactly one
// byte, every other byte is itself (there is no escape: `\` and `[` are literal).
//
// Regex syntax, a subset of ECMAScript; anything else is refused with a message naming it:
//   literal bytes; `.` (any byte, '\n' and '\r' included: names are not lines)
//   classes `[abc]` `[a-z]` `[^...]`, with escapes inside; `[` inside a class must be escaped
//   escapes: `\` before any ASCII punctuation (`\.` `\\` `\(` `\:` `\-` ...) is that character;
//     `\d \w \s \D \W \S` (ASCII: \s is space, \t \n \v \f \r); `\t \n \r \f \v`; `\xHH` (a byte)
//   groups `( )` and `(?: )` (nested at most 32 deep); alternation `|` (empty branches allowed)
//   `*` `+` `?` `{n}` `{n,}` `{n,m}` with n, m <= 100, each optionally lazy (`*?`): only whether
//     the name matches is computed, so lazy and greedy are the same
//   `^` as the first byte and `$` as the last are accepted and do nothing (the match is whole)
// Refused: back-references `\1`, `\k<..>`; lookarounds `(?=` `(?!` `(?<=` `(?<!`; named groups;
//   `\b` `\B`; `\0` `\c` `\u` `\p` and other letter escapes; `^`/`$` elsewhere; a quantifier with
//   nothing to repeat (`*a`, `a**`); a literal `{` `}` `]` (escape them); `[]` and `[^]`; ranges
//   whose ends are out of order or class escapes; `{,m}`; counts above 100.
//
// How it matches (a Glushkov, or position, automaton): every byte-matching atom of the pattern
// (literal, `.`, class) is a numbered position, after counted repetitions are written out (`x{2,3}`
// is `x x x?`). The parse tree gives, for each position, which positions may come next ("follow"),
// which may come first, which may come last, and whether the empty name matches. Reading a name,
// the state is the set of positions that the bytes read so far can end on: the next state is the
// union of the follow sets of the current positions, kept only where the position accepts the byte.
// That is one pass with no backtracking; the sets are bit masks (1, 2 or 4 words), and the union is
// looked up four positions at a time in a table built at compile time. The "after any ::" rule is the
// optional prefix `(.*::)?`, folded into the same pass: at the start of the name and right after each
// "::", the pattern's first positions join the state. When the state is empty the matcher jumps to
// the next "::".
//
// Worst case measured (bench/matcher_bench.cpp, docs/testing.md; g++ 12 -O3, AMD EPYC, 2 cores
// shared with other builds): the work per byte is at most one table look-up per 4 states, so the
// slowest patterns keep all 256 states live on every byte, e.g. the glob `?*?*...?*` (256 bytes) or
// the regex `(.*){100}(.*){100}(.*){56}`: about 40 us on a 1,024-byte name and 2.7 ms on a 64 KiB
// name (41 ns per byte; clang++ 14: 37-46 ns). `(.|.)*X`, `(a|aa)*c`, `(a?){100}a{100}` and
// `*a*a*a*a*a*b` against runs of 'a': 2-4 ns per byte. Compiling a pattern: under 0.2 ms.
#ifndef TRACETREE_MATCHER_HPP
#define TRACETREE_MATCHER_HPP

#include "core/abi.hpp"  // the version and namespace macros
#include "text/text.hpp"  // hex_value

#include <cstddef>      // std::size_t
#include <cstdint>      // the 64-bit words of the sets
#include <stdexcept>    // PatternError is a std::invalid_argument
#include <string>
#include <string_view>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

enum class PatternSyntax { glob, regex };

// A pattern that is empty, too large, malformed or uses something outside the supported subset.
// what(): "tracetree: bad pattern '<pattern>': <reason> at offset <offset>"; the pattern is quoted
// with bytes outside printable ASCII as \xHH, and cut after 64 bytes.
class PatternError : public std::invalid_argument {
public:
    PatternError(std::string_view pattern, std::string_view reason, std::size_t offset);
    std::size_t offset() const noexcept { return offset_; }  // the byte of the pattern it is about

private:
    std::size_t offset_;
};

namespace detail {

// 256 bits: a set of bytes (what a position accepts) or a set of positions (a state).
struct Bits256 {
    std::uint64_t w[4] = {0, 0, 0, 0};

    void set(std::size_t i) noexcept { w[i / 64] |= std::uint64_t{1} << (i % 64); }
    bool test(std::size_t i) const noexcept { return ((w[i / 64] >> (i % 64)) & 1) != 0; }
    bool any() const noexcept { return (w[0] | w[1] | w[2] | w[3]) != 0; }
    Bits256& operator|=(const Bits256& o) noexcept {
        for (int i = 0; i < 4; ++i) w[i] |= o.w[i];
        return *this;
    }
    Bits256& operator&=(const Bits256& o) noexcept {
        for (int i = 0; i < 4; ++i) w[i] &= o.w[i];
        return *this;
    }
    Bits256 operator~() const noexcept {
        Bits256 r;
        for (int i = 0; i < 4; ++i) r.w[i] = ~w[i];
        return r;
    }
};

struct PatternAutomaton;

}  // namespace detail

// A compiled trace pattern. Immutable after construction: matches() may run on any number of
// threads at once.
class Pattern {
public:
    static constexpr std::size_t max_bytes = 256;   // longer patterns are refused
    static constexpr std::size_t max_states = 256;  // positions after writing out `{n,m}`
    static constexpr std::uint32_t max_count = 100; // n and m in `{n,m}`
    static constexpr int max_group_depth = 32;      // nested `(`: bounds the parser's recursion

    // Throws PatternError for an empty, too large, malformed or unsupported pattern.
    Pattern(std::string_view text, PatternSyntax syntax);

    // The whole name, or the whole of what follows any "::" in it. Linear in name.size().
    bool matches(std::string_view name) const noexcept;

    const std::string& text() const noexcept { return text_; }
    PatternSyntax syntax() const noexcept { return syntax_; }

private:
    template <std::size_t Words>
    bool run(std::string_view name) const noexcept;

    std::string text_;
    PatternSyntax syntax_;
    // The automaton, as 64-bit words: a set of positions is `words_` words (1 to 4, as few as the
    // pattern needs, so that small patterns do small steps).
    std::size_t words_ = 1;
    std::vector<std::uint64_t> step_;    // [chunk][16][words_]: the union of the follow sets of the
                                         // chunk's positions that are in the 4-bit index
    std::vector<std::uint64_t> by_byte_; // [256][words_]: the positions that accept that byte
    detail::Bits256 first_;              // positions a match can start on
    detail::Bits256 last_;               // positions a match can end on
    bool nullable_ = false;              // the empty string matches

    friend struct detail::PatternAutomaton;
};

// ---- implementation ---------------------------------------------------------------------------

namespace detail {

// Printable ASCII as is, anything else as \xHH: messages go to logs and the admin endpoint.
inline std::string quote_pattern_bytes(std::string_view bytes) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (const char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        if (b >= 0x20 && b < 0x7f) {
            out += c;
        } else {
            out += "\\x";
            out += hex[b >> 4];
            out += hex[b & 15];
        }
    }
    return out;
}

inline std::string pattern_error_message(std::string_view pattern, std::string_view reason,
                                         std::size_t offset) {
    std::string message = "tracetree: bad pattern '";
    message += quote_pattern_bytes(pattern.substr(0, 64));
    if (pattern.size() > 64) message += "...";
    message += "': ";
    message += reason;
    message += " at offset ";
    message += std::to_string(offset);
    return message;
}

// The parse tree. `bytes` is one position; `concat`, `alternate` and `repeat` have `items`
// (repeat: one); `empty` matches only the empty string (`()`, `^`, `$`, `x{0}`).
struct PatternNode {
    enum Kind : std::uint8_t { empty, bytes, concat, alternate, repeat };
    static constexpr std::uint32_t unbounded = 0xFFFFFFFF;  // repeat's max for `*`, `+`, `{n,}`

    Kind kind = empty;
    Bits256 accepts;                  // bytes: the bytes it matches
    std::vector<std::uint32_t> items; // indexes into the node vector
    std::uint32_t min = 0, max = 0;   // repeat: the counts
    std::size_t positions = 0;        // positions once repetitions are written out (bounded)
};

// Recursive descent over the regex subset (or a flat loop over a glob), building PatternNodes.
// Every node's written-out size is checked as it is made, so a pattern that would expand past
// max_states is refused before anything is expanded.
class PatternParser {
public:
    PatternParser(std::string_view text, std::vector<PatternNode>& nodes) : p_(text), nodes_(nodes) {}

    std::uint32_t glob() {
        PatternNode seq;
        seq.kind = PatternNode::concat;
        for (std::size_t i = 0; i < p_.size(); ++i) {
            if (p_[i] == '*') {
                if (i > 0 && p_[i - 1] == '*') continue;  // `**` is `*`: one state, not two
                seq.items.push_back(repeat(byte_node(any_byte()), 0, PatternNode::unbounded));
            } else {
                seq.items.push_back(byte_node(p_[i] == '?' ? any_byte() : one_byte(p_[i])));
            }
        }
        return add(std::move(seq));
    }

    std::uint32_t regex() {
        if (!p_.empty() && p_[0] == '^') i_ = 1;  // a no-op: the match is whole anyway
        const std::uint32_t root = alternation();
        if (i_ < p_.size()) fail("unmatched ')'", i_);  // alternation() stops only at ')' or the end
        return root;
    }

private:
    [[noreturn]] void fail(const std::string& reason, std::size_t at) const {
        throw PatternError(p_, reason, at);
    }
    // "'x'" for a message, with odd bytes quoted.
    static std::string shown(std::string_view construct) { return "'" + quote_pattern_bytes(construct) + "'"; }

    static Bits256 any_byte() { return ~Bits256{}; }
    static Bits256 one_byte(char c) {
        Bits256 set;
        set.set(static_cast<unsigned char>(c));
        return set;
    }
    static Bits256 byte_range(unsigned from, unsigned to) {
        Bits256 set;
        for (unsigned b = from; b <= to; ++b) set.set(b);
        return set;
    }

    std::uint32_t add(PatternNode node) {
        switch (node.kind) {
        case PatternNode::empty: node.positions = 0; break;
        case PatternNode::bytes: node.positions = 1; break;
        case PatternNode::concat:
        case PatternNode::alternate:
            node.positions = 0;
            for (const std::uint32_t item : node.items) node.positions += nodes_[item].positions;
            break;
        case PatternNode::repeat: {
            // x{n,m} is written out as m copies, x{n,} as max(n, 1) copies (the last one looping).
            const std::size_t copies = node.max == PatternNode::unbounded ? (node.min > 0 ? node.min : 1) : node.max;
            node.positions = nodes_[node.items[0]].positions * copies;
            break;
        }
        }
        // Each operand was checked, so the sums and products above stay small (<= 256 * 100 * items).
        if (node.positions > Pattern::max_states)
            fail("more than " + std::to_string(Pattern::max_states) + " automaton states (each literal, '.' or class is one, "
                 "counted repetitions are written out)", i_);
        nodes_.push_back(std::move(node));
        return static_cast<std::uint32_t>(nodes_.size() - 1);
    }
    std::uint32_t byte_node(const Bits256& accepts) {
        PatternNode node;
        node.kind = PatternNode::bytes;
        node.accepts = accepts;
        return add(std::move(node));
    }
    std::uint32_t repeat(std::uint32_t item, std::uint32_t min, std::uint32_t max) {
        PatternNode node;
        node.kind = PatternNode::repeat;
        node.items.push_back(item);
        node.min = min;
        node.max = max;
        return add(std::move(node));
    }

    bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

    std::uint32_t alternation() {
        PatternNode alt;
        alt.kind = PatternNode::alternate;
        alt.items.push_back(sequence());
        while (at('|')) {
            ++i_;
            alt.items.push_back(sequence());
        }
        return alt.items.size() == 1 ? alt.items[0] : add(std::move(alt));
    }

    std::uint32_t sequence() {
        PatternNode seq;
        seq.kind = PatternNode::concat;
        while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') seq.items.push_back(quantified());
        return seq.items.size() == 1 ? seq.items[0] : add(std::move(seq));
    }

    std::uint32_t quantified() {
        const std::uint32_t item = atom();
        if (i_ >= p_.size()) return item;
        std::uint32_t min = 0, max = PatternNode::unbounded;
        switch (p_[i_]) {
        case '*': ++i_; break;
        case '+': ++i_; min = 1; break;
        case '?': ++i_; max = 1; break;
        case '{': count(min, max); break;
        default: return item;
        }
        if (at('?')) ++i_;  // lazy: the same set of names matches
        if (i_ < p_.size() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '?' || p_[i_] == '{'))
            fail(shown(p_.substr(i_, 1)) + " has nothing to repeat (it follows another quantifier)", i_);
        return repeat(item, min, max);
    }

    // `{n}`, `{n,}` or `{n,m}` at i_.
    void count(std::uint32_t& min, std::uint32_t& max) {
        const std::size_t open = i_++;
        const auto number = [&](std::uint32_t& value) {
            const std::size_t from = i_;
            value = 0;
            for (; i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9'; ++i_) {
                value = value * 10 + static_cast<std::uint32_t>(p_[i_] - '0');
                if (value > Pattern::max_count)
                    fail("count above " + std::to_string(Pattern::max_count) + " in '{'", open);
            }
            return i_ > from;
        };
        const char* const malformed = "'{' is not a count {n}, {n,} or {n,m} (write '\\{' for a literal '{')";
        if (!number(min)) fail(malformed, open);
        max = min;
        if (at(',')) {
            ++i_;
            if (!number(max)) max = PatternNode::unbounded;
        }
        if (!at('}')) fail(malformed, open);
        ++i_;
        if (max < min) fail("count {n,m} with m < n", open);
    }

    std::uint32_t atom() {
        const char c = p_[i_];
        switch (c) {
        case '(': return group();
        case '[': return byte_node(bracket_class());
        case '.': ++i_; return byte_node(any_byte());
        case '\\': return byte_node(escape(false).accepts);
        case '^': fail("'^' is accepted only as the first byte (the match is always whole)", i_);
        case '$':
            if (i_ + 1 != p_.size()) fail("'$' is accepted only as the last byte (the match is always whole)", i_);
            ++i_;
            return add(PatternNode{});
        case '*':
        case '+':
        case '?':
        case '{': fail(shown(p_.substr(i_, 1)) + " has nothing to repeat (write '\\" + c + "' for a literal '" + c + "')", i_);
        case '}':
        case ']': fail(std::string("unmatched '") + c + "' (write '\\" + c + "' for a literal '" + c + "')", i_);
        default: ++i_; return byte_node(one_byte(c));
        }
    }

    std::uint32_t group() {
        const std::size_t open = i_++;
        if (at('?')) {
            const std::string_view rest = p_.substr(i_);
            if (rest.substr(0, 2) == "?:") {
                i_ += 2;
            } else if (rest.substr(0, 2) == "?=" || rest.substr(0, 2) == "?!") {
                fail("lookahead " + shown(p_.substr(open, 3)) + " is not supported", open);
            } else if (rest.substr(0, 3) == "?<=" || rest.substr(0, 3) == "?<!") {
                fail("lookbehind " + shown(p_.substr(open, 4)) + " is not supported", open);
            } else if (rest.substr(0, 2) == "?<") {
                fail("named group '(?<' is not supported (use '(' or '(?:')", open);
            } else {
                fail("group " + shown(p_.substr(open, 3)) + " is not supported (only '(' and '(?:')", open);
            }
        }
        if (++depth_ > Pattern::max_group_depth)
            fail("groups nested more than " + std::to_string(Pattern::max_group_depth) + " deep", open);
        const std::uint32_t inside = alternation();
        --depth_;
        if (!at(')')) fail("'(' is not closed", open);
        ++i_;
        return inside;
    }

    struct Escaped {
        Bits256 accepts;
        bool single;  // one byte (may be a range's end), not a class such as \d
        unsigned char byte;
    };

    // The escape at i_ (a backslash); in_class: inside [...].
    Escaped escape(bool in_class) {
        const std::size_t at_backslash = i_;
        if (i_ + 1 >= p_.size()) fail("'\\' at the end of the pattern", at_backslash);
        const char e = p_[i_ + 1];
        i_ += 2;
        const auto single = [](unsigned char b) { return Escaped{one_byte(static_cast<char>(b)), true, b}; };
        const auto set = [](const Bits256& s) { return Escaped{s, false, 0}; };
        const Bits256 digit = byte_range('0', '9');
        Bits256 word = byte_range('a', 'z');
        word |= byte_range('A', 'Z');
        word |= digit;
        word |= one_byte('_');
        Bits256 space = byte_range('\t', '\r');  // \t \n \v \f \r
        space |= one_byte(' ');
        switch (e) {
        case 'd': return set(digit);
        case 'D': return set(~digit);
        case 'w': return set(word);
        case 'W': return set(~word);
        case 's': return set(space);
        case 'S': return set(~space);
        case 't': return single('\t');
        case 'n': return single('\n');
        case 'r': return single('\r');
        case 'f': return single('\f');
        case 'v': return single('\v');
        case 'x': {
            const int high = i_ < p_.size() ? hex_value(p_[i_]) : -1;
            const int low = i_ + 1 < p_.size() ? hex_value(p_[i_ + 1]) : -1;
            if (high < 0 || low < 0) fail("'\\x' needs two hex digits", at_backslash);
            i_ += 2;
            return single(static_cast<unsigned char>(high * 16 + low));
        }
        case 'b':
        case 'B':
            fail(in_class ? "'\\b' inside a class (a backspace in ECMAScript) is not supported (write '\\x08')"
                          : "word boundary " + shown(p_.substr(at_backslash, 2)) + " is not supported",
                 at_backslash);
        case '0': fail("'\\0' is not supported (write '\\x00' for a NUL byte)", at_backslash);
        case 'k': fail("named back-reference '\\k' is not supported", at_backslash);
        case 'c': fail("control escape '\\c' is not supported (write '\\xHH')", at_backslash);
        case 'u': fail("Unicode escape '\\u' is not supported (patterns are bytes: write UTF-8 as '\\xHH')", at_backslash);
        case 'p':
        case 'P': fail("Unicode property " + shown(p_.substr(at_backslash, 2)) + " is not supported", at_backslash);
        default: break;
        }
        if (e >= '1' && e <= '9') fail("back-reference " + shown(p_.substr(at_backslash, 2)) + " is not supported", at_backslash);
        const bool punctuation = (e >= '!' && e <= '/') || (e >= ':' && e <= '@') || (e >= '[' && e <= '`') ||
                                 (e >= '{' && e <= '~');
        if (!punctuation) fail("unknown escape " + shown(p_.substr(at_backslash, 2)), at_backslash);
        return single(static_cast<unsigned char>(e));
    }

    // `[...]` at i_.
    Bits256 bracket_class() {
        const std::size_t open = i_++;
        const bool negated = at('^');
        if (negated) ++i_;
        if (at(']'))
            fail(std::string("empty class '") + (negated ? "[^]" : "[]") + "' (write '\\]' for a literal ']')", open);
        Bits256 set;
        for (;;) {
            if (i_ >= p_.size()) fail("'[' is not closed", open);
            if (p_[i_] == ']') break;
            const std::size_t from_at = i_;
            const Escaped from = class_atom();
            if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
                const std::size_t dash = i_++;
                const Escaped to = class_atom();
                if (!from.single || !to.single) fail("a range with a class escape such as '\\d' at an end", dash);
                if (from.byte > to.byte)
                    fail("range " + shown(p_.substr(from_at, i_ - from_at)) + " is out of order", dash);
                set |= byte_range(from.byte, to.byte);
            } else {
                set |= from.accepts;
            }
        }
        ++i_;
        return negated ? ~set : set;
    }

    Escaped class_atom() {
        if (p_[i_] == '\\') return escape(true);
        // ECMAScript reads `[[:alpha:]]` as '[', ':', ... while POSIX and libstdc++ read a class name.
        if (p_[i_] == '[') fail("'[' inside a class (write '\\[')", i_);
        const char c = p_[i_++];
        return Escaped{one_byte(c), true, static_cast<unsigned char>(c)};
    }

    std::string_view p_;
    std::vector<PatternNode>& nodes_;
    std::size_t i_ = 0;
    int depth_ = 0;
};

// Writes the parse tree out as a Glushkov automaton into a Pattern (see the top of this file).
struct PatternAutomaton {
    // What a subexpression contributes: where it can start and end, and whether it can be empty.
    struct Part {
        Bits256 first, last;
        bool nullable;
    };

    const std::vector<PatternNode>& nodes;
    std::vector<Bits256> accepts;  // per position: the bytes it matches
    std::vector<Bits256> follow;   // per position: the positions that may come next

    // Every position of `from.last` may be followed by every position of `to_first`.
    void link(const Bits256& from_last, const Bits256& to_first) {
        for (std::size_t p = 0; p < follow.size(); ++p)
            if (from_last.test(p)) follow[p] |= to_first;
    }
    // a then b.
    Part then(const Part& a, const Part& b) {
        link(a.last, b.first);
        Part r{a.first, b.last, a.nullable && b.nullable};
        if (a.nullable) r.first |= b.first;
        if (b.nullable) r.last |= a.last;
        return r;
    }

    Part build(std::uint32_t index) {
        const PatternNode& node = nodes[index];
        switch (node.kind) {
        case PatternNode::empty: break;
        case PatternNode::bytes: {
            Part r{{}, {}, false};
            r.first.set(accepts.size());
            r.last = r.first;
            accepts.push_back(node.accepts);
            follow.emplace_back();
            return r;
        }
        case PatternNode::concat: {
            Part r{{}, {}, true};
            for (const std::uint32_t item : node.items) r = then(r, build(item));
            return r;
        }
        case PatternNode::alternate: {
            Part r{{}, {}, false};
            for (const std::uint32_t item : node.items) {
                const Part branch = build(item);
                r.first |= branch.first;
                r.last |= branch.last;
                r.nullable = r.nullable || branch.nullable;
            }
            return r;
        }
        case PatternNode::repeat: {
            // No positions inside: it matches only the empty string however often it repeats (and
            // writing out `(){100}` nested 32 deep would never end).
            if (nodes[node.items[0]].positions == 0) break;
            Part r{{}, {}, true};
            if (node.max == PatternNode::unbounded) {  // x{n,}: n copies (at least one), the last looping
                const std::uint32_t copies = node.min > 0 ? node.min : 1;
                for (std::uint32_t i = 0; i < copies; ++i) {
                    Part copy = build(node.items[0]);
                    if (i + 1 == copies) {
                        link(copy.last, copy.first);
                        copy.nullable = copy.nullable || node.min == 0;
                    }
                    r = then(r, copy);
                }
            } else {  // x{n,m}: n copies, then m - n optional ones (x? x? accepts 0, 1 or 2 more)
                for (std::uint32_t i = 0; i < node.max; ++i) {
                    Part copy = build(node.items[0]);
                    copy.nullable = copy.nullable || i >= node.min;
                    r = then(r, copy);
                }
            }
            return r;
        }
        }
        return Part{{}, {}, true};
    }

    void compile_into(Pattern& pattern, std::uint32_t root) {
        const Part whole = build(root);
        pattern.first_ = whole.first;
        pattern.last_ = whole.last;
        pattern.nullable_ = whole.nullable;
        // 1, 2 or 4 words (3 would not stay in registers and is slower than 4).
        const std::size_t words = pattern.words_ = follow.size() <= 64 ? 1 : follow.size() <= 128 ? 2 : 4;
        pattern.by_byte_.assign(256 * words, 0);
        for (std::size_t p = 0; p < accepts.size(); ++p)
            for (std::size_t b = 0; b < 256; ++b)
                if (accepts[p].test(b)) pattern.by_byte_[b * words + p / 64] |= std::uint64_t{1} << (p % 64);
        const std::size_t chunks = (follow.size() + 3) / 4;  // groups of 4 positions
        pattern.step_.assign(chunks * 16 * words, 0);
        for (std::size_t k = 0; k < chunks; ++k)
            for (std::size_t v = 1; v < 16; ++v)
                for (std::size_t i = 0; i < 4; ++i)
                    if ((v >> i & 1) != 0 && 4 * k + i < follow.size())
                        for (std::size_t w = 0; w < words; ++w)
                            pattern.step_[(16 * k + v) * words + w] |= follow[4 * k + i].w[w];
    }
};

}  // namespace detail

inline PatternError::PatternError(std::string_view pattern, std::string_view reason, std::size_t offset)
    : std::invalid_argument(detail::pattern_error_message(pattern, reason, offset)), offset_(offset) {}

inline Pattern::Pattern(std::string_view text, PatternSyntax syntax) : text_(text), syntax_(syntax) {
    if (text.empty()) throw PatternError(text, "empty pattern", 0);
    if (text.size() > max_bytes)
        throw PatternError(text, "longer than " + std::to_string(max_bytes) + " bytes", max_bytes);
    std::vector<detail::PatternNode> nodes;
    detail::PatternParser parser(text, nodes);
    const std::uint32_t root = syntax == PatternSyntax::glob ? parser.glob() : parser.regex();
    detail::PatternAutomaton{nodes, {}, {}}.compile_into(*this, root);
}

inline bool Pattern::matches(std::string_view name) const noexcept {
    if (by_byte_.empty()) return false;  // moved from: no automaton left to read
    switch (words_) {
    case 1: return run<1>(name);
    case 2: return run<2>(name);
    default: return run<4>(name);
    }
}

template <std::size_t Words>
bool Pattern::run(std::string_view name) const noexcept {
    std::uint64_t state[Words] = {};  // the positions the bytes read so far can end on
    bool live = false;                // state is not empty
    bool start = true;                // a match may begin here: the start of the name, or after "::"
    for (std::size_t i = 0; i < name.size();) {
        if (!start && !live) {
            // Nothing can match before the next "::": skip to just after it.
            const std::size_t next = name.find("::", i - 1);  // i >= 1 here: start is true at 0
            if (next == std::string_view::npos) return false;
            i = next + 2;
            start = true;
            continue;
        }
        std::uint64_t next[Words];
        for (std::size_t w = 0; w < Words; ++w) next[w] = start ? first_.w[w] : 0;
        for (std::size_t w = 0; w < Words; ++w) {
            if (state[w] == 0) continue;  // (and its chunks may be past the end of step_)
            // Four positions at a time, up to the last live one (entry 0 is empty: no branch on it).
            const std::uint64_t* chunk = step_.data() + w * 16 * 16 * Words;
            for (std::uint64_t bits = state[w]; bits != 0; bits >>= 4, chunk += 16 * Words) {
                const std::uint64_t* const row = chunk + (bits & 15) * Words;
                for (std::size_t x = 0; x < Words; ++x) next[x] |= row[x];
            }
        }
        const std::uint64_t* const accepting = by_byte_.data() + static_cast<unsigned char>(name[i]) * Words;
        live = false;
        for (std::size_t w = 0; w < Words; ++w) {
            state[w] = next[w] & accepting[w];
            live = live || state[w] != 0;
        }
        start = i >= 1 && name[i - 1] == ':' && name[i] == ':';
        ++i;
    }
    for (std::size_t w = 0; w < Words; ++w)
        if ((state[w] & last_.w[w]) != 0) return true;
    return start && nullable_;
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_MATCHER_HPP
