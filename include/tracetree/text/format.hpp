// tracetree formatting: one helper for each kind of number the renderers print. SPDX-License-Identifier: MIT
//
// Numbers are formatted here rather than by a stream, so a stream's locale cannot change them.
#ifndef TRACETREE_TEXT_FORMAT_HPP
#define TRACETREE_TEXT_FORMAT_HPP

#include "../values.hpp"

#include <algorithm> // std::find
#include <charconv>  // std::to_chars: shortest round-trip digits
#include <chrono>
#include <cmath>     // std::signbit, std::isnan, std::isinf, std::floor
#include <cstdint>
#include <cstdio>    // std::snprintf
#include <ctime>     // localtime_r/gmtime_r
#include <string>
#include <string_view>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// Java's Double.toString, appended to `out`: shortest round-trip digits; plain between 1e-3 and 1e7
// with at least one decimal ("3.0", "0.096584"), otherwise "d.dddE±n" ("8.55E-4").
inline void append_java_double(std::string& out, double value) {
    if (std::isnan(value)) {
        out += "NaN";
        return;
    }
    if (std::isinf(value)) {
        out += value > 0 ? "Infinity" : "-Infinity";
        return;
    }
    if (value == 0) {
        out += std::signbit(value) ? "-0.0" : "0.0";
        return;
    }
    char buffer[64];
    const double magnitude = value < 0 ? -value : value;
    if (magnitude >= 1e-3 && magnitude < 1e7) {
        const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
        const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
        out += text;
        if (text.find('.') == std::string_view::npos) out += ".0";
        return;
    }
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
    const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));  // "8.55e-04"
    const std::size_t e = text.find('e');
    out += text.substr(0, e);
    if (text.substr(0, e).find('.') == std::string_view::npos) out += ".0";
    out += 'E';
    if (text[e + 1] == '-') out += '-';
    std::size_t digits = e + 2;
    while (digits + 1 < text.size() && text[digits] == '0') ++digits;
    out += text.substr(digits);
}
inline std::string java_double(double value) {
    std::string out;
    append_java_double(out, value);
    return out;
}

// Nanoseconds as milliseconds, as Arthas prints them: Java's Double.toString of ns / 1e6. Below 1e15
// ns (11 days) the double's shortest digits are the decimal digits of ns, since two decimals of at
// most 15 significant digits never round to the same double: printed from the integer, without
// to_chars (the renderers' hottest number).
inline void append_java_millis(std::string& out, Nanos duration) {
    const std::int64_t ns = duration.count();
    const std::uint64_t magnitude = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
    if (magnitude == 0 || magnitude >= 1000000000000000u) {
        append_java_double(out, static_cast<double>(ns) / 1000000.0);
        return;
    }
    char digits[16];
    int count = 0;
    for (std::uint64_t rest = magnitude; rest != 0; rest /= 10) digits[15 - count++] = static_cast<char>('0' + rest % 10);
    const char* first = digits + 16 - count;
    if (ns < 0) out += '-';
    if (magnitude >= 1000 && magnitude < 10000000000000u) {  // 1e-3 ms ..< 1e7 ms: plain
        const int whole = count > 6 ? count - 6 : 0;
        if (whole == 0) out += '0';
        else out.append(first, static_cast<std::size_t>(whole));
        out += '.';
        int last = count;  // the fraction without its trailing zeros, at least one digit
        while (last > whole + 1 && first[last - 1] == '0') --last;
        for (int i = count; i < 6; ++i) out += '0';  // leading zeros of the fraction
        out.append(first + whole, static_cast<std::size_t>(last - whole));
        return;
    }
    int last = count;  // scientific: d.ddd, trailing zeros dropped, then E and the exponent
    while (last > 1 && first[last - 1] == '0') --last;
    out += first[0];
    out += '.';
    if (last == 1) out += '0';
    else out.append(first + 1, static_cast<std::size_t>(last - 1));
    out += 'E';
    out += std::to_string(count - 7);
}
inline std::string java_millis(Nanos duration) {
    std::string out;
    append_java_millis(out, duration);
    return out;
}

// part/whole as Arthas prints it, appended to `out`: Java's String.format("%.2f", part * 100.0 / whole),
// which rounds half up the shortest decimal digits of that double (97.695 -> "97.70", though the
// exact ratio is below 97.695). A whole of 0 gives what Java gives: "NaN" for 0/0, "Infinity" otherwise.
inline void append_percent(std::string& out, Nanos part, Nanos whole) {
    const double ratio = static_cast<double>(part.count()) * 100.0 / static_cast<double>(whole.count());
    if (std::isnan(ratio)) {
        out += "NaN";
        return;
    }
    if (std::isinf(ratio)) {
        out += ratio > 0 ? "Infinity" : "-Infinity";
        return;
    }
    // Away from a tie (xx.xx5 within 1e-7), the shortest digits and the double itself round alike:
    // the hundredths straight from the double, without to_chars (the renderers print one per line).
    const double hundredths = ratio * 100.0;
    if (hundredths >= 0 && hundredths < 1e12) {
        const double below = std::floor(hundredths);
        if (std::fabs(hundredths - below - 0.5) > 1e-7) {
            const auto rounded = static_cast<std::uint64_t>(hundredths - below > 0.5 ? below + 1 : below);
            out += std::to_string(rounded / 100);
            out += '.';
            out += static_cast<char>('0' + rounded % 100 / 10);
            out += static_cast<char>('0' + rounded % 10);
            return;
        }
    }
    // Shortest digits in fixed notation, then half up at two decimals on those digits, carrying.
    char digits[400];  // fixed notation of any double fits in 330 characters
    char* end = std::to_chars(digits + 1, digits + sizeof digits, ratio < 0 ? -ratio : ratio, std::chars_format::fixed).ptr;
    char* point = std::find(digits + 1, end, '.');
    if (point == end) *end++ = '.';
    while (end - point < 4) *end++ = '0';
    const bool up = point[3] >= '5';
    end = point + 3;
    digits[0] = '0';  // room for a carry out of the first digit
    for (char* at = end - 1; up && at >= digits; --at) {
        if (*at == '.') continue;
        if (*at != '9') {
            ++*at;
            break;
        }
        *at = '0';
    }
    char* first = digits[0] == '0' ? digits + 1 : digits;
    if (ratio < 0 && std::any_of(first, end, [](char c) { return c != '0' && c != '.'; })) out += '-';
    out.append(first, static_cast<std::size_t>(end - first));
}
inline std::string percent(Nanos part, Nanos whole) {
    std::string out;
    append_percent(out, part, whole);
    return out;
}

// `decimals` fixed decimals, trailing zeros dropped: 12.50 -> "12.5".
inline std::string fixed(double value, int decimals) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, decimals);
    std::string text(buffer, result.ptr);
    if (text.find('.') != std::string::npos) {
        while (text.back() == '0') text.pop_back();
        if (text.back() == '.') text.pop_back();
    }
    return text == "-0" ? "0" : text;
}

// Two decimals, as Java's DecimalFormat("0.00") prints them (half even on the exact double).
inline std::string fixed2(double value) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, 2);
    return std::string(buffer, result.ptr);
}

// For people: "0ms", "850ns", "12.3µs", "74.2ms", "121ms", "1.25s": three significant digits at most.
inline std::string duration(Nanos d) {
    const std::int64_t ns = d.count();
    if (ns == 0) return "0ms";
    const double magnitude = ns < 0 ? -static_cast<double>(ns) : static_cast<double>(ns);
    const char* unit = "s";
    double value = magnitude / 1e9;
    // Units switch at 999.5 so that rounding never prints "1000µs".
    if (magnitude < 999.5) value = magnitude, unit = "ns";
    else if (magnitude < 999.5e3) value = magnitude / 1e3, unit = "\xC2\xB5s";
    else if (magnitude < 999.5e6) value = magnitude / 1e6, unit = "ms";
    const int decimals = value >= 99.95 ? 0 : value >= 9.995 ? 1 : 2;
    return (ns < 0 ? "-" : "") + fixed(value, decimals) + unit;
}

// "2026-12-01 02:12:09.668" (Arthas's ts=), local time or UTC.
inline std::string timestamp(std::chrono::system_clock::time_point time, bool utc) {
    using namespace std::chrono;
    const std::int64_t ms = duration_cast<milliseconds>(time.time_since_epoch()).count();
    const std::int64_t ms_part = ((ms % 1000) + 1000) % 1000;
    const std::time_t seconds = static_cast<std::time_t>((ms - ms_part) / 1000);
    std::tm parts{};
#if defined(_WIN32)
    utc ? gmtime_s(&parts, &seconds) : localtime_s(&parts, &seconds);
#else
    utc ? gmtime_r(&seconds, &parts) : localtime_r(&seconds, &parts);
#endif
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02d %02d:%02d:%02d.%03d", parts.tm_year + 1900, parts.tm_mon + 1,
                  parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, static_cast<int>(ms_part));
    return buffer;
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_TEXT_FORMAT_HPP
