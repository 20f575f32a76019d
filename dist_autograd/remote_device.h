// Where a RemoteModule lives: a worker (by name or by rank) and a device on it, written as PyTorch's
// remote_device strings:
//
//   "worker0/cpu"      worker "worker0", the CPU
//   "worker0"          the same (the device defaults to the CPU)
//   "rank:0/cpu"       the worker whose rank (RPC id) is 0, resolved through the running RPC agent
//   "worker1/cuda:1"   CUDA device 1 of worker1 (also "cuda" = "cuda:0"); only in a build with CUDA
//
// Anything else is an InvalidArgument that quotes the string and gives the format: an empty worker name
// ("", "/cpu"), an empty or unknown device ("worker0/", "worker0/gpu"), a malformed rank ("rank:x/cpu",
// "rank:/cpu"), more than one '/' ("a/b/c") or more than one ':' in the worker part ("a:b/cpu"). A device
// alone ("cpu", "cuda:0"), which PyTorch's _remote_device accepts, is rejected too: a RemoteModule needs a
// worker. Parsing needs no RPC agent; only worker() (for the rank form) does.
#pragma once

#include <string>
#include <string_view>

#include "rpc/rref.h"
#include "tensor/device.h"

namespace braid::dist_autograd {

class RemoteDevice {
 public:
  // Parses `text` (see above); InvalidArgument "Could not parse remote_device '<text>': <why>. The valid
  // format is ...".
  static RemoteDevice parse(std::string_view text);

  // The worker's name; empty in the rank form.
  const std::string& worker_name() const { return worker_name_; }
  // The rank of the rank form; -1 in the name form.
  int rank() const { return rank_; }
  const Device& device() const { return device_; }
  // The string it was parsed from.
  const std::string& str() const { return text_; }

  // The worker this names, looked up in the running RPC agent: InvalidArgument naming the string when no
  // worker has that name or rank (or RPC is not initialized).
  rpc::WorkerInfo worker() const;

 private:
  std::string text_;
  std::string worker_name_;
  int rank_ = -1;
  Device device_ = Device::cpu();
};

}  // namespace braid::dist_autograd
