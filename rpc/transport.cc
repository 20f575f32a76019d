#include "rpc/transport.h"

#include "base/check.h"
#include "base/config.h"
#include "rpc/tcp/tcp_transport.h"
#if BRAID_HAVE_UCX
#include "rpc/ucx/ucx_transport.h"
#endif

namespace braid::rpc {

std::unique_ptr<Transport> create_transport(const std::string& name, const TransportOptions& options) {
  if (name == "tcp") return make_tcp_transport(options);
#if BRAID_HAVE_UCX
  if (name == "ucx") return make_ucx_transport(options);
  BRAID_THROW(InvalidArgument, "rpc: unknown transport '{}' (this build has: tcp, ucx)", name);
#else
  BRAID_THROW(InvalidArgument, "rpc: unknown transport '{}' (this build has: tcp; ucx needs libucx-dev)", name);
#endif
}

}  // namespace braid::rpc
