// The HTTP parser on its own: bytes in, a request or a status code out.
#include "http.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>

using demo::http::ParseStatus;
using demo::http::parse_request;

TEST_CASE("a complete GET is parsed, and a pipelined second request is left for later") {
    const std::string two = "GET /send?x=1 HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n";
    const auto first = parse_request(two);
    REQUIRE(first.status == ParseStatus::complete);
    CHECK(first.request.method == "GET");
    CHECK(first.request.path == "/send");
    CHECK(first.request.query == "x=1");
    CHECK(first.request.keep_alive);
    const auto second = parse_request(std::string_view(two).substr(first.consumed));
    REQUIRE(second.status == ParseStatus::complete);
    CHECK(second.request.path == "/b");
}

TEST_CASE("every prefix of a valid request is incomplete, never an error") {
    const std::string request = "POST /send HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
    for (std::size_t n = 0; n < request.size(); ++n) CHECK(parse_request(request.substr(0, n)).status == ParseStatus::incomplete);
    const auto done = parse_request(request);
    REQUIRE(done.status == ParseStatus::complete);
    CHECK(done.request.body == "hello");
}

TEST_CASE("keep-alive follows the version and the Connection header") {
    CHECK_FALSE(parse_request("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").request.keep_alive);
    CHECK_FALSE(parse_request("GET / HTTP/1.0\r\n\r\n").request.keep_alive);
    CHECK(parse_request("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").request.keep_alive);
}

TEST_CASE("malformed requests get the right status") {
    struct Case {
        std::string bytes;
        int status;
    };
    const Case cases[] = {
        {"GARBAGE\r\n\r\n", 400},
        {"GET /a HTTP/1.1 extra\r\nHost: a\r\n\r\n", 400},
        {"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET a HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
        {"GET / HTTX/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n\r\n", 400},  // no Host
        {"GET / HTTP/1.1\r\nHost: a\r\nNo colon\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01" "b\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},  // RFC 9112 3.2: more than one Host
        {"GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400},  // even the same one, in any case
        {"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},  // not a host[:port]
        {"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
    };
    for (const Case& c : cases) {
        CAPTURE(c.bytes);
        const auto result = parse_request(c.bytes);
        CHECK(result.status == ParseStatus::error);
        CHECK(result.error_status == c.status);
        CHECK_FALSE(result.error_reason.empty());
    }
}

TEST_CASE("size limits fail as soon as they are passed, before the request ends") {
    demo::http::Limits limits;
    limits.max_header_bytes = 1024;
    limits.max_headers = 10;
    CHECK(parse_request("GET /" + std::string(2000, 'a'), limits).error_status == 414);
    CHECK(parse_request("GET /" + std::string(2000, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", limits).error_status == 414);
    CHECK(parse_request("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(2000, 'a'), limits).error_status == 431);
    std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
    for (int i = 0; i < 11; ++i) many += "X" + std::to_string(i) + ": y\r\n";
    CHECK(parse_request(many + "\r\n", limits).error_status == 431);
    CHECK(parse_request("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(900, 'a'), limits).status == ParseStatus::incomplete);
}

TEST_CASE("a body waits for Content-Length bytes and says the headers are done") {
    const auto partial = parse_request("POST /send HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
    CHECK(partial.status == ParseStatus::incomplete);
    CHECK(partial.headers_done);
}

TEST_CASE("percent decoding and Tomcat's path normalisation") {
    using demo::http::normalize_path;
    using demo::http::percent_decode;
    CHECK(percent_decode("/a%20b", false) == std::optional<std::string>("/a b"));
    CHECK_FALSE(percent_decode("/a%2", false));
    CHECK_FALSE(percent_decode("/a%zz", false));
    CHECK_FALSE(percent_decode("/a%00", false));
    CHECK_FALSE(percent_decode("/a%2Fb", false, false));
    CHECK(normalize_path("/a/../b") == std::optional<std::string>("/b"));
    CHECK(normalize_path("//a/./b/") == std::optional<std::string>("/a/b/"));
    CHECK(normalize_path("/a/..") == std::optional<std::string>("/"));
    CHECK_FALSE(normalize_path("/../etc/passwd"));
    CHECK_FALSE(normalize_path("/a/../../b"));
    CHECK_FALSE(normalize_path("a"));
    const auto query = demo::http::parse_query("pattern=Http11Processor%3A%3Aservice&cost=10&&x");
    REQUIRE(query);
    REQUIRE(query->size() == 3);
    CHECK((*query)[0].second == "Http11Processor::service");
    CHECK((*query)[2].first == "x");
    CHECK_FALSE(demo::http::parse_query("a=%G0"));
}

TEST_CASE("responses round-trip through format and parse_response") {
    demo::http::Response response;
    response.status = 404;
    response.body = "nope";
    const std::string bytes = demo::http::format(response, true);
    const auto parsed = demo::http::parse_response(bytes);
    REQUIRE(parsed.status == ParseStatus::complete);
    CHECK(parsed.response.status == 404);
    CHECK(parsed.response.body == "nope");
    CHECK(parsed.consumed == bytes.size());
    CHECK(demo::http::parse_response("HTTP/1.1 200 OK\r\n\r\n").status == ParseStatus::error);  // no length
    CHECK(demo::http::parse_response("HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n").status == ParseStatus::error);
}

TEST_CASE("Host: one, optional in HTTP/1.0, host[:port] or [IPv6]:port") {
    CHECK(parse_request("GET / HTTP/1.1\r\nHost: 127.0.0.1:7744\r\n\r\n").status == ParseStatus::complete);
    CHECK(parse_request("GET / HTTP/1.1\r\nHost: [::1]:7744\r\n\r\n").status == ParseStatus::complete);
    CHECK(parse_request("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n").status == ParseStatus::complete);
    CHECK(parse_request("GET / HTTP/1.1\r\nHost:\r\n\r\n").status == ParseStatus::complete);  // empty: allowed
    CHECK(parse_request("GET / HTTP/1.0\r\n\r\n").status == ParseStatus::complete);
    const auto two = parse_request("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
    CHECK(two.error_reason.find("more than one Host") != std::string::npos);
}

TEST_CASE("a bare CR in the head is a 400 as soon as it is seen, not after the read timeout") {
    // Each is an error before the request could end: nothing more the client sends can make it valid.
    const char* const bare[] = {
        "GET / HTTP/1.1\rHost: a\r\r",        // CR-only line endings
        "GET / HTTP/1.1\r",                     // (incomplete: the LF may follow) ...
        "GET / HTTP/1.1\rH",                    // ... but not once another byte came instead
        "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n\r\r\n",  // the blank line ending the head
        "GET /a\rb HTTP/1.1\r\nHost: a\r\n\r\n",
        "\r\rGET / HTTP/1.1\r\nHost: a\r\n\r\n",  // the empty lines allowed before a request
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb",    // in a header line that has not ended
    };
    for (const char* bytes : bare) {
        CAPTURE(bytes);
        const auto result = parse_request(bytes);
        if (std::string_view(bytes) == "GET / HTTP/1.1\r") {
            CHECK(result.status == ParseStatus::incomplete);
            continue;
        }
        CHECK(result.status == ParseStatus::error);
        CHECK(result.error_status == 400);
        CHECK(result.error_reason.find("bare CR") != std::string::npos);
    }
    // Lines ending in LF alone are accepted (RFC 9112 2.2 allows it), CR inside the body is just data.
    CHECK(parse_request("GET / HTTP/1.1\nHost: a\n\n").status == ParseStatus::complete);
    CHECK(parse_request("\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n").status == ParseStatus::complete);
    const auto body = parse_request("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\na\rb");
    REQUIRE(body.status == ParseStatus::complete);
    CHECK(body.request.body == "a\rb");
    CHECK(demo::http::parse_response("HTTP/1.1 200 OK\rContent-Length: 0\r\n\r\n").status == ParseStatus::error);
}

TEST_CASE("a streamed body: Content-Length from its size, read whole by format(), left out for HEAD") {
    demo::http::Response response;
    std::string source(100000, 'x');
    for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<char>('a' + i % 26);
    std::size_t at = 0;
    response.body_stream = [&](char* out, std::size_t max) {
        const std::size_t count = std::min<std::size_t>({max, source.size() - at, 777});  // short reads
        std::copy_n(source.data() + at, count, out);
        at += count;
        return count;
    };
    response.body_stream_size = source.size();
    const std::string head = demo::http::format_head(response, true);
    CHECK(head.find("Content-Length: 100000\r\n") != std::string::npos);
    CHECK(demo::http::format(response, false, true).find("Content-Length: 100000\r\n") != std::string::npos);
    CHECK(at == 0);  // HEAD: not read
    const auto parsed = demo::http::parse_response(demo::http::format(response, true));
    REQUIRE(parsed.status == ParseStatus::complete);
    CHECK(parsed.response.body == source);
    response.body_stream_size = source.size() + 1;  // a stream shorter than it said
    at = 0;
    CHECK_THROWS_AS(demo::http::format(response, true), std::runtime_error);
}
