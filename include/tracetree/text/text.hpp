// tracetree text helpers: the small byte-level ones more than one part needs. SPDX-License-Identifier: MIT
//
// Written once here so that the admin page, the SVG views, the OTLP client and the matcher cannot
// drift apart in what they take for a hex digit, an upper-case letter or a character to escape.
#ifndef TRACETREE_TEXT_TEXT_HPP
#define TRACETREE_TEXT_TEXT_HPP

#include "../core/abi.hpp"  // the namespace macros

#include <cstddef>
#include <string>
#include <string_view>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// ASCII only: header names, media types and schemes are ASCII, and a locale must not change them.
inline std::string lowercase(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

inline int hex_value(char c) noexcept {  // -1 when c is not a hex digit (either case)
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Length of the UTF-8 sequence starting at text[at], or 0 when it is not one (overlong forms,
// surrogates and code points past U+10FFFF included).
inline std::size_t utf8_length(std::string_view text, std::size_t at) noexcept {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(at);
    if (lead < 0x80) return 1;
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) length = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        return 0;
    }
    if (at + length > text.size() || byte(at + 1) < low || byte(at + 1) > high) return 0;
    for (std::size_t i = 2; i < length; ++i)
        if ((byte(at + i) & 0xC0) != 0x80) return 0;
    return length;
}

// Valid UTF-8, with each byte that does not start a valid sequence replaced by U+FFFD.
inline std::string utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t length = utf8_length(text, i);
        if (length == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
        } else {
            out.append(text, i, length);
            i += length;
        }
    }
    return out;
}

inline bool is_control(unsigned char c) noexcept { return c < 0x20 || c == 0x7F; }

// HTTP's optional white space (RFC 9110: spaces and tabs) off both ends.
inline std::string_view trim_ows(std::string_view text) noexcept {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

// Text and attribute values for HTML (`html`: '\n' and '\t' kept, as a <pre> shows them) or XML (SVG:
// '\n' as "&#10;", since a tooltip has several lines). Not UTF-8 becomes U+FFFD, and so does every
// other control character: XML 1.0 cannot carry most of them even as references.
inline std::string markup(std::string_view raw, bool html) {
    std::string out;
    for (const char c : utf8(raw)) {
        if (c == '&') out += "&amp;";
        else if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '"') out += "&quot;";
        else if (c == '\'') out += "&#39;";
        else if (c == '\n') out += html ? "\n" : "&#10;";
        else if (c == '\t' && html) out += c;
        else if (is_control(static_cast<unsigned char>(c))) out += "\xEF\xBF\xBD";
        else out += c;
    }
    return out;
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_TEXT_TEXT_HPP
