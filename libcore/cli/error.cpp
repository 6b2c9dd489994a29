#include "cli/error.h"

namespace tl {

void rethrowForNode(const std::string& nodeName, const Error& e) {
  throw Error("node '" + nodeName + "': " + e.what(), e.code());
}

}  // namespace tl
