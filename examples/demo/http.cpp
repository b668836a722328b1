#include "http.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace demo::http {
namespace {

bool is_tchar(char c) {  // RFC 9110 token characters
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool is_token(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_tchar); }

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
        const char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
        if (x != y) return false;
    }
    return true;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

// Where a line of the header section stands. A CR is allowed only right before its LF: a bare CR
// (RFC 9112 2.2) is an error, found before the line ends, so that a client ending its lines with CR
// alone gets its 400 at once instead of waiting for the read timeout.
enum class Line { done, incomplete, bare_cr };

// The next line of `buffer` from `at`, without its LF or CRLF, into `line`.
Line next_line(std::string_view buffer, std::size_t& at, std::string_view& line) {
    const std::size_t lf = buffer.find('\n', at);
    const std::size_t end = lf == std::string_view::npos ? buffer.size() : lf;
    const std::size_t cr = buffer.substr(0, end).find('\r', at);
    if (cr != std::string_view::npos && cr + 1 < end) return Line::bare_cr;  // a CR, then not the LF
    if (lf == std::string_view::npos) return Line::incomplete;  // a CR at the very end may yet be a CRLF
    line = buffer.substr(at, (cr == std::string_view::npos ? lf : cr) - at);
    at = lf + 1;
    return Line::done;
}

constexpr const char* kBareCr = "bare CR in the message head: lines end with CRLF (RFC 9112 2.2)";

// Host's value: a reg-name, IPv4 or [IP-literal], then an optional :port (RFC 9110 7.2, RFC 3986 3.2.2),
// checked by its characters only.
bool is_host_value(std::string_view value) {
    return std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("-._~!$&'()*+,;=%:[]").find(c) != std::string_view::npos;
    });
}

ParseResult fail(int status, std::string reason) {
    ParseResult result;
    result.status = ParseStatus::error;
    result.error_status = status;
    result.error_reason = std::move(reason);
    return result;
}

std::string printable(std::string_view text) {  // for error messages that echo client bytes
    std::string out;
    for (char c : text.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return out + (text.size() > 64 ? "..." : "");
}

// Parses "NNN" digits of a Content-Length; nothing when it is not a plain decimal number.
std::optional<std::uint64_t> parse_length(std::string_view text) {
    if (text.empty() || text.size() > 18) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return value;
}

struct HeaderBlock {  // what the request and response parsers share
    Headers headers;
    std::optional<std::uint64_t> content_length;
    bool has_transfer_encoding = false;
    bool has_host = false;
    bool connection_close = false, connection_keep_alive = false;
};

// Parses header lines from `at` up to the blank line. Returns an error status, 0 when done, -1 when
// the blank line has not arrived yet.
int parse_headers(std::string_view buffer, std::size_t& at, const Limits& limits, HeaderBlock& block,
                  std::string& reason) {
    for (;;) {
        std::string_view line;
        const Line state = next_line(buffer, at, line);
        if (state == Line::bare_cr) {
            reason = kBareCr;
            return 400;
        }
        if (state == Line::incomplete) return -1;
        if (line.empty()) return 0;
        if (line.front() == ' ' || line.front() == '\t') {
            reason = "obsolete header line folding";
            return 400;
        }
        const std::size_t colon = line.find(':');
        const std::string_view name = line.substr(0, colon);
        if (colon == std::string_view::npos || !is_token(name)) {
            reason = "malformed header line '" + printable(line) + "'";
            return 400;
        }
        const std::string_view value = trim(line.substr(colon + 1));
        for (char c : value) {
            if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
                reason = "control character in header '" + printable(name) + "'";
                return 400;
            }
        }
        if (block.headers.size() >= limits.max_headers) {
            reason = "more than " + std::to_string(limits.max_headers) + " headers";
            return 431;
        }
        if (iequals(name, "content-length")) {
            const std::optional<std::uint64_t> length = parse_length(value);
            if (!length || (block.content_length && *block.content_length != *length)) {
                reason = "bad Content-Length '" + printable(value) + "'";
                return 400;
            }
            block.content_length = length;
        } else if (iequals(name, "transfer-encoding")) {
            block.has_transfer_encoding = true;
        } else if (iequals(name, "host")) {
            // RFC 9112 3.2: 400 for more than one Host line or an invalid one; two Hosts that differ
            // would let a proxy and this server route one request to two different sites.
            if (block.has_host || !is_host_value(value)) {
                reason = block.has_host ? "more than one Host header" : "invalid Host '" + printable(value) + "'";
                return 400;
            }
            block.has_host = true;
        } else if (iequals(name, "connection")) {
            std::string_view rest = value;
            while (!rest.empty()) {  // a comma-separated list of options
                const std::size_t comma = rest.find(',');
                const std::string_view option = trim(rest.substr(0, comma));
                block.connection_close = block.connection_close || iequals(option, "close");
                block.connection_keep_alive = block.connection_keep_alive || iequals(option, "keep-alive");
                rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            }
        }
        block.headers.emplace_back(std::string(name), std::string(value));
    }
}

}  // namespace

const std::string* Request::header(std::string_view name) const {
    for (const auto& header : headers)
        if (iequals(header.first, name)) return &header.second;
    return nullptr;
}

ParseResult parse_request(std::string_view buffer, const Limits& limits) {
    std::size_t at = 0;  // RFC 9112 2.2: empty lines (CRLF or LF) before the request line are ignored
    while (at < buffer.size() && (buffer[at] == '\r' || buffer[at] == '\n')) {
        if (buffer[at] == '\r' && at + 1 == buffer.size()) return {};  // its LF may be on the way
        if (buffer[at] == '\r' && buffer[at + 1] != '\n') return fail(400, kBareCr);
        at += buffer[at] == '\r' ? 2 : 1;
    }
    if (at > limits.max_header_bytes) return fail(400, "too many blank lines before the request");
    const std::size_t start = at;
    std::string_view line;
    const Line state = next_line(buffer, at, line);
    if (state == Line::bare_cr) return fail(400, kBareCr);
    if (state == Line::incomplete) {
        if (buffer.size() - start > limits.max_header_bytes)
            return fail(414, "request line longer than " + std::to_string(limits.max_header_bytes) + " bytes");
        return {};
    }
    if (at - start > limits.max_header_bytes)
        return fail(414, "request line longer than " + std::to_string(limits.max_header_bytes) + " bytes");
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return fail(400, "malformed request line '" + printable(line) + "'");
    Request request;
    request.method = std::string(line.substr(0, sp1));
    request.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    const std::string_view version = line.substr(sp2 + 1);
    if (!is_token(request.method)) return fail(400, "malformed method '" + printable(request.method) + "'");
    if (request.target.empty() || request.target.front() != '/')
        return fail(400, "request target must start with '/'");
    for (char c : request.target)
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            return fail(400, "invalid character in request target");
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
        version[5] > '9' || version[7] < '0' || version[7] > '9')
        return fail(400, "malformed HTTP version '" + printable(version) + "'");
    if (version[5] != '1') return fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported");
    request.minor_version = version[7] - '0';
    const std::size_t question = request.target.find('?');
    request.path = request.target.substr(0, question);
    request.query = question == std::string::npos ? std::string() : request.target.substr(question + 1);

    HeaderBlock block;
    std::string reason;
    const int status = parse_headers(buffer, at, limits, block, reason);
    if (status > 0) return fail(status, reason);
    if (status < 0 || at - start > limits.max_header_bytes) {
        if (buffer.size() - start > limits.max_header_bytes || at - start > limits.max_header_bytes)
            return fail(431, "request headers longer than " + std::to_string(limits.max_header_bytes) + " bytes");
        return {};
    }
    if (block.has_transfer_encoding) return fail(501, "Transfer-Encoding is not supported; send Content-Length");
    request.headers = std::move(block.headers);
    if (request.minor_version >= 1 && request.header("host") == nullptr) return fail(400, "missing Host header");
    const std::uint64_t length = block.content_length.value_or(0);
    if (length > limits.max_body)
        return fail(413, "body of " + std::to_string(length) + " bytes exceeds " + std::to_string(limits.max_body));
    request.keep_alive = request.minor_version >= 1 ? !block.connection_close : block.connection_keep_alive;

    ParseResult result;
    if (buffer.size() - at < length) {
        result.headers_done = true;
        return result;
    }
    request.body = std::string(buffer.substr(at, static_cast<std::size_t>(length)));
    result.status = ParseStatus::complete;
    result.consumed = at + static_cast<std::size_t>(length);
    result.request = std::move(request);
    return result;
}

std::string_view reason_phrase(int status) {
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 302: return "Found";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

std::string format_head(const Response& response, bool keep_alive) {
    std::string out = "HTTP/1.1 " + std::to_string(response.status) + ' ' +
                      std::string(response.reason.empty() ? reason_phrase(response.status) : response.reason) + "\r\n";
    for (const auto& header : response.headers) out += header.first + ": " + header.second + "\r\n";
    const std::uint64_t length = response.body_stream ? response.body_stream_size : response.body.size();
    out += "Content-Length: " + std::to_string(length) + "\r\n";
    out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    return out;
}

std::string format(const Response& response, bool keep_alive, bool head_only) {
    std::string out = format_head(response, keep_alive);
    if (head_only) return out;
    if (!response.body_stream) return out + response.body;
    const std::size_t head = out.size();
    out.resize(head + static_cast<std::size_t>(response.body_stream_size));
    for (std::size_t at = head; at < out.size();) {
        const std::size_t got = response.body_stream(&out[at], out.size() - at);
        if (got == 0) throw std::runtime_error("response body ended before its " +
                                               std::to_string(response.body_stream_size) + " bytes");
        at += got;
    }
    return out;
}

ResponseParse parse_response(std::string_view buffer, const Limits& limits) {
    ResponseParse result;
    auto error = [&](std::string reason) {
        result.status = ParseStatus::error;
        result.error_reason = std::move(reason);
        return result;
    };
    std::size_t at = 0;
    std::string_view line;
    const Line state = next_line(buffer, at, line);
    if (state == Line::bare_cr) return error("bare CR in the status line");
    if (state == Line::incomplete) return buffer.size() > limits.max_header_bytes ? error("status line too long") : result;
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[7] < '0' || line[7] > '9' || line[8] != ' ')
        return error("malformed status line '" + printable(line) + "'");
    int status = 0;
    for (std::size_t i = 9; i < 12; ++i) {
        const char c = line[i];
        if (c < '0' || c > '9') return error("malformed status code in '" + printable(line) + "'");
        status = status * 10 + (c - '0');
    }
    if (line.size() > 12 && line[12] != ' ') return error("malformed status line '" + printable(line) + "'");
    HeaderBlock block;
    std::string reason;
    const int code = parse_headers(buffer, at, limits, block, reason);
    if (code > 0) return error(reason);
    if (code < 0) return buffer.size() > limits.max_header_bytes ? error("response headers too long") : result;
    if (block.has_transfer_encoding) return error("chunked responses are not supported");
    if (!block.content_length && status != 204 && status != 304) return error("response without Content-Length");
    const std::uint64_t length = block.content_length.value_or(0);
    if (length > limits.max_body) return error("response body too large");
    if (buffer.size() - at < length) return result;
    result.status = ParseStatus::complete;
    result.consumed = at + static_cast<std::size_t>(length);
    result.response.status = status;
    result.response.reason = std::string(line.size() > 13 ? line.substr(13) : std::string_view());
    result.response.headers = std::move(block.headers);
    result.response.body = std::string(buffer.substr(at, static_cast<std::size_t>(length)));
    return result;
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space, bool allow_slash) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '+' && plus_is_space) {
            out += ' ';
        } else if (text[i] == '%') {
            if (i + 2 >= text.size()) return std::nullopt;
            const int high = hex(text[i + 1]), low = hex(text[i + 2]);
            if (high < 0 || low < 0) return std::nullopt;
            const char c = static_cast<char>(high * 16 + low);
            if (c == '\0' || (c == '/' && !allow_slash)) return std::nullopt;
            out += c;
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query) {
    std::vector<std::pair<std::string, std::string>> pairs;
    while (!query.empty()) {
        const std::size_t amp = query.find('&');
        const std::string_view part = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (part.empty()) continue;
        const std::size_t eq = part.find('=');
        auto key = percent_decode(part.substr(0, eq), true);
        auto value = percent_decode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1), true);
        if (!key || !value) return std::nullopt;
        pairs.emplace_back(std::move(*key), std::move(*value));
    }
    return pairs;
}

std::optional<std::string> normalize_path(std::string_view decoded) {
    if (decoded.empty() || decoded.front() != '/') return std::nullopt;
    std::vector<std::string_view> segments;
    std::size_t at = 1;
    bool trailing_slash = false;
    while (at <= decoded.size()) {
        const std::size_t slash = std::min(decoded.find('/', at), decoded.size());
        const std::string_view segment = decoded.substr(at, slash - at);
        trailing_slash = slash == decoded.size() ? segment.empty() || segment == "." || segment == ".." : false;
        if (segment == "..") {
            if (segments.empty()) return std::nullopt;
            segments.pop_back();
        } else if (!segment.empty() && segment != ".") {
            segments.push_back(segment);
        }
        at = slash + 1;
    }
    std::string out;
    for (std::string_view segment : segments) out += '/' + std::string(segment);
    if (out.empty() || trailing_slash) out += '/';
    return out;
}

}  // namespace demo::http
