// tracetree formatting: one helper for each kind of number the renderers print. SPDX-License-Identifier: MIT
//
// Numbers are formatted here rather than by a stream, so a stream's locale cannot change them.
#ifndef TRACETREE_DETAIL_FORMAT_HPP
#define TRACETREE_DETAIL_FORMAT_HPP

#include "../values.hpp"

#include <charconv>  // std::to_chars: shortest round-trip digits
#include <chrono>
#include <cmath>     // std::signbit, std::isnan, std::isinf
#include <cstdint>
#include <cstdio>    // std::snprintf
#include <ctime>     // localtime_r/gmtime_r
#include <string>
#include <string_view>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// The shortest decimal digits that read back as `value` (value > 0, finite), and the exponent of the
// first digit: 0.096584 -> {"96584", -2}.
struct Digits {
    std::string digits;
    int exponent = 0;
};
inline Digits shortest_digits(double value) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
    const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
    const std::size_t e = text.find('e');
    Digits out;
    for (const char c : text.substr(0, e))
        if (c != '.') out.digits += c;
    for (const char c : text.substr(e + 2)) out.exponent = out.exponent * 10 + (c - '0');
    if (text[e + 1] == '-') out.exponent = -out.exponent;
    return out;
}

// Java's Double.toString: shortest round-trip digits; plain between 1e-3 and 1e7 with at least one
// decimal ("3.0", "0.096584"), otherwise "d.dddE±n" ("8.55E-4").
inline std::string java_double(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
    if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
    const std::string sign = value < 0 ? "-" : "";
    const double magnitude = value < 0 ? -value : value;
    const Digits d = shortest_digits(magnitude);
    if (magnitude >= 1e-3 && magnitude < 1e7) {
        if (d.exponent < 0) return sign + "0." + std::string(static_cast<std::size_t>(-d.exponent - 1), '0') + d.digits;
        const std::size_t point = static_cast<std::size_t>(d.exponent) + 1;
        if (d.digits.size() <= point) return sign + d.digits + std::string(point - d.digits.size(), '0') + ".0";
        return sign + d.digits.substr(0, point) + "." + d.digits.substr(point);
    }
    return sign + d.digits.substr(0, 1) + "." + (d.digits.size() > 1 ? d.digits.substr(1) : "0") + "E" +
           std::to_string(d.exponent);
}

// Nanoseconds as milliseconds, as Arthas prints them: Java's Double.toString of ns / 1e6.
inline std::string java_millis(Nanos duration) { return java_double(static_cast<double>(duration.count()) / 1000000.0); }

// part/whole as Arthas prints it: Java's String.format("%.2f", part * 100.0 / whole), which rounds half
// up the shortest decimal digits of that double (97.695 -> "97.70", though the exact ratio is below
// 97.695). A whole of 0 gives what Java gives: "NaN" for 0/0, "Infinity" otherwise.
inline std::string percent(Nanos part, Nanos whole) {
    const double ratio = static_cast<double>(part.count()) * 100.0 / static_cast<double>(whole.count());
    if (std::isnan(ratio)) return "NaN";
    if (std::isinf(ratio)) return ratio > 0 ? "Infinity" : "-Infinity";
    const double magnitude = ratio < 0 ? -ratio : ratio;
    std::string integer = "0", fraction = "00";
    if (magnitude != 0) {
        const Digits d = shortest_digits(magnitude);
        // Digits with the decimal point after position `point` (padded with zeros on either side).
        std::string digits = d.digits;
        int point = d.exponent + 1;
        if (point <= 0) {
            digits.insert(0, static_cast<std::size_t>(-point + 1), '0');
            point = 1;
        }
        if (digits.size() < static_cast<std::size_t>(point) + 3) digits.append(static_cast<std::size_t>(point) + 3 - digits.size(), '0');
        const bool round_up = digits[static_cast<std::size_t>(point) + 2] >= '5';
        digits.resize(static_cast<std::size_t>(point) + 2);
        for (std::size_t i = digits.size(); round_up && i-- > 0;) {  // half up, carrying
            if (digits[i] == '9') {
                digits[i] = '0';
                if (i == 0) digits.insert(0, 1, '1'), ++point;
            } else {
                ++digits[i];
                break;
            }
        }
        integer = digits.substr(0, static_cast<std::size_t>(point));
        fraction = digits.substr(static_cast<std::size_t>(point));
        const std::size_t nonzero = integer.find_first_not_of('0');
        integer = nonzero == std::string::npos ? "0" : integer.substr(nonzero);
    }
    return (ratio < 0 && (integer != "0" || fraction != "00") ? "-" : "") + integer + "." + fraction;
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

#endif  // TRACETREE_DETAIL_FORMAT_HPP
