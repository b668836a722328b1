// tracetree::Pattern (include/tracetree/matcher.hpp): glob and regex trace patterns, the "::" rule,
// refusals and their messages, odd bytes in names, patterns that make backtracking matchers run for
// ever, and differential checks against a recursive glob matcher and std::regex.
#include <tracetree/matcher.hpp>  // first: the header must compile on its own

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <regex>  // the regex reference only; matcher.hpp does not use it
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

bool second_tu_matches(std::string_view glob, std::string_view name);  // second_tu.cpp

using tracetree::Pattern;
using tracetree::PatternError;
using tracetree::PatternSyntax;

namespace {

bool glob(std::string_view pattern, std::string_view name) { return Pattern(pattern, PatternSyntax::glob).matches(name); }
bool regex(std::string_view pattern, std::string_view name) { return Pattern(pattern, PatternSyntax::regex).matches(name); }

std::string repeated(std::string_view unit, std::size_t times) {
    std::string out;
    for (std::size_t i = 0; i < times; ++i) out += unit;
    return out;
}

// The rule, written out: `whole` matches the name or what follows some "::" in it.
template <typename Whole>
bool name_or_suffix(std::string_view name, Whole&& whole) {
    if (whole(name)) return true;
    for (std::size_t i = 2; i <= name.size(); ++i)
        if (name[i - 2] == ':' && name[i - 1] == ':' && whole(name.substr(i))) return true;
    return false;
}

// An obviously correct glob matcher (exponential: small inputs only).
bool glob_reference(std::string_view pattern, std::string_view text) {
    if (pattern.empty()) return text.empty();
    if (pattern[0] == '*')
        return glob_reference(pattern.substr(1), text) || (!text.empty() && glob_reference(pattern, text.substr(1)));
    return !text.empty() && (pattern[0] == '?' || pattern[0] == text[0]) &&
           glob_reference(pattern.substr(1), text.substr(1));
}

// Every string over `alphabet` of at most `max_length` bytes.
std::vector<std::string> all_strings(std::string_view alphabet, std::size_t max_length) {
    std::vector<std::string> out{""};
    for (std::size_t from = 0; from < out.size(); ++from)
        if (out[from].size() < max_length)
            for (const char c : alphabet) out.push_back(out[from] + c);
    return out;
}

std::string random_string(std::mt19937& random, std::string_view alphabet, std::size_t max_length) {
    std::string out(random() % (max_length + 1), ' ');
    for (char& c : out) c = alphabet[random() % alphabet.size()];
    return out;
}

// A random regex of the subset, using only constructs that std::regex (ECMAScript) reads the same way.
// std::regex backtracks, so repetition nests at most two deep and a repeated group has no empty
// branch: before that rule, `((?:)((:?|)|)+?|\s\d){1,3}?1a` took std::regex four minutes here.
std::string random_regex(std::mt19937& random, int depth = 0, int loops = 0) {
    const auto pick = [&](std::initializer_list<const char*> options) {
        return std::string(options.begin()[random() % options.size()]);
    };
    std::string out;
    const unsigned branches = depth > 0 && random() % 4 == 0 ? 2 : 1;
    for (unsigned b = 0; b < branches; ++b) {
        if (b > 0) out += '|';
        const auto items = static_cast<unsigned>(random() % 4) + (loops > 0 ? 1u : 0u);  // 0: an empty branch
        for (unsigned i = 0; i < items; ++i) {
            const std::string quantifier = loops < 2 && random() % 3 == 0
                ? pick({"*", "+", "?", "{2}", "{0,2}", "{1,}", "{0}", "*?", "+?", "??", "{1,3}?"}) : "";
            if (depth < 3 && random() % 5 == 0) {
                out += pick({"(", "(?:"}) + random_regex(random, depth + 1, loops + (quantifier.empty() ? 0 : 1)) + ")";
            } else {
                out += pick({"a", "b", ":", "a", "b", ":", ".", "[ab]", "[^a]", "[a-b]", "[:b]", "\\d", "\\w",
                             "\\W", "\\s", "[\\d:]", "\\:", "\\.", "1"});
            }
            out += quantifier;
        }
    }
    return out;
}

struct Refusal {
    PatternSyntax syntax;
    std::string pattern;
    std::string reason;  // a part of what()
    std::size_t offset;
};

}  // namespace

TEST_CASE("glob: '*' is any run, '?' one byte, the rest literal") {
    // The cases of test_sessions.cpp and stress_bounds.cpp (fuzz/regressions/matcher/).
    CHECK(glob("Mapper::*", "shop::Mapper::map"));
    CHECK(glob("Mapper::*", "Mapper::lookup"));
    CHECK_FALSE(glob("Mapper::*", "shop::Mapperx::map"));
    CHECK(glob("m?p", "map"));
    CHECK_FALSE(glob("m?p", "mp"));
    CHECK_FALSE(glob("m?p", "maap"));
    CHECK(glob("**a**", "a"));
    CHECK_FALSE(glob("**a**", "b"));
    CHECK(glob("*", "*x"));
    CHECK(glob("*", "*"));
    CHECK(glob("*", ""));
    CHECK(glob("operator*", "X::operator*="));
    CHECK(glob("a*b", "a*xb"));
    CHECK_FALSE(glob("a*b", "a*c"));
    // '*' crosses "::"; there is no escape in a glob: '\' and '[' are themselves.
    CHECK(glob("demo::*::service", "demo::Http11Processor::service"));
    CHECK(glob("GET /static/*.js", "GET /static/x.js"));
    CHECK_FALSE(glob("GET /static/*.js", "GET /static/x.css"));
    CHECK(glob("a[b]\\", "a[b]\\"));
    CHECK_FALSE(glob("a[b]", "ab"));
    CHECK(glob("ns::C::operator()", "ns::C::operator()"));
    CHECK_FALSE(glob("ns::C::operator()", "ns::C::operator"));
}

TEST_CASE("the whole name, or the whole of what follows any '::'") {
    CHECK(glob("service", "demo::Http11Processor::service"));
    CHECK(glob("Http11Processor::service", "demo::Http11Processor::service"));
    CHECK(glob("demo::Http11Processor::service", "demo::Http11Processor::service"));
    CHECK_FALSE(glob("Processor::service", "demo::Http11Processor::service"));  // not after "::"
    CHECK_FALSE(glob("apper::map", "shop::Mapper::map"));
    CHECK(glob("map", "shop::Mapper::map"));
    CHECK_FALSE(glob("map", "shop::Mapper::mapper"));
    CHECK_FALSE(glob("shop", "shop::Mapper::map"));  // a prefix is not the whole
    CHECK_FALSE(glob("service", "demo:service"));    // one ':' is not "::"
    CHECK(regex("map", "shop::Mapper::map"));
    CHECK_FALSE(regex("apper::map", "shop::Mapper::map"));
    CHECK_FALSE(regex("map", "shop::Mapper::mapper"));
    // Every "::", overlapping ones too: what follows the second "::" of ":::" is "b".
    CHECK(glob("b", "a:::b"));
    CHECK(glob(":b", "a:::b"));
    CHECK(glob("b", "::::b"));
    // A pattern that matches the empty string matches a name ending in "::" (and the empty name).
    CHECK(regex("x*", "a::"));
    CHECK(regex("x*", ""));
    CHECK_FALSE(regex("x*", "a:"));
    CHECK_FALSE(glob("?", ""));
    CHECK_FALSE(glob("?", "a::"));
    CHECK(glob("?", "a::b"));
}

TEST_CASE("regex: the supported subset") {
    CHECK(regex("Mapper::(map|lookup)", "shop::Mapper::lookup"));
    CHECK(regex("Mapper::(map|lookup)", "shop::Mapper::map"));
    CHECK_FALSE(regex("Mapper::(map|lookup)", "shop::Mapper::lookups"));
    CHECK_FALSE(regex("Mapper::(map|lookup)", "shop::Mapper::"));
    CHECK(regex("(?:handle|serve)[A-Z]\\w*", "http::Server::serveFile"));
    CHECK_FALSE(regex("(?:handle|serve)[A-Z]\\w*", "http::Server::serve"));
    CHECK(regex("Http11\\w+::parse\\w+", "Http11InputBuffer::parseHeaders"));
    CHECK(regex("GET /static/.*\\.js", "GET /static/x.js"));
    CHECK_FALSE(regex("GET /static/.*\\.js", "GET /static/xjs"));
    CHECK(regex("operator\\(\\)", "ns::C::operator()"));
    CHECK_FALSE(regex("operator()", "ns::C::operator()"));  // an empty group, not parentheses
    CHECK(regex("operator()", "ns::C::operator"));

    SUBCASE("classes") {
        CHECK(regex("[abc]+", "cab"));
        CHECK_FALSE(regex("[abc]+", "cad"));
        CHECK(regex("[a-c]x", "bx"));
        CHECK_FALSE(regex("[a-c]x", "dx"));
        CHECK(regex("[^a-c]x", "dx"));
        CHECK_FALSE(regex("[^a-c]x", "bx"));
        CHECK(regex("[a-]", "-"));       // '-' at an end is literal
        CHECK(regex("[-a]", "-"));
        CHECK(regex("[--/]", "."));      // a range from '-' to '/'
        CHECK(regex("[\\]\\[\\-^]+", "]-[^"));
        CHECK(regex("[\\d_]+", "1_2"));
        CHECK(regex("[\\x41-\\x43]", "B"));
        CHECK_FALSE(regex("[\\x41-\\x43]", "D"));
        CHECK(regex("[\\W]", "-"));
        CHECK_FALSE(regex("[\\W]", "a"));
    }
    SUBCASE("escapes") {
        CHECK(regex("\\.\\\\\\(\\)\\[\\]\\{\\}\\*\\+\\?\\|\\^\\$\\:", ".\\()[]{}*+?|^$:"));
        CHECK(regex("\\d\\D\\w\\W\\s\\S", "1a_ \tx"));
        CHECK_FALSE(regex("\\d", "a"));
        CHECK_FALSE(regex("\\w", "-"));
        for (const char space : std::string(" \t\n\v\f\r")) CHECK(regex("\\s", std::string(1, space)));
        CHECK_FALSE(regex("\\s", "x"));
        CHECK(regex("\\t\\n\\r\\f\\v", "\t\n\r\f\v"));
        CHECK(regex("a\\x00b", std::string_view("a\0b", 3)));
        CHECK(regex("\\xC3\\xA9", "\xC3\xA9"));
        CHECK(regex("\\/\\-\\#\\~", "/-#~"));  // any ASCII punctuation
    }
    SUBCASE("'.' is any byte, '\\n' and '\\r' too") {
        CHECK(regex("a.b", "a\nb"));
        CHECK(regex("a.b", "a\rb"));
        CHECK(regex("a.b", std::string_view("a\0b", 3)));
        CHECK(regex("a.b", "a\xFF" "b"));
        CHECK_FALSE(regex("a.b", "a\xC3\xA9" "b"));  // one byte, not one UTF-8 character
    }
    SUBCASE("repetition") {
        CHECK(regex("a*", ""));
        CHECK(regex("a+b?", "aaa"));
        CHECK_FALSE(regex("a+b?", "b"));
        CHECK(regex("a{3}", "aaa"));
        CHECK_FALSE(regex("a{3}", "aa"));
        CHECK_FALSE(regex("a{3}", "aaaa"));
        CHECK(regex("a{2,}", "aaaaa"));
        CHECK_FALSE(regex("a{2,}", "a"));
        CHECK(regex("a{2,3}b+", "aaabbb"));
        CHECK_FALSE(regex("a{2,3}b+", "aaaabbb"));
        CHECK(regex("(ab){0,2}c", "c"));
        CHECK(regex("(ab){0,2}c", "ababc"));
        CHECK_FALSE(regex("(ab){0,2}c", "abababc"));
        CHECK(regex("a{0}b", "b"));
        CHECK(regex("(a|bc){2}", "bca"));
        CHECK(regex("a*?b+?c??", "aab"));  // lazy: the same names
        CHECK(regex("a{1,2}?", "aa"));
        CHECK(regex("(a*)*", "aaa"));
        CHECK(regex("(a|)+b", "aab"));
        CHECK(regex("()*a", "a"));
        CHECK(regex("(){100}a", "a"));
        CHECK(regex("a{100}", repeated("a", 100)));
        CHECK_FALSE(regex("a{100}", repeated("a", 99)));
        CHECK(regex("a{0,100}", repeated("a", 100)));
        CHECK_FALSE(regex("a{0,100}", repeated("a", 101)));
    }
    SUBCASE("alternation, empty branches, anchors that do nothing") {
        CHECK(regex("a|b|", ""));
        CHECK(regex("|a", "a"));
        CHECK(regex("x(|y)z", "xz"));
        CHECK(regex("^service$", "demo::service"));
        CHECK(regex("^a|b$", "b"));
        CHECK(regex("^", ""));
        CHECK(regex("$", "a::"));
        CHECK_FALSE(regex("^$", "a"));
        CHECK(regex("\\$", "$"));
        CHECK(regex("a\\$", "a$"));
    }
}

TEST_CASE("names are bytes: NUL, '*', '?', UTF-8 and control bytes") {
    const std::string with_nul("ns::a\0b::c", 10);
    CHECK(glob("c", with_nul));
    CHECK(glob(std::string_view("a\0b::c", 6), with_nul));
    CHECK(glob("a?b::c", with_nul));
    CHECK_FALSE(glob("ab::c", with_nul));
    CHECK(regex("a\\x00b::c", with_nul));
    CHECK(regex(std::string_view("a\0b::c", 6), with_nul));  // a NUL in the pattern is itself
    CHECK(glob("*", with_nul));
    CHECK(regex(".*", with_nul));
    CHECK(glob("?", "*"));
    CHECK(glob("?", "?"));
    CHECK(glob("a?", "a*"));
    CHECK(glob("h\xC3\xA9llo", "ns::h\xC3\xA9llo"));
    CHECK(glob("h??llo", "h\xC3\xA9llo"));  // '?' is one byte
    CHECK_FALSE(glob("h?llo", "h\xC3\xA9llo"));
    CHECK(regex("h\xC3\xA9+llo", "h\xC3\xA9\xA9llo"));  // '+' repeats the last byte
    CHECK(glob("\x01\x7f\xff", "x::\x01\x7f\xff"));
    CHECK(regex("[\\x00-\\x1f]+", std::string("\x01\x02\n\0", 4)));
    CHECK_FALSE(regex("[\\x00-\\x1f]+", "\x01 "));
    CHECK(glob("*", std::string(1, '\0')));
    CHECK_FALSE(glob("a", std::string(1, '\0')));
}

TEST_CASE("refused patterns: what, where, and a clear message") {
    const auto R = PatternSyntax::regex;
    const auto G = PatternSyntax::glob;
    const std::vector<Refusal> refusals = {
        {G, "", "empty pattern", 0},
        {R, "", "empty pattern", 0},
        {G, repeated("a", 257), "longer than 256 bytes", 256},
        {R, repeated("a", 257), "longer than 256 bytes", 256},
        {R, "(a)\\1", "back-reference '\\1' is not supported", 3},
        {R, "(?<n>a)\\k<n>", "named group '(?<' is not supported", 0},
        {R, "a\\k<n>", "named back-reference '\\k' is not supported", 1},
        {R, "(?=a)a", "lookahead '(?=' is not supported", 0},
        {R, "x(?!a)", "lookahead '(?!' is not supported", 1},
        {R, "(?<=a)b", "lookbehind '(?<=' is not supported", 0},
        {R, "(?<!a)b", "lookbehind '(?<!' is not supported", 0},
        {R, "(?i)a", "group '(?i' is not supported (only '(' and '(?:')", 0},
        {R, "a\\b", "word boundary '\\b' is not supported", 1},
        {R, "\\Ba", "word boundary '\\B' is not supported", 0},
        {R, "[\\b]", "'\\b' inside a class (a backspace in ECMAScript) is not supported", 1},
        {R, "\\0", "'\\0' is not supported (write '\\x00' for a NUL byte)", 0},
        {R, "\\cA", "control escape '\\c' is not supported", 0},
        {R, "\\u00e9", "Unicode escape '\\u' is not supported", 0},
        {R, "\\p{L}", "Unicode property '\\p' is not supported", 0},
        {R, "a\\q", "unknown escape '\\q'", 1},
        {R, "\\ ", "unknown escape '\\ '", 0},
        {R, "a\\", "'\\' at the end of the pattern", 1},
        {R, "\\x4", "'\\x' needs two hex digits", 0},
        {R, "\\xg0", "'\\x' needs two hex digits", 0},
        {R, "a^b", "'^' is accepted only as the first byte", 1},
        {R, "^a|^b", "'^' is accepted only as the first byte", 3},
        {R, "a$b", "'$' is accepted only as the last byte", 1},
        {R, "(a$)", "'$' is accepted only as the last byte", 2},
        {R, "*a", "'*' has nothing to repeat", 0},
        {R, "a|+b", "'+' has nothing to repeat", 2},
        {R, "(?a)", "group '(?a' is not supported", 0},
        {R, "(*a)", "'*' has nothing to repeat", 1},
        {R, "^*", "'*' has nothing to repeat", 1},
        {R, "{2}", "'{' has nothing to repeat (write '\\{' for a literal '{')", 0},
        {R, "a**", "'*' has nothing to repeat (it follows another quantifier)", 2},
        {R, "a*+", "'+' has nothing to repeat (it follows another quantifier)", 2},
        {R, "a{2}{3}", "'{' has nothing to repeat (it follows another quantifier)", 4},
        {R, "a??*", "'*' has nothing to repeat (it follows another quantifier)", 3},
        {R, "a{", "'{' is not a count {n}, {n,} or {n,m}", 1},
        {R, "a{x}", "'{' is not a count {n}, {n,} or {n,m}", 1},
        {R, "a{,3}", "'{' is not a count {n}, {n,} or {n,m}", 1},
        {R, "a{2", "'{' is not a count {n}, {n,} or {n,m}", 1},
        {R, "a{2,3", "'{' is not a count {n}, {n,} or {n,m}", 1},
        {R, "a{101}", "count above 100", 1},
        {R, "a{1,101}", "count above 100", 1},
        {R, "a{2,31111111111111111111111}", "count above 100", 1},  // fuzz/regressions/matcher/
        {R, "a{3,2}", "count {n,m} with m < n", 1},
        {R, "a}", "unmatched '}' (write '\\}' for a literal '}')", 1},
        {R, "a]", "unmatched ']' (write '\\]' for a literal ']')", 1},
        {R, "(a", "'(' is not closed", 0},
        {R, "((a)", "'(' is not closed", 0},
        {R, "a)", "unmatched ')'", 1},
        {R, "[a", "'[' is not closed", 0},
        {R, "[a-", "'[' is not closed", 0},
        {R, "[]a]", "empty class '[]' (write '\\]' for a literal ']')", 0},
        {R, "[^]", "empty class '[^]'", 0},
        {R, "[z-a]", "range 'z-a' is out of order", 2},
        {R, "[\\x42-\\x41]", "range '\\x42-\\x41' is out of order", 5},
        {R, "[\\d-z]", "a range with a class escape such as '\\d' at an end", 3},
        {R, "[a-\\w]", "a range with a class escape such as '\\d' at an end", 2},
        {R, "[[:alpha:]]", "'[' inside a class (write '\\[')", 1},
        {R, repeated("(", 33) + "a" + repeated(")", 33), "groups nested more than 32 deep", 32},
        {R, "(a{10}){30}", "more than 256 automaton states", 11},
        {R, "(a{100}){2}a{57}", "more than 256 automaton states", 16},
        {R, "(((a{100}){100}){100}){100}", "more than 256 automaton states", 15},
    };
    for (const Refusal& r : refusals) {
        CAPTURE(r.pattern);
        bool thrown = false;
        try {
            Pattern(r.pattern, r.syntax);
        } catch (const PatternError& e) {
            thrown = true;
            const std::string what = e.what();
            CAPTURE(what);
            CHECK(what.rfind("tracetree: bad pattern '", 0) == 0);
            CHECK(what.find(r.reason) != std::string::npos);
            CHECK(what.find(" at offset " + std::to_string(r.offset)) != std::string::npos);
            CHECK(e.offset() == r.offset);
        }
        CHECK(thrown);
    }
}

TEST_CASE("the refusal message: the pattern quoted, odd bytes as \\xHH, long ones cut") {
    try {
        Pattern("a\\1", PatternSyntax::regex);
        FAIL("not refused");
    } catch (const std::invalid_argument& e) {  // PatternError is a std::invalid_argument
        CHECK(std::string(e.what()) == "tracetree: bad pattern 'a\\1': back-reference '\\1' is not supported at offset 1");
    }
    try {
        Pattern(std::string_view("\x01\n\xff\\q\0", 6), PatternSyntax::regex);
        FAIL("not refused");
    } catch (const PatternError& e) {
        CHECK(std::string(e.what()) == "tracetree: bad pattern '\\x01\\x0a\\xff\\q\\x00': unknown escape '\\q' at offset 3");
    }
    try {
        Pattern(std::string(4 << 20, '*'), PatternSyntax::glob);  // 4 MiB
        FAIL("not refused");
    } catch (const PatternError& e) {
        CHECK(std::string(e.what()) ==
              "tracetree: bad pattern '" + repeated("*", 64) + "...': longer than 256 bytes at offset 256");
    }
}

TEST_CASE("the limits themselves are accepted") {
    CHECK(glob(repeated("a", 256), "x::" + repeated("a", 256)));
    CHECK(glob(repeated("?*", 128), repeated("a", 128)));
    CHECK_FALSE(glob(repeated("?*", 128), repeated("a", 127)));
    CHECK(regex(repeated("a", 256), repeated("a", 256)));
    const std::string states256 = "(a{100}){2}a{56}";
    CHECK(regex(states256, repeated("a", 256)));
    CHECK_FALSE(regex(states256, repeated("a", 255)));
    CHECK_FALSE(regex(states256, repeated("a", 257)));
    CHECK(regex("(.*){100}(.*){100}(.*){56}", ""));
    CHECK(regex("[a-z]{100}[0-9]{100}", repeated("x", 100) + repeated("7", 100)));
    CHECK(regex(repeated("(", 32) + "a" + repeated(")", 32), "a"));
    CHECK(regex("(a{100}){0}b", "b"));  // written out as nothing
    CHECK(regex("((((){100}){100}){100}){100}a", "a"));  // empty-only groups are not written out
}

TEST_CASE("patterns that make backtracking matchers spin return the right answer") {
    const std::string as = repeated("a", 65536);
    CHECK_FALSE(regex("(.|.)*X", as));
    CHECK(regex("(.|.)*X", as + "X"));
    CHECK_FALSE(regex("(a*)*b", as));
    CHECK(regex("(a*)*b", as + "b"));
    CHECK_FALSE(regex("(a|aa)*c", as));
    CHECK(regex("(|){30}~", "~"));  // 2^30 paths for std::regex (fuzz/regressions/matcher/)
    CHECK(regex("(|a){100}~", repeated("a", 100) + "~"));
    CHECK_FALSE(regex("(|a){100}~", repeated("a", 101) + "~"));
    CHECK_FALSE(regex("(a+)+b", as));
    CHECK_FALSE(regex("((a|b)*(a|b|.)*)*X", as));
    CHECK(regex("(a?){100}a{100}", repeated("a", 100)));
    CHECK(regex("(a?){100}a{100}", repeated("a", 200)));
    CHECK_FALSE(regex("(a?){100}a{100}", repeated("a", 99)));
    CHECK_FALSE(regex("(a?){100}a{100}", repeated("a", 201)));
    CHECK_FALSE(regex("(a?){100}a{100}", as));
    CHECK_FALSE(regex("([a-z]|\\w|.)*:::", as));
    CHECK(regex("(.*){100}(.*){100}(.*){56}", as));
    CHECK_FALSE(glob("*a*a*a*a*a*a*a*a*b", as));
    CHECK(glob("*a*a*a*a*a*a*a*a*b", as + "b"));
    CHECK_FALSE(glob(repeated("*a", 120) + "*b", as));
    CHECK(glob(repeated("?*", 128), as));
    const std::string colons = repeated("a::", 20000);
    CHECK(glob("a::", colons));
    CHECK(glob("a::a::", colons));
    CHECK_FALSE(glob("b", colons));
    CHECK_FALSE(regex("(a::)*b", colons));
    CHECK(regex("(a::)*", colons));
    CHECK_FALSE(glob("*::*:::*", colons));
    CHECK(glob("*::*", colons));
}

TEST_CASE("the header in a second translation unit: one definition of everything") {
    CHECK(second_tu_matches("Mapper::*", "shop::Mapper::map"));
    CHECK_FALSE(second_tu_matches("Mapper::*", "shop::Mapperx::map"));
}

TEST_CASE("a pattern is a value: copies and moves match the same, text() and syntax() as given") {
    const Pattern original("Mapper::(map|lookup)", PatternSyntax::regex);
    const Pattern copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(copy.text() == "Mapper::(map|lookup)");
    CHECK(copy.syntax() == PatternSyntax::regex);
    CHECK(copy.matches("shop::Mapper::lookup"));
    CHECK_FALSE(copy.matches("shop::Mapper::lookups"));
    Pattern source("Mapper::*", PatternSyntax::glob);
    const Pattern moved = std::move(source);
    CHECK(moved.matches("shop::Mapper::map"));
    CHECK_FALSE(source.matches("shop::Mapper::map"));  // NOLINT(bugprone-use-after-move): no crash, no match
    const Pattern g("m?p", PatternSyntax::glob);
    CHECK(g.text() == "m?p");
    CHECK(g.syntax() == PatternSyntax::glob);
}

TEST_CASE("differential: globs against a recursive matcher") {
    std::mt19937 random(20240610);
    const std::vector<std::string> names = all_strings("ab:*", 5);
    for (int round = 0; round < 1000; ++round) {
        const std::string pattern = random_string(random, "ab:*?", 7);
        if (pattern.empty()) continue;
        CAPTURE(pattern);
        const Pattern compiled(pattern, PatternSyntax::glob);
        for (const std::string& name : names) {
            CAPTURE(name);
            const bool expected = name_or_suffix(name, [&](std::string_view s) { return glob_reference(pattern, s); });
            if (compiled.matches(name) != expected) CHECK(compiled.matches(name) == expected);
        }
        for (int n = 0; n < 50; ++n) {
            const std::string name = random_string(random, "ab:*?x", 12);
            CAPTURE(name);
            const bool expected = name_or_suffix(name, [&](std::string_view s) { return glob_reference(pattern, s); });
            if (compiled.matches(name) != expected) CHECK(compiled.matches(name) == expected);
        }
    }
}

TEST_CASE("differential: regexes against std::regex (ECMAScript)") {
    std::mt19937 random(7);
    // No '\n' or '\r' in names: ECMAScript's '.' does not match them, this subset's does.
    const std::vector<std::string> names = all_strings("ab:", 5);
    int compared = 0;
    for (int round = 0; round < 1500; ++round) {
        const std::string pattern = random_regex(random);
        if (pattern.empty()) continue;
        CAPTURE(pattern);
        const Pattern compiled(pattern, PatternSyntax::regex);  // every generated construct is supported
        const std::regex reference(pattern, std::regex::ECMAScript);
        const auto check = [&](const std::string& name) {
            CAPTURE(name);
            const bool expected = name_or_suffix(name, [&](std::string_view s) {
                return std::regex_match(s.begin(), s.end(), reference);
            });
            if (compiled.matches(name) != expected) CHECK(compiled.matches(name) == expected);
            ++compared;
        };
        for (const std::string& name : names) check(name);
        for (int n = 0; n < 40; ++n) check(random_string(random, "ab:1_ .x", 12));
    }
    CHECK(compared > 300000);  // the loops above did compare
}
