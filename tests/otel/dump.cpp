// otel-dump: prints tracetree's OTLP/JSON for samples::slow_call(), for reference.js to compare with
// what the OpenTelemetry JavaScript SDK serializes.
#include <tracetree/otel/otlp.hpp>

#include <iostream>

#include "samples.hpp"

int main() {
    tracetree::OtlpOptions options;
    options.resource = {{"service.name", "demo"}};
    std::cout << tracetree::to_otlp_json({samples::slow_call()}, options) << '\n';
}
