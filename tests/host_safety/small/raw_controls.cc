// raw_controls FILE...: prints, for each FILE, the number of raw control characters a
// terminal would obey in it (C0 but newline, DEL, C1 controls in UTF-8 — C2 80..C2 9F — and
// bytes 80..9F that are not part of a valid UTF-8 sequence), and the offset of the first one.
// Exits 1 when any file has one, 2 when a file cannot be read.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace {

// Length of the valid UTF-8 sequence at text[i], or 0.
size_t Utf8Length(const std::string& text, size_t i) {
  const unsigned char lead = static_cast<unsigned char>(text[i]);
  size_t length = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

int main(int argc, char** argv) {
  int status = 0;
  for (int a = 1; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "raw_controls: cannot read %s\n", argv[a]);
      return 2;
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t count = 0, first = std::string::npos;
    for (size_t i = 0; i < text.size();) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      bool control = false;
      size_t step = 1;
      if (c < 0x80) {
        control = (c < 0x20 && c != '\n') || c == 0x7F;
      } else if (size_t length = Utf8Length(text, i)) {
        control = c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
        step = length;
      } else {
        control = c <= 0x9F;
      }
      if (control && count++ == 0) first = i;
      i += step;
    }
    std::printf("%s: %zu raw control character(s)", argv[a], count);
    if (count > 0) std::printf(", the first at byte %zu", first);
    std::printf("\n");
    if (count > 0) status = 1;
  }
  return status;
}
