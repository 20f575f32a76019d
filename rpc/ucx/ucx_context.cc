#include "rpc/ucx/ucx_context.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "base/logging.h"

namespace braid::rpc::ucx_detail {

std::string status_text(ucs_status_t status) {
  return fmt::format("{} (UCX status {})", ucs_status_string(status), static_cast<int>(status));
}

std::vector<uint8_t> pack_addresses(const WorkerAddresses& addresses) {
  const auto length = static_cast<uint32_t>(addresses.data.size());
  std::vector<uint8_t> out(addresses.nonce.begin(), addresses.nonce.end());
  out.resize(out.size() + sizeof(length));
  std::memcpy(out.data() + addresses.nonce.size(), &length, sizeof(length));
  out.insert(out.end(), addresses.data.begin(), addresses.data.end());
  out.insert(out.end(), addresses.monitor.begin(), addresses.monitor.end());
  return out;
}

WorkerAddresses unpack_addresses(const std::vector<uint8_t>& bytes, const std::string& what) {
  constexpr size_t kFixed = security::kNonceBytes + sizeof(uint32_t);
  uint32_t length = 0;
  if (bytes.size() >= kFixed) std::memcpy(&length, bytes.data() + security::kNonceBytes, sizeof(length));
  BRAID_CHECK_ARG(bytes.size() > kFixed && length > 0 && length < bytes.size() - kFixed,
                  "{}: not a ucx transport address ({} bytes; data worker address of {} bytes)", what, bytes.size(),
                  length);
  WorkerAddresses out;
  std::memcpy(out.nonce.data(), bytes.data(), security::kNonceBytes);
  const auto data_begin = bytes.begin() + kFixed;
  const auto data_end = data_begin + length;
  out.data.assign(data_begin, data_end);
  out.monitor.assign(data_end, bytes.end());
  return out;
}

namespace {

// Sets `name` (without the UCX_ prefix) unless the user chose a value in the environment.
void default_config(ucp_config_t* config, const char* name, const char* value) {
  const std::string env = std::string("UCX_") + name;
  if (std::getenv(env.c_str()) != nullptr) return;
  const ucs_status_t st = ucp_config_modify(config, name, value);
  if (st != UCS_OK) {
    logging::get("braid.rpc")->warn("ucx transport: cannot set {}={}: {}", env, value, status_text(st));
  }
}

// The network interface holding IPv4 address `host` ("lo" for 127.x), or "" when `host` is no address of
// this machine's (a host name, an address elsewhere).
std::string interface_of(const std::string& host) {
  in_addr want{};
  if (inet_pton(AF_INET, host.c_str(), &want) != 1) return "";
  if ((ntohl(want.s_addr) >> 24) == 127) return "lo";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (const ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == want.s_addr) name = i->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

}  // namespace

UcxContext::UcxContext(const std::string& bind_host) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) BRAID_THROW(CommError, "ucx transport: reading the UCX configuration failed: {}", status_text(st));
  default_config(config, "KEEPALIVE_INTERVAL", "5s");
  const std::string device = interface_of(bind_host);
  if (!device.empty()) default_config(config, "NET_DEVICES", device.c_str());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.name = "braid-rpc";
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) BRAID_THROW(CommError, "ucx transport: ucp_init failed: {}", status_text(st));
}

UcxContext::~UcxContext() {
  if (context_ != nullptr) ucp_cleanup(context_);
}

UcxWorker::UcxWorker(const UcxContext& context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t st = ucp_worker_create(context.get(), &params, &worker_);
  if (st != UCS_OK) BRAID_THROW(CommError, "ucx transport: ucp_worker_create failed: {}", status_text(st));
  try {
    ucp_address_t* address = nullptr;
    size_t length = 0;
    st = ucp_worker_get_address(worker_, &address, &length);
    if (st != UCS_OK) BRAID_THROW(CommError, "ucx transport: ucp_worker_get_address failed: {}", status_text(st));
    const auto* bytes = reinterpret_cast<const uint8_t*>(address);
    address_.assign(bytes, bytes + length);
    ucp_worker_release_address(worker_, address);

    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER | UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    st = ucp_worker_query(worker_, &attr);
    if (st != UCS_OK) BRAID_THROW(CommError, "ucx transport: ucp_worker_query failed: {}", status_text(st));
    max_am_header_ = attr.max_am_header;

    st = ucp_worker_get_efd(worker_, &event_fd_);
    if (st != UCS_OK) BRAID_THROW(CommError, "ucx transport: ucp_worker_get_efd failed: {}", status_text(st));
  } catch (...) {
    destroy();
    throw;
  }
}

bool UcxWorker::progress() {
  // ucp_worker_progress returns how many events it handled; a few rounds drain a burst without letting
  // a sender that never stops keep this loop from looking at its own queue.
  bool any = false;
  for (int round = 0; round < 64; ++round) {
    if (ucp_worker_progress(worker_) == 0) break;
    any = true;
  }
  return any;
}

UcxWorker::Armed UcxWorker::arm() {
  const ucs_status_t st = ucp_worker_arm(worker_);
  if (st == UCS_OK) return Armed::kYes;
  if (st == UCS_ERR_BUSY) return Armed::kBusy;
  // Not expected with the WAKEUP feature; the caller falls back to short sleeps.
  if (!arm_failed_) {
    arm_failed_ = true;
    logging::get("braid.rpc")->warn("ucx transport: ucp_worker_arm failed: {}; polling every millisecond instead",
                                    status_text(st));
  }
  return Armed::kFailed;
}

void UcxWorker::destroy() {
  if (worker_ == nullptr) return;
  ucp_worker_destroy(worker_);
  worker_ = nullptr;
  event_fd_ = -1;  // owned by the worker
}

}  // namespace braid::rpc::ucx_detail
