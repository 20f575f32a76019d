#include "store/rendezvous.h"

#include <map>

#include "base/check.h"
#include "base/env.h"
#include "store/file_store.h"
#include "store/tcp_store.h"

namespace braid::store {
namespace {

int env_int_or(const char* name, int fallback) {
  auto v = env::get(name);
  if (!v) return fallback;
  return static_cast<int>(env::parse_int(*v, name));
}

struct Url {
  std::string scheme;
  std::string rest;  // after "://", without the query
  std::map<std::string, std::string> query;
};

Url parse_url(const std::string& url) {
  const size_t sep = url.find("://");
  BRAID_CHECK_ARG(sep != std::string::npos && sep > 0,
                  "init_method '{}': expected a URL such as env://, tcp://host:port or file:///path", url);
  Url u;
  u.scheme = url.substr(0, sep);
  std::string rest = url.substr(sep + 3);
  const size_t q = rest.find('?');
  if (q != std::string::npos) {
    std::string query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    size_t pos = 0;
    while (pos < query.size()) {
      size_t amp = query.find('&', pos);
      if (amp == std::string::npos) amp = query.size();
      const std::string kv = query.substr(pos, amp - pos);
      const size_t eq = kv.find('=');
      BRAID_CHECK_ARG(eq != std::string::npos && eq > 0, "init_method '{}': malformed query parameter '{}'", url, kv);
      u.query[kv.substr(0, eq)] = kv.substr(eq + 1);
      pos = amp + 1;
    }
  }
  u.rest = rest;
  return u;
}

// Explicit argument, else URL query, else environment variable; -1 when none.
int resolve(int arg, const Url& u, const char* query_key, const char* env_name) {
  if (arg >= 0) return arg;
  auto it = u.query.find(query_key);
  if (it != u.query.end()) return static_cast<int>(env::parse_int(it->second, query_key));
  return env_int_or(env_name, -1);
}

void check_rank(int rank, int world_size, const std::string& url) {
  BRAID_CHECK_ARG(world_size > 0, "init_method '{}': world size is unknown or invalid ({}); set WORLD_SIZE or pass "
                  "world_size", url, world_size);
  BRAID_CHECK_ARG(rank >= 0 && rank < world_size, "init_method '{}': rank {} is out of range for world size {}; set "
                  "RANK or pass rank", url, rank, world_size);
}

std::shared_ptr<Store> tcp_store(const std::string& host, int port, int rank, int world_size, Millis timeout) {
  BRAID_CHECK_ARG(port >= 0 && port < 65536, "rendezvous: port {} is out of range", port);
  // Port 0 lets the master pick a free port; only useful when nobody else has to find it.
  BRAID_CHECK_ARG(port > 0 || world_size == 1, "rendezvous: port 0 needs world size 1 (got {})", world_size);
  TcpStoreOptions o;
  o.is_master = rank == 0;
  o.world_size = world_size;
  o.timeout = timeout;
  return std::make_shared<TCPStore>(host, static_cast<uint16_t>(port), o);
}

}  // namespace

std::string first_host_of_nodelist(const std::string& nodelist) {
  BRAID_CHECK_ARG(!nodelist.empty(), "SLURM_JOB_NODELIST is empty");
  // The first entry ends at a comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    else if (nodelist[end] == ']') --depth;
    else if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string first = nodelist.substr(0, end);
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  const size_t close = first.find(']', open);
  BRAID_CHECK_ARG(close != std::string::npos, "SLURM_JOB_NODELIST '{}': unbalanced '['", nodelist);
  std::string range = first.substr(open + 1, close - open - 1);
  range = range.substr(0, range.find(','));
  range = range.substr(0, range.find('-'));
  BRAID_CHECK_ARG(!range.empty(), "SLURM_JOB_NODELIST '{}': empty range", nodelist);
  return first.substr(0, open) + range + first.substr(close + 1);
}

LaunchInfo detect_launch() {
  // First match wins: mpirun inside a Slurm allocation sets both, and Open MPI's view describes this process.
  struct Source {
    const char* launcher;
    const char* rank_var;
    const char* size_var;
    const char* local_rank_var;
    const char* local_size_var;
  };
  static constexpr Source kSources[] = {
      {"mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
      {"env", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
  };
  LaunchInfo info;
  for (const Source& src : kSources) {
    if (!env::get(src.rank_var)) continue;
    info.launcher = src.launcher;
    info.rank = static_cast<int>(env::require_int(src.rank_var, "process rank"));
    info.world_size = static_cast<int>(env::require_int(src.size_var, "number of processes"));
    BRAID_CHECK_ARG(info.world_size >= 1, "{}={}: the job size must be at least 1", src.size_var, info.world_size);
    BRAID_CHECK_ARG(info.rank >= 0 && info.rank < info.world_size, "{} launch: {}={} is out of range: outside [0, {}={})",
                    src.launcher, src.rank_var, info.rank, src.size_var, info.world_size);
    info.local_rank = env_int_or(src.local_rank_var, -1);
    if (src.local_size_var != nullptr) info.local_world_size = env_int_or(src.local_size_var, -1);
    if (std::string_view(src.launcher) == "slurm") {
      if (auto nodes = env::get("SLURM_JOB_NODELIST")) info.master_addr = first_host_of_nodelist(*nodes);
    }
    break;
  }
  if (auto addr = env::get("MASTER_ADDR")) info.master_addr = *addr;
  info.master_port = env_int_or("MASTER_PORT", -1);
  return info;
}

Rendezvous rendezvous(const std::string& init_method, int rank, int world_size, Millis timeout) {
  const Url u = parse_url(init_method);
  const LaunchInfo launch = detect_launch();
  Rendezvous r;
  if (u.scheme == "env") {
    r.rank = rank >= 0 ? rank : launch.rank;
    r.world_size = world_size >= 0 ? world_size : launch.world_size;
    if (r.rank < 0) r.rank = static_cast<int>(env::require_int("RANK", "env:// rendezvous needs the process rank"));
    if (r.world_size < 0) {
      r.world_size = static_cast<int>(env::require_int("WORLD_SIZE", "env:// rendezvous needs the world size"));
    }
    check_rank(r.rank, r.world_size, init_method);
    const std::string addr = !launch.master_addr.empty()
                                 ? launch.master_addr
                                 : env::require("MASTER_ADDR", "env:// rendezvous needs the store host");
    const int port = launch.master_port > 0
                         ? launch.master_port
                         : static_cast<int>(env::require_int("MASTER_PORT", "env:// rendezvous needs the store port"));
    r.store = tcp_store(addr, port, r.rank, r.world_size, timeout);
  } else if (u.scheme == "tcp") {
    r.rank = resolve(rank, u, "rank", "RANK");
    r.world_size = resolve(world_size, u, "world_size", "WORLD_SIZE");
    if (r.rank < 0) r.rank = launch.rank;
    if (r.world_size < 0) r.world_size = launch.world_size;
    check_rank(r.rank, r.world_size, init_method);
    const size_t colon = u.rest.rfind(':');
    BRAID_CHECK_ARG(colon != std::string::npos && colon > 0, "init_method '{}': expected tcp://host:port",
                    init_method);
    const int port = static_cast<int>(env::parse_int(u.rest.substr(colon + 1), "tcp:// port"));
    r.store = tcp_store(u.rest.substr(0, colon), port, r.rank, r.world_size, timeout);
  } else if (u.scheme == "file") {
    r.rank = resolve(rank, u, "rank", "RANK");
    r.world_size = resolve(world_size, u, "world_size", "WORLD_SIZE");
    if (r.rank < 0) r.rank = launch.rank;
    if (r.world_size < 0) r.world_size = launch.world_size;
    check_rank(r.rank, r.world_size, init_method);
    BRAID_CHECK_ARG(!u.rest.empty(), "init_method '{}': expected file:///path", init_method);
    r.store = std::make_shared<FileStore>(u.rest, r.world_size, timeout);
  } else {
    BRAID_THROW(InvalidArgument, "init_method '{}': unknown scheme '{}' (expected env, tcp or file)", init_method,
                u.scheme);
  }
  return r;
}

}  // namespace braid::store
