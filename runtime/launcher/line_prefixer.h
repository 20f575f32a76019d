// Turns a child's output stream into whole lines, each starting with a prefix ("[rank 3] "), so that the
// launcher can write the lines of many children to one terminal without mixing two lines mid-line.
//
// Bytes arrive in arbitrary pieces (a pipe read returns what the child has written so far); a line is
// released only when its '\n' has arrived. A line longer than max_line_bytes is released in pieces of
// that size, each as a line of its own, so that one child that never writes '\n' cannot make the
// launcher hold unbounded memory. At the end of the stream, finish() releases a last unterminated line
// with a '\n' added.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace braid::runtime::launcher {

class LinePrefixer {
 public:
  static constexpr size_t kDefaultMaxLineBytes = 64 * 1024;

  explicit LinePrefixer(std::string prefix, size_t max_line_bytes = kDefaultMaxLineBytes);

  // Takes the next bytes of the stream; returns the lines it completed, each prefixed and ending in
  // '\n' (empty when no line is complete yet).
  std::string feed(std::string_view bytes);

  // End of stream: the unterminated rest as one prefixed line ending in '\n', or "" when there is none.
  std::string finish();

  // Bytes held back waiting for their '\n'.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string prefix_;
  size_t max_line_bytes_;
  std::string pending_;
};

}  // namespace braid::runtime::launcher
