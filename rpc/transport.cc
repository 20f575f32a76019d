#include "rpc/transport.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/config.h"
#include "base/logging.h"
#include "rpc/tcp/tcp_transport.h"
#if BRAID_HAVE_UCX
#include <ucp/api/ucp.h>

#include "rpc/ucx/ucx_transport.h"
#endif

namespace braid::rpc {

namespace {

#if BRAID_HAVE_UCX
constexpr const char* kKnown = "auto, tcp, ucx";
#else
constexpr const char* kKnown = "auto, tcp; ucx needs libucx-dev";
#endif

}  // namespace

TransportChoice choose_transport(const std::string& requested) {
  if (requested == "tcp") return {"tcp", "asked for"};
#if BRAID_HAVE_UCX
  if (requested == "ucx") return {"ucx", "asked for"};
  if (requested == "auto") {
    return {"ucx", fmt::format("auto: braid was built with UCX {}, which takes shared memory between workers on one "
                               "host and the network between hosts",
                               ucp_get_version_string())};
  }
#else
  if (requested == "auto") return {"tcp", "auto: braid was built without UCX"};
#endif
  BRAID_THROW(InvalidArgument, "rpc: unknown transport '{}' (this build has: {})", requested, kKnown);
}

std::unique_ptr<Transport> create_transport(const std::string& requested, const TransportOptions& options,
                                            std::string* reason) {
  TransportChoice choice = choose_transport(requested);
  if (reason != nullptr) *reason = choice.reason;
  if (choice.name == "tcp") return make_tcp_transport(options);
#if BRAID_HAVE_UCX
  if (requested != "auto") return make_ucx_transport(options);
  // auto: a host where UCX cannot start still runs the job, over tcp. A job whose other workers did start
  // UCX then fails at init_rpc naming both transports (agent.cc), instead of half of it waiting for
  // messages that never come.
  try {
    return make_ucx_transport(options);
  } catch (const std::exception& e) {
    logging::get("braid.rpc")->warn("rpc transport auto: ucx failed to start here ({}); using tcp", e.what());
    if (reason != nullptr) *reason = fmt::format("auto: ucx failed to start here ({})", e.what());
    return make_tcp_transport(options);
  }
#else
  BRAID_THROW(InternalError, "rpc: transport '{}' chosen without a way to make it", choice.name);
#endif
}

}  // namespace braid::rpc
