#pragma once
// Text that came from files or users, made safe for where it goes: a terminal, a CSV cell, a file name.
#include <optional>
#include <string>
#include <string_view>

namespace atl {

// Valid, printable UTF-8 kept; control characters and invalid bytes written as escapes (\n, \t,
// \xNN), so a message never carries raw bytes from a file to the terminal. Applying it twice
// changes nothing more.
std::string printable(std::string_view text);

// One CSV cell (RFC 4180): quoted, with quotes doubled, when it holds a comma, quote or line break.
std::string csv_field(std::string_view text);

// Why `name` cannot be used as one file or directory name (empty, "." or "..", a path separator,
// a control character), or nullopt when it can.
std::optional<std::string> file_name_problem(std::string_view name);

}  // namespace atl
