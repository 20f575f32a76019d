#include "tensor/device.h"

#include "base/check.h"
#include "base/env.h"

namespace braid {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    const int64_t index = env::parse_int(text.substr(5), "device string");
    BRAID_CHECK_ARG(index >= 0 && index < 1024, "device string '{}': CUDA index out of range", text);
    return cuda(static_cast<int>(index));
  }
  BRAID_THROW(InvalidArgument, "unknown device string '{}' (expected 'cpu', 'cuda' or 'cuda:N')", text);
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace braid
