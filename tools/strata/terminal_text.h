// Text from a profile made safe to print on a terminal.
//
// Every string the `strata` command takes from a profile (process, thread, function, library
// and marker names, the product, error messages quoting them) may hold control characters: a
// program chooses its thread names, and a profile file may come from anywhere. Printed as they
// are, ESC and CSI sequences would move the cursor, recolour or retitle the user's terminal,
// or hide lines. TerminalSafe() shows them as visible escapes instead.
//
// What is escaped (everything else is copied byte for byte, so UTF-8 text stays readable):
//   - C0 controls U+0000-U+001F and DEL (U+007F): "\x1b", "\x07"...; newline too, unless
//     `keep_newlines`;
//   - C1 controls U+0080-U+009F, encoded in UTF-8 (C2 80-C2 9F; "\u009b"), which UTF-8
//     terminals obey like their ESC forms (U+009B is CSI);
//   - bytes that are not part of valid UTF-8 ("\x9b"), which a terminal in a legacy 8-bit
//     mode would read as C1 controls.
// A backslash is left as it is.
//
// Thread safety: pure functions.
#ifndef STRATA_TOOLS_STRATA_TERMINAL_TEXT_H_
#define STRATA_TOOLS_STRATA_TERMINAL_TEXT_H_

#include <string>
#include <string_view>

namespace strata {
namespace cli {

std::string TerminalSafe(std::string_view text, bool keep_newlines = false);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_TERMINAL_TEXT_H_
