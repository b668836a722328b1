#include "fatjar.hpp"

#include "zip.hpp"

#include <cstdint>
#include <vector>

namespace demo {
namespace {

class Random {  // splitmix64: fixed seeds give the same jar on every machine
public:
    explicit Random(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
    double unit() { return static_cast<double>(next() >> 11) / 9007199254740992.0; }

private:
    std::uint64_t state_;
};

// Minified code is a stream of identifiers, a few of them very frequent, with punctuation between, and
// whole phrases that recur: a skewed pick of words and phrases gives deflate ratios like real bundles
// (about 4 to 1; tuned so that the swagger-ui jar's ~11 MB deflate to ~2.9 MB).
class CodeText {
public:
    explicit CodeText(std::uint64_t seed, std::size_t vocabulary = 700) : random_(seed) {
        static const char* const keywords[] = {"function", "return", "var", "this", "null", "void 0", "typeof",
                                               "prototype", "length", "default", "exports", "require", "props",
                                               "Object", "createElement", "undefined", "value", "key"};
        for (const char* word : keywords) words_.emplace_back(word);
        while (words_.size() < vocabulary) {
            std::string name;
            const std::size_t length = 1 + random_.below(9);
            for (std::size_t i = 0; i < length; ++i)
                name += static_cast<char>((i == 0 ? 'a' : (random_.below(4) == 0 ? 'A' : 'a')) + random_.below(26));
            words_.push_back(std::move(name));
        }
        for (std::size_t i = 0; i < vocabulary; ++i) {
            std::string phrase;
            for (std::size_t n = 3 + random_.below(8); n > 0; --n) word(phrase, 2);
            phrases_.push_back(std::move(phrase));
        }
    }
    void append(std::string& out, std::size_t bytes, double skew) {
        const std::size_t target = out.size() + bytes;
        while (out.size() < target) {
            if (random_.below(100) < kPhraseShare) {  // code repeats itself: whole phrases come back
                const double u = random_.unit();
                double pick = u;
                for (int i = 1; i < static_cast<int>(skew); ++i) pick *= u;
                out += phrases_[static_cast<std::size_t>(pick * static_cast<double>(phrases_.size()))];
            } else {
                word(out, skew);
            }
        }
        out.resize(target);
    }

private:
    void word(std::string& out, double skew) {
        static const char* const joints[] = {".", "(", ")", ",", ";", "=", "{", "}", "&&", "?", ":", "[", "]",
                                             "!", "+", "\n", " ", "===", "||", "\""};
        const double u = random_.unit();
        double pick = u;
        for (int i = 1; i < static_cast<int>(skew); ++i) pick *= u;
        out += words_[static_cast<std::size_t>(pick * static_cast<double>(words_.size()))];
        out += joints[random_.below(sizeof joints / sizeof joints[0])];
        if (random_.below(40) == 0) out += std::to_string(random_.below(1000));
    }

    Random random_;
    std::vector<std::string> words_;
    std::vector<std::string> phrases_;
    static constexpr std::size_t kPhraseShare = 46;  // percent of picks that are whole phrases
};

std::string code(std::uint64_t seed, std::size_t bytes, double skew = 3) {
    std::string out;
    out.reserve(bytes);
    CodeText(seed).append(out, bytes, skew);
    return out;
}

// A source map: a "mappings" string of base64 VLQ groups (hard to compress), then the original
// sources (easy): the mix real maps have.
std::string source_map(std::uint64_t seed, std::size_t bytes, double mappings_share) {
    static const char base64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    Random random(seed);
    std::string out = "{\"version\":3,\"sources\":[\"webpack:///swagger-ui/src/core/index.js\"],\"mappings\":\"";
    const auto mapping_bytes = static_cast<std::size_t>(static_cast<double>(bytes) * mappings_share);
    while (out.size() < mapping_bytes) {
        const std::size_t group = 4 + random.below(3);
        for (std::size_t i = 0; i < group; ++i)
            out += base64[random.below(3) == 0 ? random.below(64) : random.below(8)];  // small deltas dominate
        out += random.below(9) == 0 ? ';' : ',';
    }
    out += "\",\"sourcesContent\":[\"";
    CodeText(seed ^ 0x5eed).append(out, bytes > out.size() + 4 ? bytes - out.size() - 4 : 0, 4);
    out += "\"]}";
    out.resize(bytes);
    return out;
}

std::string noise(std::uint64_t seed, std::size_t bytes) {  // PNG data is already compressed
    Random random(seed);
    std::string out(bytes, '\0');
    for (char& c : out) c = static_cast<char>(random.below(256));
    if (bytes >= 8) out.replace(0, 8, "\x89PNG\r\n\x1a\n");
    return out;
}

std::string class_file(std::uint64_t seed, std::size_t bytes) {  // constant pool text, then bytecode
    std::string out = "\xca\xfe\xba\xbe";
    out += code(seed, bytes / 2, 2);
    out += noise(seed + 1, bytes - out.size());
    return out;
}

std::size_t scaled(std::size_t bytes, double scale) {
    const auto result = static_cast<std::size_t>(static_cast<double>(bytes) * scale);
    return result < 16 ? 16 : result;
}

std::string manifest(std::string_view extra) {
    return "Manifest-Version: 1.0\r\nCreated-By: Apache Maven 3.5.2\r\nBuilt-By: tracetree-demo\r\n" +
           std::string(extra) + "\r\n";
}

struct Item {
    const char* name;  // ends with '/' for a directory
    char kind;         // d directory, c code, m source map, s style, p picture, t text
    std::size_t size;
};

// springfox-swagger-ui 2.9.2: swagger-ui 3.x's dist under webjars/, springfox's own glue, Maven data.
constexpr Item kSwaggerUi[] = {
    {"META-INF/", 'd', 0},
    {"META-INF/MANIFEST.MF", 't', 0},
    {"META-INF/resources/", 'd', 0},
    {"META-INF/resources/swagger-ui.html", 't', 3266},
    {"META-INF/resources/webjars/", 'd', 0},
    {"META-INF/resources/webjars/springfox-swagger-ui/", 'd', 0},
    {"META-INF/resources/webjars/springfox-swagger-ui/favicon-16x16.png", 'p', 665},
    {"META-INF/resources/webjars/springfox-swagger-ui/favicon-32x32.png", 'p', 628},
    {"META-INF/resources/webjars/springfox-swagger-ui/oauth2-redirect.html", 't', 1787},
    {"META-INF/resources/webjars/springfox-swagger-ui/springfox.css", 's', 1543},
    {"META-INF/resources/webjars/springfox-swagger-ui/springfox.js", 'c', 8412},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui-bundle.js", 'c', 1449532},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui-bundle.js.map", 'm', 5612345},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui-standalone-preset.js", 'c', 313766},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui-standalone-preset.js.map", 'm', 1002611},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui.css", 's', 133318},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui.css.map", 'm', 262781},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui.js", 'c', 331224},
    {"META-INF/resources/webjars/springfox-swagger-ui/swagger-ui.js.map", 'm', 1778463},
    {"META-INF/resources/webjars/springfox-swagger-ui/index.html", 't', 1426},
    {"META-INF/resources/webjars/springfox-swagger-ui/absolute-path.js", 'c', 386},
    {"META-INF/resources/webjars/springfox-swagger-ui/index.js", 'c', 397},
    {"META-INF/resources/webjars/springfox-swagger-ui/lang/", 'd', 0},
    {"META-INF/resources/webjars/springfox-swagger-ui/lang/translator.js", 'c', 859},
    {"META-INF/resources/webjars/springfox-swagger-ui/lang/en.js", 'c', 2884},
    {"META-INF/resources/webjars/springfox-swagger-ui/lang/zh-cn.js", 'c', 2796},
    {"META-INF/resources/webjars/springfox-swagger-ui/lang/ja.js", 'c', 3303},
    {"META-INF/resources/webjars/springfox-swagger-ui/lang/ru.js", 'c', 4186},
    {"META-INF/maven/", 'd', 0},
    {"META-INF/maven/io.springfox/", 'd', 0},
    {"META-INF/maven/io.springfox/springfox-swagger-ui/", 'd', 0},
    {"META-INF/maven/io.springfox/springfox-swagger-ui/pom.xml", 't', 1988},
    {"META-INF/maven/io.springfox/springfox-swagger-ui/pom.properties", 't', 116},
};

std::string text(std::uint64_t seed, std::size_t bytes) {  // HTML, XML and properties read like prose
    std::string out;
    CodeText(seed, 400).append(out, bytes, 2);
    return out;
}

std::string small_jar(std::string_view name, std::size_t classes, std::uint64_t seed, double scale) {
    zip::Writer writer;
    writer.add_directory("META-INF/");
    writer.add("META-INF/MANIFEST.MF", manifest("Implementation-Title: " + std::string(name) + "\r\n"),
               zip::Method::deflated);
    for (std::size_t i = 0; i < classes; ++i)
        writer.add("org/example/" + std::string(name) + "/Class" + std::to_string(i) + ".class",
                   class_file(seed + i, scaled(1500 + 97 * i, scale)), zip::Method::deflated);
    return writer.finish();
}

}  // namespace

std::size_t swagger_ui_entry_count() { return sizeof kSwaggerUi / sizeof kSwaggerUi[0]; }

std::string build_swagger_ui_jar(double scale) {
    zip::Writer writer;
    std::uint64_t seed = 292;
    for (const Item& item : kSwaggerUi) {
        const std::size_t size = scaled(item.size, scale);
        ++seed;
        switch (item.kind) {
        case 'd': writer.add_directory(item.name); break;
        case 't':
            writer.add(item.name,
                       item.size == 0 ? manifest("Implementation-Title: springfox-swagger-ui\r\n"
                                                 "Implementation-Version: 2.9.2\r\n")
                                      : text(seed, size),
                       zip::Method::deflated);
            break;
        case 'c': writer.add(item.name, code(seed, size), zip::Method::deflated); break;
        case 'm': writer.add(item.name, source_map(seed, size, 0.12), zip::Method::deflated); break;
        case 's': writer.add(item.name, code(seed, size, 5), zip::Method::deflated); break;
        default: writer.add(item.name, noise(seed, size), zip::Method::deflated); break;
        }
    }
    return writer.finish();
}

std::string build_fat_jar(double scale) {
    zip::Writer writer;
    writer.add_directory("META-INF/");
    writer.add("META-INF/MANIFEST.MF",
               manifest("Main-Class: org.springframework.boot.loader.JarLauncher\r\n"
                        "Start-Class: com.example.channel.ChannelApplication\r\n"
                        "Spring-Boot-Version: 2.0.2.RELEASE\r\n"
                        "Spring-Boot-Classes: BOOT-INF/classes/\r\nSpring-Boot-Lib: BOOT-INF/lib/\r\n"),
               zip::Method::deflated);
    writer.add_directory("org/springframework/boot/loader/");
    writer.add("org/springframework/boot/loader/JarLauncher.class", class_file(1, 1800), zip::Method::deflated);
    writer.add_directory("BOOT-INF/");
    writer.add_directory("BOOT-INF/classes/");
    writer.add("BOOT-INF/classes/application.properties", "server.port=7744\nchannel.url=http://127.0.0.1:7745/pay\n",
               zip::Method::deflated);
    writer.add("BOOT-INF/classes/com/example/channel/SendController.class", class_file(2, 2400),
               zip::Method::deflated);
    writer.add_directory("BOOT-INF/lib/");
    // Spring Boot requires nested jars to be stored, so that its loader can open them in place.
    static const char* const libraries[] = {"spring-webmvc-5.0.6.RELEASE", "spring-web-5.0.6.RELEASE",
                                            "tomcat-embed-core-8.5.31", "springfox-swagger2-2.9.2",
                                            "jackson-databind-2.9.5"};
    std::uint64_t seed = 100;
    for (const char* library : libraries)
        writer.add("BOOT-INF/lib/" + std::string(library) + ".jar", small_jar(library, 12, seed += 50, scale),
                   zip::Method::stored);
    writer.add(kSwaggerUiJar, build_swagger_ui_jar(scale), zip::Method::stored);
    return writer.finish();
}

}  // namespace demo
