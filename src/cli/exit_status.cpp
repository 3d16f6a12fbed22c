// In the library rather than main.cpp: the commands that set it are linked into the tests too.
#include "cli/commands.h"

namespace tokamak::cli {

int& exit_status() {
  static int status = 0;
  return status;
}

}  // namespace tokamak::cli
