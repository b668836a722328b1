// W3C Trace Context (include/tracetree/otel/tracecontext.hpp): the spec's validation rules, the headers a
// server reads and a client sends, and the context landing in what the sessions capture.
#include <tracetree/control.hpp>
#include <tracetree/sessions.hpp>
#include <tracetree/otel/tracecontext.hpp>
#include <tracetree/tracetree.hpp>

#include <doctest/doctest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

const std::string kTraceId = "12345678901234567890123456789012";
const std::string kValid = "00-12345678901234567890123456789012-1234567890123456-01";

std::string field(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& key) {
    for (const auto& f : fields)
        if (f.first == key) return f.second;
    return "<none>";
}

bool parses(const std::string& value) { return tracetree::parse_traceparent(value).has_value(); }

void served_request() { TRACETREE_FUNCTION(); }

void throwing_call() {
    TRACETREE_FUNCTION();
    tracetree::OutgoingCall call("POST /fails");
    throw std::runtime_error("unreachable");
}

}  // namespace

TEST_CASE("traceparent: valid values, and OWS around them") {
    const auto parsed = tracetree::parse_traceparent(kValid);
    REQUIRE(parsed);
    CHECK(parsed->trace_id.hex() == kTraceId);
    CHECK(parsed->parent_id.hex() == "1234567890123456");
    CHECK(parsed->flags == 1);
    CHECK(parsed->to_string() == kValid);
    CHECK(parses(" " + kValid));
    CHECK(parses("\t" + kValid));
    CHECK(parses(kValid + " "));
    CHECK(parses("\t " + kValid + " \t"));
    CHECK(tracetree::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->flags == 0);
}

TEST_CASE("traceparent: the spec's invalid values are ignored") {
    const char* const invalid[] = {
        "",
        "00",
        "00-12345678901234567890123456789012-1234567890123456-01.",                           // version 00, extra
        "00-12345678901234567890123456789012-1234567890123456-01-what-the-future-will-be-like",  // version 00, extra field
        "ff-12345678901234567890123456789012-1234567890123456-01",                            // version ff
        ".0-12345678901234567890123456789012-1234567890123456-01",                            // version characters
        "0.-12345678901234567890123456789012-1234567890123456-01",
        "000-12345678901234567890123456789012-1234567890123456-01",                           // version too long
        "0000-12345678901234567890123456789012-1234567890123456-01",
        "0-12345678901234567890123456789012-1234567890123456-01",                             // version too short
        "0A-12345678901234567890123456789012-1234567890123456-01",                            // uppercase version
        "00-00000000000000000000000000000000-1234567890123456-01",                            // trace id all zero
        "00-.2345678901234567890123456789012-1234567890123456-01",                            // trace id characters
        "00-1234567890123456789012345678901.-1234567890123456-01",
        "00-1234567890123456789012345678901A-1234567890123456-01",                            // uppercase hex
        "00-123456789012345678901234567890123-1234567890123456-01",                           // trace id too long
        "00-1234567890123456789012345678901-1234567890123456-01",                             // trace id too short
        "00-12345678901234567890123456789012-0000000000000000-01",                            // parent id all zero
        "00-12345678901234567890123456789012-.234567890123456-01",                            // parent id characters
        "00-12345678901234567890123456789012-123456789012345.-01",
        "00-12345678901234567890123456789012-12345678901234567-01",                           // parent id too long
        "00-12345678901234567890123456789012-123456789012345-01",                             // parent id too short
        "00-12345678901234567890123456789012-1234567890123456-.0",                            // flags characters
        "00-12345678901234567890123456789012-1234567890123456-0.",
        "00-12345678901234567890123456789012-1234567890123456-001",                           // flags too long
        "00-12345678901234567890123456789012-1234567890123456-1",                             // flags too short
        "00-12345678901234567890123456789012-1234567890123456-0F",                            // uppercase flags
        "00_12345678901234567890123456789012-1234567890123456-01",                            // wrong delimiters
        "00-12345678901234567890123456789012_1234567890123456-01",
        "00-12345678901234567890123456789012-1234567890123456_01",
        "00-12345678901234567890123456789012-1234567890123456-01\r",                          // CR is not OWS
        "cc-12345678901234567890123456789012-1234567890123456-01.what-the-future-will-be-like",  // future, no dash
        "cc-12345678901234567890123456789012-1234567890123456",                               // future, too short
    };
    for (const char* value : invalid) {
        CAPTURE(value);
        CHECK_FALSE(parses(value));
    }
    CHECK_FALSE(parses(std::string("00-12345678901234567890123456789012-1234567890123456-01").insert(10, 1, '\0')));
}

TEST_CASE("traceparent: a future version is read as far as the spec says") {
    for (const char* value : {"cc-12345678901234567890123456789012-1234567890123456-01",
                              "cc-12345678901234567890123456789012-1234567890123456-01-what-the-future-will-be-like",
                              "01-12345678901234567890123456789012-1234567890123456-03-"}) {
        CAPTURE(value);
        const auto parsed = tracetree::parse_traceparent(value);
        REQUIRE(parsed);
        CHECK(parsed->trace_id.hex() == kTraceId);
        // Written back as version 00, the unknown flag (0x02) cleared.
        CHECK(parsed->to_string().substr(0, 3) == "00-");
        CHECK(parsed->to_string().substr(53) == "01");
    }
}

TEST_CASE("tracestate: grammar, OWS, empty members and the canonical list") {
    CHECK(tracetree::parse_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE") ==
          std::string("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
    CHECK(tracetree::parse_tracestate("foo=1 \t , \t bar=2, \t baz=3") == std::string("foo=1,bar=2,baz=3"));
    CHECK(tracetree::parse_tracestate("\t foo=1 \t") == std::string("foo=1"));
    CHECK(tracetree::parse_tracestate("") == std::string());
    CHECK(tracetree::parse_tracestate(" , ,") == std::string());
    CHECK(tracetree::parse_tracestate("foo=1,,bar=2") == std::string("foo=1,bar=2"));
    CHECK(tracetree::parse_tracestate("foo= leading space") == std::string("foo= leading space"));
    std::string all_value;
    for (int c = 0x20; c <= 0x7E; ++c)
        if (c != ',' && c != '=') all_value += static_cast<char>(c);
    const std::string simple = "abcdefghijklmnopqrstuvwxyz0123456789_-*/";
    CHECK(tracetree::parse_tracestate(simple + "=" + all_value) == simple + "=" + all_value);
    CHECK(tracetree::parse_tracestate(simple + "@a-z0-9_-*/=" + all_value));
    // The key grammar since 2020: (lcalpha / DIGIT) 0*255(keychar), '@' a keychar like the others.
    for (const char* key : {"0tenant@vendor", "0foo", "foo@", "foo@@bar", "foo@bar@baz", "foo@0vendor", "9"}) {
        CAPTURE(key);
        CHECK(tracetree::parse_tracestate(std::string(key) + "=1,bar=2") == std::string(key) + "=1,bar=2");
    }
    // A repeated key is passed on once, the first one; the list is not discarded.
    CHECK(tracetree::parse_tracestate("foo=1,foo=1") == std::string("foo=1"));
    CHECK(tracetree::parse_tracestate("foo=1,bar=2,foo=3") == std::string("foo=1,bar=2"));

    const char* const invalid[] = {
        "foo =1", "FOO=1", "foo.bar=1", "@foo=1,bar=2", "_foo=1", "foo=bar=baz", "foo=,bar=3", "foo", "foo=1\tx",
        "foo=\x7f", "foo=caf\xc3\xa9", "=1",
    };
    for (const char* value : invalid) {
        CAPTURE(value);
        CHECK_FALSE(tracetree::parse_tracestate(value));
    }
}

TEST_CASE("tracestate: the spec's limits") {
    std::string members;
    for (int i = 1; i <= 32; ++i) members += (i == 1 ? "" : ",") + std::string("bar") + std::to_string(100 + i) + "=1";
    CHECK(tracetree::parse_tracestate(members));
    CHECK_FALSE(tracetree::parse_tracestate(members + ",bar33=1"));
    CHECK_FALSE(tracetree::parse_tracestate(members + ",bar101=2"));  // 33 received, one of them repeated
    // Keys: 256 characters wherever the '@' is; one more is invalid.
    CHECK(tracetree::parse_tracestate("foo=1," + std::string(256, 'z') + "=1"));
    CHECK_FALSE(tracetree::parse_tracestate("foo=1," + std::string(257, 'z') + "=1"));
    CHECK(tracetree::parse_tracestate("foo=1," + std::string(241, 't') + "@" + std::string(14, 'v') + "=1"));
    CHECK(tracetree::parse_tracestate("foo=1," + std::string(242, 't') + "@v=1"));
    CHECK(tracetree::parse_tracestate("foo=1,t@" + std::string(15, 'v') + "=1"));
    CHECK_FALSE(tracetree::parse_tracestate("foo=1,t@" + std::string(255, 'v') + "=1"));
    // Values: 256 characters.
    CHECK(tracetree::parse_tracestate("foo=" + std::string(256, 'x')));
    CHECK_FALSE(tracetree::parse_tracestate("foo=" + std::string(257, 'x')));
}

TEST_CASE("tracestate: longer than 512 characters, cut by whole members, long ones first") {
    const std::string long_member = "big=" + std::string(200, 'x');  // over 128 characters
    std::string list = "a=" + std::string(100, '1') + "," + long_member;
    for (int i = 0; i < 5; ++i) list += ",k" + std::to_string(i) + "=" + std::string(90, 'v');
    const auto cut = tracetree::parse_tracestate(list);
    REQUIRE(cut);
    CHECK(cut->size() <= tracetree::kMaxTracestateLength);
    CHECK(cut->find("big=") == std::string::npos);
    CHECK(cut->rfind("a=", 0) == 0);  // the first member stays
    CHECK(cut->back() != ',');
    // Under the limit nothing is cut.
    CHECK(tracetree::parse_tracestate(long_member) == long_member);
}

TEST_CASE("tracestate: exactly 512 characters is not cut, 513 is") {
    std::string list;
    for (const char key : {'a', 'b', 'c', 'd', 'e'}) list += std::string(1, key) + "=" + std::string(98, 'v') + ",";  // 101 each
    list += "f=" + std::string(5, 'w');
    REQUIRE(list.size() == 512);
    CHECK(tracetree::parse_tracestate(list) == list);
    const auto cut = tracetree::parse_tracestate(list + "w");
    REQUIRE(cut);
    CHECK(cut->size() < 512);
}

TEST_CASE("tracestate: the cut's 128-character boundary: 128 stays, 129 goes") {
    const std::string over = "a=" + std::string(127, 'x');   // 129 characters
    const std::string at = "e=" + std::string(126, 'z');     // 128 characters: not a long member
    std::string middle;
    for (const char key : {'b', 'c', 'd'}) middle += std::string(1, key) + "=" + std::string(98, 'y') + ",";  // 100 each
    // 561 characters; the cut looks at the members from the end, so it meets the 128 one first.
    const auto cut = tracetree::parse_tracestate(over + "," + middle + at);
    REQUIRE(cut);
    CHECK(*cut == middle + at);
}

TEST_CASE("ContextHeaders: casing, repeated headers, a tracestate without traceparent") {
    const auto context = [](const Headers& headers) { return tracetree::context_from_headers(headers); };
    for (const char* name : {"traceparent", "TraceParent", "TrAcEpArEnT", "TRACEPARENT"}) {
        const tracetree::TraceContext c = context({{name, kValid}});
        CHECK(c.trace_id.hex() == kTraceId);
        CHECK(c.parent_span_id.hex() == "1234567890123456");
        CHECK(c.span_id.valid());
        CHECK(c.span_id != c.parent_span_id);
        CHECK(c.sampled());
    }
    for (const char* name : {"trace-parent", "trace.parent", "traceparent2"})
        CHECK(context({{name, kValid}}).trace_id.hex() != kTraceId);
    // Two traceparent headers: invalid, even when they agree.
    CHECK(context({{"traceparent", kValid}, {"traceparent", kValid}}).trace_id.hex() != kTraceId);
    // No traceparent: a new trace, the tracestate dropped.
    const tracetree::TraceContext fresh = context({{"tracestate", "foo=1,bar=2"}});
    CHECK(fresh.trace_id.valid());
    CHECK_FALSE(fresh.has_parent());
    CHECK(fresh.tracestate.empty());
    CHECK_FALSE(fresh.sampled());
    CHECK(tracetree::context_from_headers(Headers{}, true).sampled());
    // Several tracestate headers are one list, in order; an empty one adds nothing.
    CHECK(context({{"traceparent", kValid}, {"tracestate", "foo=1,bar=2"}, {"TraceState", "rojo=1,congo=2"}, {"tracestate", "baz=3"}})
              .tracestate == "foo=1,bar=2,rojo=1,congo=2,baz=3");
    CHECK(context({{"traceparent", kValid}, {"tracestate", ""}, {"tracestate", "foo=1"}}).tracestate == "foo=1");
    CHECK(context({{"traceparent", kValid}, {"tracestate", "foo=1"}, {"tracestate", "foo=2"}}).tracestate == "foo=1");
    CHECK(context({{"traceparent", kValid}, {"trace-state", "foo=1"}}).tracestate.empty());
    // A bad tracestate does not affect the traceparent.
    CHECK(context({{"traceparent", kValid}, {"tracestate", "FOO=1"}}).trace_id.hex() == kTraceId);
    // A flood of tracestate headers stays bounded and invalid.
    tracetree::ContextHeaders flood;
    flood.add("traceparent", kValid);
    for (int i = 0; i < 100000; ++i) flood.add("tracestate", "k" + std::to_string(i) + "=1");
    CHECK(flood.context().tracestate.empty());
    tracetree::ContextHeaders padded;  // valid by the grammar, but over the bound: discarded
    padded.add("traceparent", kValid);
    padded.add("tracestate", "foo=1" + std::string(70000, ' ') + ",bar=2");
    padded.add("tracestate", "baz=3");
    CHECK(padded.context().tracestate.empty());
}

TEST_CASE("ids: random ones differ and are never zero") {
    std::set<std::string> seen;
    for (int i = 0; i < 1000; ++i) {
        const tracetree::SpanId id = tracetree::SpanId::random();
        CHECK(id.valid());
        seen.insert(id.hex());
    }
    CHECK(seen.size() == 1000);
    // Each thread seeds its own generator: two threads do not repeat each other.
    std::string a, b;
    std::thread([&] { a = tracetree::TraceId::random().hex(); }).join();
    std::thread([&] { b = tracetree::TraceId::random().hex(); }).join();
    CHECK(a != b);
    CHECK_FALSE(tracetree::SpanId::from_hex("00F067AA0BA902B7"));
    CHECK(tracetree::SpanId::from_hex("00f067aa0ba902b7")->hex() == "00f067aa0ba902b7");
}

TEST_CASE("adopt: the context lands in the traces the sessions capture, until the next one") {
    tracetree::clear_annotations();
    const tracetree::TraceContext incoming = tracetree::context_from_headers(
        Headers{{"traceparent", kValid}, {"tracestate", "congo=t61rcWkgMzE"}});
    tracetree::TraceSession trace(tracetree::TraceRequest("served_request").limit(2));
    tracetree::StackSession stack(tracetree::StackRequest("served_request"));
    tracetree::WatchSession watch(tracetree::WatchRequest("served_request"));
    tracetree::FlightRecorder recorder(tracetree::RecorderRequest("served_request"));
    tracetree::adopt(incoming);
    REQUIRE(tracetree::current_context() != nullptr);
    CHECK(tracetree::current_context()->span_id == incoming.span_id);
    served_request();
    tracetree::adopt(tracetree::new_trace());  // the next request, without headers
    served_request();
    const std::vector<tracetree::Trace> traces = trace.collect(std::chrono::seconds(5));
    REQUIRE(traces.size() == 2);
    CHECK(field(traces[0].fields, "trace_id") == kTraceId);
    CHECK(field(traces[0].fields, "span_id") == incoming.span_id.hex());
    CHECK(field(traces[0].fields, "parent_span_id") == "1234567890123456");
    CHECK(field(traces[0].fields, "trace_flags") == "01");
    CHECK(field(traces[0].fields, "tracestate") == "congo=t61rcWkgMzE");
    CHECK(field(traces[1].fields, "trace_id") != kTraceId);
    CHECK(field(traces[1].fields, "parent_span_id") == "<none>");
    CHECK(field(traces[1].fields, "tracestate") == "<none>");
    CHECK(field(traces[1].fields, "trace_flags") == "00");
    const auto frames = stack.next(std::chrono::seconds(5));
    REQUIRE(frames);
    CHECK(field(frames->fields, "trace_id") == kTraceId);
    const auto event = watch.next(std::chrono::seconds(5));
    REQUIRE(event);
    CHECK(field(event->fields, "parent_span_id") == "1234567890123456");
    const std::vector<tracetree::Trace> kept = recorder.recent();
    REQUIRE(kept.size() == 2);
    CHECK(field(kept[0].fields, "trace_id") == kTraceId);
    CHECK(field(kept[0].fields, "parent_span_id") == "1234567890123456");
    tracetree::leave_context();
    CHECK(tracetree::current_context() == nullptr);
    served_request();  // nothing adopted: nothing annotated
}

TEST_CASE("OutgoingCall: a child of the adopted context, recorded as a client span") {
    tracetree::clear_annotations();
    tracetree::TraceContext incoming =
        tracetree::context_from_headers(Headers{{"traceparent", kValid}, {"tracestate", "rojo=00f067aa0ba902b7"}});
    tracetree::adopt(incoming);
    std::set<std::string> parents;
    for (int i = 0; i < 3; ++i) {
        tracetree::OutgoingCall call("POST /pay,now");
        const auto parsed = tracetree::parse_traceparent(call.traceparent());
        REQUIRE(parsed);
        CHECK(parsed->trace_id.hex() == kTraceId);
        CHECK(parsed->parent_id == call.span_id());
        CHECK(parsed->parent_id != incoming.span_id);
        CHECK(parsed->parent_id.hex() != "1234567890123456");
        CHECK(parsed->flags == 1);
        CHECK(call.tracestate() == "rojo=00f067aa0ba902b7");
        CHECK(call.headers().size() == 2);
        CHECK(call.headers()[0].first == "traceparent");
        parents.insert(parsed->parent_id.hex());
        if (i == 2) call.fail();
    }
    CHECK(parents.size() == 3);
    CHECK_THROWS(throwing_call());

    tracetree::TraceSession trace(tracetree::TraceRequest("served_request"));
    served_request();
    const auto captured = trace.next(std::chrono::seconds(5));
    REQUIRE(captured);
    const std::vector<tracetree::ClientSpan> spans = tracetree::parse_client_spans(field(captured->fields, "client_spans"));
    REQUIRE(spans.size() == 4);
    CHECK(parents.count(spans[0].span_id.hex()) == 1);
    CHECK(spans[0].name == "POST /pay now");  // ',' would end the entry
    CHECK_FALSE(spans[0].error);
    CHECK(spans[2].error);  // fail()
    CHECK(spans[3].error);  // left by an exception
    CHECK(spans[3].name == "POST /fails");
    CHECK(spans[0].start_unix_ns > 0);

    // The next request starts without the last one's client spans; calls past the bound go unrecorded.
    tracetree::adopt(incoming);
    for (std::size_t i = 0; i < tracetree::kMaxClientSpans + 3; ++i) tracetree::OutgoingCall call;
    tracetree::TraceSession again(tracetree::TraceRequest("served_request"));
    served_request();
    const auto second = again.next(std::chrono::seconds(5));
    REQUIRE(second);
    CHECK(tracetree::parse_client_spans(field(second->fields, "client_spans")).size() == tracetree::kMaxClientSpans);
    tracetree::leave_context();

    // Without a context: a new trace per call, nothing recorded.
    tracetree::OutgoingCall lone;
    CHECK(tracetree::parse_traceparent(lone.traceparent()));
    CHECK(lone.trace_id().hex() != kTraceId);
    CHECK(lone.tracestate().empty());
    CHECK(lone.headers().size() == 1);
}

TEST_CASE("parse_client_spans: malformed entries are skipped") {
    const auto spans = tracetree::parse_client_spans(
        "00f067aa0ba902b7 10 5 0 ok,zz 1 2 0 bad id,0000000000000000 1 2 0 zero id,00f067aa0ba902b7 x 5 0 bad start,"
        "00f067aa0ba902b7 1 99999999999999999999999 0 overflow,00f067aa0ba902b7 1 2 3 bad flag,00f067aa0ba902b7 1 2,"
        "00f067aa0ba902b7 20 5 1 ");
    REQUIRE(spans.size() == 2);
    CHECK(spans[0].name == "ok");
    CHECK(spans[0].start_unix_ns == 10);
    CHECK(spans[0].duration_ns == 5);
    CHECK(spans[1].error);
    CHECK(spans[1].name.empty());
}
