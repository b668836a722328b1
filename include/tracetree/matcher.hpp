// TEMPORARY stand-in with the final API; replaced by the linear-time matcher.
#ifndef TRACETREE_MATCHER_HPP
#define TRACETREE_MATCHER_HPP

#include <regex>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tracetree {

enum class PatternSyntax { glob, regex };

class PatternError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

class Pattern {
public:
    Pattern(std::string_view text, PatternSyntax syntax) : text_(text), syntax_(syntax) {
        if (text.empty()) throw PatternError("tracetree: empty trace pattern");
        if (syntax == PatternSyntax::regex) {
            try {
                regex_ = std::regex(text_, std::regex::ECMAScript);
            } catch (const std::regex_error& e) {
                throw PatternError("tracetree: bad pattern '" + text_ + "': " + e.what());
            }
        }
    }
    bool matches(std::string_view name) const {
        for (std::size_t from = 0;;) {
            if (whole(name.substr(from))) return true;
            const std::size_t next = name.find("::", from);
            if (next == std::string_view::npos) return false;
            from = next + 2;
        }
    }
    const std::string& text() const { return text_; }
    PatternSyntax syntax() const { return syntax_; }

private:
    bool whole(std::string_view name) const {
        if (syntax_ == PatternSyntax::regex) return std::regex_match(name.begin(), name.end(), regex_);
        std::size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
        std::string_view pattern = text_;
        while (t < name.size()) {
            if (p < pattern.size() && pattern[p] == '*') {
                star = p++;
                resume = t;
            } else if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[t])) {
                ++p;
                ++t;
            } else if (star != std::string_view::npos) {
                p = star + 1;
                t = ++resume;
            } else {
                return false;
            }
        }
        while (p < pattern.size() && pattern[p] == '*') ++p;
        return p == pattern.size();
    }
    std::string text_;
    PatternSyntax syntax_;
    std::regex regex_;
};

}  // namespace tracetree

#endif
