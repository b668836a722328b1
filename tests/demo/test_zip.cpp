// The ZIP reader and writer on their own, including hostile archives.
#include "fatjar.hpp"
#include "zip.hpp"

#include <doctest/doctest.h>

#include <string>

namespace zip = demo::zip;

namespace {

std::string sample() {
    zip::Writer writer;
    writer.add_directory("META-INF/");
    writer.add("META-INF/resources/a.js", std::string(5000, 'a') + "function(){}", zip::Method::deflated);
    writer.add("b.txt", "stored bytes", zip::Method::stored);
    writer.add("empty.txt", "", zip::Method::deflated);
    return writer.finish();
}

std::size_t walk(std::string_view bytes) {
    zip::MemorySource source(bytes);
    zip::ZipInputStream in(source);
    std::size_t count = 0;
    while (in.next_entry()) ++count;
    return count;
}

}  // namespace

TEST_CASE("an archive written by Writer reads back through the central directory and sequentially") {
    const std::string bytes = sample();
    const zip::Archive archive = zip::Archive::parse(bytes);
    REQUIRE(archive.entries().size() == 4);
    CHECK(archive.entries()[0].is_directory());
    const zip::Entry* js = archive.find("META-INF/resources/a.js");
    REQUIRE(js != nullptr);
    CHECK(js->method == 8);
    CHECK(archive.read(*js) == std::string(5000, 'a') + "function(){}");
    CHECK(archive.read(*archive.find("b.txt")) == "stored bytes");
    CHECK(archive.read(*archive.find("empty.txt")).empty());
    CHECK(walk(bytes) == 4);

    zip::MemorySource source(bytes);
    zip::ZipInputStream in(source);
    in.next_entry();
    const auto second = in.next_entry();
    REQUIRE(second);
    CHECK(second->name == "META-INF/resources/a.js");
    std::string data;
    char chunk[100];
    for (std::size_t n; (n = in.read(chunk, sizeof chunk)) != 0;) data.append(chunk, n);
    CHECK(data.size() == 5012);
}

TEST_CASE("the generated swagger-ui jar has the springfox shape") {
    const std::string jar = demo::build_swagger_ui_jar(1.0 / 64);
    const zip::Archive archive = zip::Archive::parse(jar);
    CHECK(archive.entries().size() == demo::swagger_ui_entry_count());
    CHECK(archive.entries().size() == 33);
    CHECK(walk(jar) == 33);
    CHECK(archive.find("META-INF/resources/webjars/springfox-swagger-ui/swagger-ui-bundle.js.map") != nullptr);
    const zip::Archive fat = zip::Archive::parse(demo::build_fat_jar(1.0 / 64));
    const zip::Entry* nested = fat.find(demo::kSwaggerUiJar);
    REQUIRE(nested != nullptr);
    CHECK(nested->method == 0);  // stored, as Spring Boot requires
}

TEST_CASE("every truncation and many byte flips of an archive fail cleanly or read") {
    const std::string bytes = sample();
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        const std::string cut = bytes.substr(0, n);
        CHECK_THROWS_AS(zip::Archive::parse(cut), zip::Error);
        try {  // a prefix can be a valid run of local headers: it must end, or throw zip::Error
            walk(cut);
        } catch (const zip::Error&) {
        }
    }
    const zip::Archive intact = zip::Archive::parse(bytes);
    for (std::size_t at = 0; at < bytes.size(); ++at) {
        std::string flipped = bytes;
        flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
        bool in_data = false;  // a flip in an entry's data must always be caught (structure or CRC)
        for (const zip::Entry& entry : intact.entries()) {
            const std::string_view data = intact.raw_data(entry);
            const auto begin = static_cast<std::size_t>(data.data() - bytes.data());
            in_data = in_data || (at >= begin && at < begin + data.size());
        }
        bool archive_failed = false, walk_failed = false;
        try {
            const zip::Archive archive = zip::Archive::parse(flipped);
            for (const zip::Entry& entry : archive.entries()) archive.read(entry);
        } catch (const zip::Error&) {
            archive_failed = true;
        }
        try {
            walk(flipped);
        } catch (const zip::Error&) {
            walk_failed = true;
        }
        if (in_data) {
            CAPTURE(at);
            CHECK(archive_failed);
            CHECK(walk_failed);
        }
    }
}

TEST_CASE("corrupt archives say what is wrong") {
    CHECK_THROWS_WITH_AS(zip::Archive::parse("not a zip at all, just some text"),
                         doctest::Contains("no end of central directory"), zip::Error);
    std::string bytes = sample();
    bytes[bytes.size() - 3] = '\x7f';  // central directory offset far past the end
    CHECK_THROWS_WITH_AS(zip::Archive::parse(bytes), doctest::Contains("central directory"), zip::Error);
    std::string bad_crc = sample();
    bad_crc[bad_crc.find("stored bytes")] = 'S';
    const zip::Archive archive = zip::Archive::parse(bad_crc);
    CHECK_THROWS_WITH_AS(archive.read(*archive.find("b.txt")), doctest::Contains("CRC"), zip::Error);
    CHECK_THROWS_WITH_AS(walk(bad_crc), doctest::Contains("CRC"), zip::Error);
}

TEST_CASE("an entry that inflates past its declared size is refused (no zip bomb)") {
    zip::Writer writer;
    writer.add("bomb", std::string(1 << 20, '\0'), zip::Method::deflated);
    std::string bytes = writer.finish();
    bytes[22] = 0x10;  // local header: uncompressed size 16 bytes (little-endian at offset 22)
    bytes[23] = bytes[24] = bytes[25] = 0;
    CHECK_THROWS_WITH_AS(walk(bytes), doctest::Contains("longer than 16"), zip::Error);
    zip::Limits limits;
    limits.max_entry_size = 1000;
    const std::string small = sample();
    zip::MemorySource source(small);
    zip::ZipInputStream in(source, limits);
    CHECK_THROWS_WITH_AS((in.next_entry(), in.next_entry()), doctest::Contains("too large"), zip::Error);
}

TEST_CASE("sequential reading follows data descriptors, as streaming jar tools write them") {
    zip::Writer writer;
    const std::string text = "a deflated entry whose sizes follow its data " + std::string(300, 'z');
    writer.add("first.txt", text, zip::Method::deflated);
    writer.add("second.txt", "plain", zip::Method::stored);
    std::string bytes = writer.finish();
    const zip::Archive archive = zip::Archive::parse(bytes);
    const zip::Entry& first = archive.entries()[0];
    const std::string_view data = archive.raw_data(first);
    const auto data_end = static_cast<std::size_t>(data.data() - bytes.data()) + data.size();
    std::string descriptor = std::string("PK\x07\x08", 4) + bytes.substr(14, 12);  // crc and both sizes
    bytes[6] = static_cast<char>(bytes[6] | 8);                                    // flag bit 3
    for (std::size_t at = 14; at < 26; ++at) bytes[at] = 0;                        // unknown in the header
    bytes.insert(data_end, descriptor);

    zip::MemorySource source(bytes);
    zip::ZipInputStream in(source);
    const auto entry = in.next_entry();
    REQUIRE(entry);
    CHECK(entry->has_descriptor());
    std::string read;
    char chunk[64];
    for (std::size_t n; (n = in.read(chunk, sizeof chunk)) != 0;) read.append(chunk, n);
    CHECK(read == text);
    const auto second = in.next_entry();
    REQUIRE(second);
    CHECK(second->name == "second.txt");
    CHECK_FALSE(in.next_entry());

    bytes[data_end + 4] = static_cast<char>(bytes[data_end + 4] ^ 1);  // the descriptor's CRC
    CHECK_THROWS_WITH_AS(walk(bytes), doctest::Contains("CRC"), zip::Error);
}
