// HTTP/1.1 messages for the demo: an incremental request parser, a response parser for the client
// side, URL helpers and response formatting. Pure code over bytes: no sockets, no tracing.
// Parsing never throws: malformed input gives ParseStatus::error with the status code to answer.
#ifndef DEMO_HTTP_HPP
#define DEMO_HTTP_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace demo::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

// Tomcat's defaults where it has one (maxHttpHeaderSize 8 KiB covers the request line and headers).
struct Limits {
    std::size_t max_header_bytes = 8192;  // request line + headers + blank line
    std::size_t max_headers = 100;
    std::size_t max_body = 1u << 20;
};

struct Request {
    std::string method;
    std::string target;  // as sent: path and query, not decoded
    std::string path;    // the part before '?', not decoded
    std::string query;   // the part after '?', not decoded
    int minor_version = 1;  // HTTP/1.x
    Headers headers;     // names as sent; look them up with header()
    std::string body;
    bool keep_alive = true;
    const std::string* header(std::string_view name) const;  // case-insensitive; first one wins
};

enum class ParseStatus { complete, incomplete, error };

struct ParseResult {
    ParseStatus status = ParseStatus::incomplete;
    std::size_t consumed = 0;  // complete: bytes of this request (a pipelined next one may follow)
    int error_status = 0;      // error: 400, 413, 414, 431, 501 or 505
    std::string error_reason;  // error: one line for the response body
    Request request;           // complete
    bool headers_done = false; // incomplete: the headers are in, the body is not
};

// Parses the request at the start of `buffer`. Incomplete until the whole body has arrived; an error as
// soon as the bytes seen so far cannot start a valid request (so huge headers fail before they end).
ParseResult parse_request(std::string_view buffer, const Limits& limits = {});

struct Response {
    int status = 200;
    std::string reason;  // empty: the standard phrase
    Headers headers;     // Content-Length and Connection are added by format()
    std::string body;
    // A body too large to hold whole (a static file), read as the client takes it, in place of `body`:
    // body_stream(out, max) fills up to `max` bytes and returns how many, 0 only at the end, and
    // throws on failure. A copy of the Response shares the stream.
    std::function<std::size_t(char* out, std::size_t max)> body_stream;
    std::uint64_t body_stream_size = 0;  // the Content-Length when body_stream is set
};
// The status line and headers, with Content-Length and Connection.
std::string format_head(const Response& response, bool keep_alive);
// The head and the body; a body_stream is read to its end (std::runtime_error when it ends short).
std::string format(const Response& response, bool keep_alive, bool head_only = false);
std::string_view reason_phrase(int status);

struct ResponseParse {
    ParseStatus status = ParseStatus::incomplete;
    std::size_t consumed = 0;
    std::string error_reason;
    Response response;
};
// Responses with a Content-Length (all this demo sends and expects); others are an error.
ResponseParse parse_response(std::string_view buffer, const Limits& limits = {});

// %XX decoding. Nothing when an escape is malformed, or decodes to NUL (or to '/' when !allow_slash:
// Tomcat's ALLOW_ENCODED_SLASH is off by default).
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space, bool allow_slash = true);
// "a=1&b=two" -> pairs, decoded; nothing when an escape is malformed.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view query);
// Tomcat's URI normalisation: "//" -> "/", "/./" -> "/", "/a/../" -> "/"; nothing when ".." climbs
// above the root, or the path does not start with '/'.
std::optional<std::string> normalize_path(std::string_view decoded);

}  // namespace demo::http

#endif
