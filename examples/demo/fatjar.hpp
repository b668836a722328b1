// The Spring Boot fat jar the demo serves from: a real ZIP with nested jars stored (uncompressed) under
// BOOT-INF/lib/, one of them shaped like springfox-swagger-ui 2.9.2 (33 entries, one 5.6 MB source
// map, ~11 MB in all, deflated to ~3 MB). Contents are generated, deterministic, and about as
// compressible as the real minified JavaScript, source maps and CSS.
#ifndef DEMO_FATJAR_HPP
#define DEMO_FATJAR_HPP

#include <cstddef>
#include <string>
#include <string_view>

namespace demo {

inline constexpr std::string_view kSwaggerUiJar = "BOOT-INF/lib/springfox-swagger-ui-2.9.2.jar";
inline constexpr std::string_view kFatJarName = "channel-0.0.1-SNAPSHOT.jar";

// The nested resource jar on its own. `scale` multiplies every file size (tests use 1/64 to stay fast
// under sanitizers); the entry list never changes.
std::string build_swagger_ui_jar(double scale = 1.0);
// The whole application jar: manifest, loader and application classes, and BOOT-INF/lib/*.jar stored.
std::string build_fat_jar(double scale = 1.0);
std::size_t swagger_ui_entry_count();  // entries build_swagger_ui_jar writes, directories included

}  // namespace demo

#endif
