// braid's narrow interface to the CUDA runtime: devices, memory and copies. In a build without CUDA every
// function exists; device_count() is 0 and the others throw InvalidArgument saying CUDA is not built.
// With CUDA built but no usable GPU or driver, device_count() is 0 and available() explains why.
//
// CUDA memory comes from a caching allocator (per device, by rounded size), as for the CPU.
#pragma once

#include <cstddef>
#include <string>

#include "tensor/device.h"

namespace braid::cuda {

// Whether this build has CUDA support compiled in.
bool is_built();
// The number of usable CUDA devices (0 without a driver or GPU).
int device_count();
// Empty when at least one device is usable, else why not (e.g. "no CUDA driver found").
std::string unavailable_reason();
// "13.0" style versions; "off" when not built.
std::string runtime_version();
std::string driver_version();
std::string device_name(int index);

void* allocate(size_t nbytes, int device);
void deallocate(void* ptr, size_t nbytes, int device);
// Copies between any two of host and CUDA memory; synchronous with respect to the host.
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
void synchronize(int device);

// Throws InvalidArgument naming `op` unless `device` is a usable CUDA device of this build.
void check_device(const Device& device, const char* op);

}  // namespace braid::cuda
