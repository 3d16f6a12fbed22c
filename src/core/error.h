#pragma once
// Errors that cross a module boundary. Input from outside (model files, flags, HTTP bodies)
// is validated where it enters and rejected with an Error whose message is one line that a
// user can act on; code inside may then trust what it is given.

#include <stdexcept>
#include <string>

namespace tokamak {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace tokamak
