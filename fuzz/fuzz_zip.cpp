// libFuzzer target: the demo's ZIP readers (examples/demo/zip.hpp). Every malformed archive must end
// in zip::Error, and nothing else: both the central-directory reader (Archive) and the sequential
// reader (ZipInputStream, the one that lists nested jars) read every entry they list.
#include "zip.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zip = demo::zip;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    zip::Limits limits;
    limits.max_entry_size = 1u << 20;  // a zip bomb is refused at 1 MiB instead of costing 256 MiB
    limits.max_entries = 1000;
    try {
        const zip::Archive archive = zip::Archive::parse(input, limits);
        for (const zip::Entry& entry : archive.entries()) {
            try {
                const std::string contents = archive.read(entry);
                if (contents.size() != entry.size) __builtin_trap();  // read() checks the size
            } catch (const zip::Error&) {
            }
        }
    } catch (const zip::Error&) {
    }
    try {
        zip::MemorySource source(input);
        zip::ZipInputStream stream(source, limits);
        char buffer[4096];
        while (auto entry = stream.next_entry()) {
            while (stream.read(buffer, sizeof buffer) != 0) {
            }
        }
        if (stream.position() > input.size()) __builtin_trap();
    } catch (const zip::Error&) {
    }
    return 0;
}
