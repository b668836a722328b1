// libFuzzer target: the demo's HTTP parsers (examples/demo/http.hpp): the incremental request parser,
// the response parser, and the URL helpers the server applies to request targets.
// Invariants checked besides "no crash, no UB, no leak":
//   - `consumed` never exceeds the input, and a complete request re-parses to the same from its own bytes;
//   - a request complete in the first half of the input is the same request in the whole input;
//   - normalize_path never returns a path that leaves the root or contains "/../" or "//";
//   - a complete request's head has no bare CR (one not followed by LF) and at most one Host line.
#include "http.hpp"

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace http = demo::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    http::Limits limits;
    limits.max_body = 4096;  // small enough that the fuzzer reaches the limit paths

    const http::ParseResult whole = http::parse_request(input, limits);
    if (whole.consumed > input.size()) std::abort();
    if (whole.status == http::ParseStatus::complete) {
        if (whole.consumed == 0) std::abort();
        const http::ParseResult again = http::parse_request(input.substr(0, whole.consumed), limits);
        if (again.status != http::ParseStatus::complete || again.consumed != whole.consumed) std::abort();
        if (again.request.method != whole.request.method || again.request.target != whole.request.target ||
            again.request.body != whole.request.body)
            std::abort();
        // The server's handling of the target: decode, normalise.
        if (auto decoded = http::percent_decode(whole.request.path, false, false)) {
            if (auto path = http::normalize_path(*decoded)) {
                if (path->empty() || path->front() != '/') std::abort();
                if (path->find("/../") != std::string::npos || path->find("//") != std::string::npos) std::abort();
                if (path->size() >= 3 && path->compare(path->size() - 3, 3, "/..") == 0) std::abort();
            }
        }
        http::parse_query(whole.request.query);
        whole.request.header("host");
        const std::string_view head = input.substr(0, whole.consumed - whole.request.body.size());
        for (std::size_t at = head.find('\r'); at != std::string_view::npos; at = head.find('\r', at + 1))
            if (at + 1 >= head.size() || head[at + 1] != '\n') std::abort();
        int hosts = 0;
        for (const auto& header : whole.request.headers) {
            std::string name = header.first;
            for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (name == "host") ++hosts;
        }
        if (hosts > 1) std::abort();
    }
    // The first half is the same request still arriving: if it is already complete, more bytes after
    // it (a pipelined request) cannot change it.
    if (size > 1) {
        const http::ParseResult half = http::parse_request(input.substr(0, size / 2), limits);
        if (half.consumed > size / 2) std::abort();
        if (half.status == http::ParseStatus::complete &&
            (whole.status != http::ParseStatus::complete || whole.consumed != half.consumed))
            std::abort();
    }

    const http::ResponseParse response = http::parse_response(input, limits);
    if (response.consumed > input.size()) std::abort();
    http::percent_decode(input, true);
    return 0;
}
