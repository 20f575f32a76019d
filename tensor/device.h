// Where a tensor's memory lives: the CPU, or one CUDA device.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace braid {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // the CUDA ordinal; always 0 for the CPU

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  // Parses "cpu", "cuda", "cuda:1". Throws InvalidArgument otherwise.
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu" or "cuda:N"
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace braid

template <>
struct fmt::formatter<braid::Device> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const braid::Device& d, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(d.str(), ctx);
  }
};
