// The handshake (security/handshake.h) over any Boost.Asio stream, as two asynchronous operations.
//
// Both call `done(HandshakeResult)` exactly once, on the stream's executor; the caller keeps the stream
// alive until then (its `done` usually holds the owner). Nothing else may read or write the stream until
// `done` runs. A server also needs its own deadline: a peer that sends nothing never completes a read.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/buffer.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <memory>
#include <string>

#include "security/handshake.h"

namespace braid::security {

struct HandshakeResult {
  enum Kind {
    kOk,
    kRejected,  // the peer's MAC is wrong: it does not hold this job's secret
    kNotBraid,  // the server's first bytes are no braid challenge
    kIoError    // the connection failed or closed mid-handshake (a wrong secret on the other side looks so)
  } kind = kOk;
  std::string detail;  // for kIoError: the error's message
  bool ok() const { return kind == kOk; }
  // "wrong or missing job secret", "...": what to put after "authentication failed: ".
  std::string describe() const {
    switch (kind) {
      case kOk: return "ok";
      case kRejected: return "the peer does not hold this job's secret (a wrong or missing BRAID_JOB_SECRET?)";
      case kNotBraid: return "the server is no braid server of this version (no braid challenge)";
      case kIoError: return "the connection closed during the handshake (" + detail + "); a peer with another job "
                            "secret closes it so";
    }
    return "?";
  }
};

template <class Stream, class Done>
void async_server_handshake(Stream& stream, const JobSecret& secret, Service service, Done done) {
  struct State {
    ServerHandshake hs;
    Response response{};
    Proof proof{};
    Done done;
  };
  auto st = std::make_shared<State>(State{ServerHandshake(secret, service), {}, {}, std::move(done)});
  namespace asio = boost::asio;
  auto fail_io = [st](const auto& ec) { st->done(HandshakeResult{HandshakeResult::kIoError, ec.message()}); };
  asio::async_write(stream, asio::buffer(st->hs.challenge()), [&stream, st, fail_io](const auto& ec, size_t) {
    if (ec) return fail_io(ec);
    asio::async_read(stream, asio::buffer(st->response), [&stream, st, fail_io](const auto& ec2, size_t) {
      if (ec2) return fail_io(ec2);
      auto proof = st->hs.verify(st->response);
      if (!proof) return st->done(HandshakeResult{HandshakeResult::kRejected, {}});
      st->proof = *proof;
      asio::async_write(stream, asio::buffer(st->proof), [st, fail_io](const auto& ec3, size_t) {
        if (ec3) return fail_io(ec3);
        st->done(HandshakeResult{});
      });
    });
  });
}

template <class Stream, class Done>
void async_client_handshake(Stream& stream, const JobSecret& secret, Service service, Done done) {
  struct State {
    ClientHandshake hs;
    Challenge challenge{};
    Response response{};
    Proof proof{};
    Done done;
  };
  auto st = std::make_shared<State>(State{ClientHandshake(secret, service), {}, {}, {}, std::move(done)});
  namespace asio = boost::asio;
  auto fail_io = [st](const auto& ec) { st->done(HandshakeResult{HandshakeResult::kIoError, ec.message()}); };
  asio::async_read(stream, asio::buffer(st->challenge), [&stream, st, fail_io](const auto& ec, size_t) {
    if (ec) return fail_io(ec);
    auto response = st->hs.respond(st->challenge);
    if (!response) return st->done(HandshakeResult{HandshakeResult::kNotBraid, {}});
    st->response = *response;
    asio::async_write(stream, asio::buffer(st->response), [&stream, st, fail_io](const auto& ec2, size_t) {
      if (ec2) return fail_io(ec2);
      asio::async_read(stream, asio::buffer(st->proof), [st, fail_io](const auto& ec3, size_t) {
        if (ec3) return fail_io(ec3);
        if (!st->hs.verify(st->proof)) return st->done(HandshakeResult{HandshakeResult::kRejected, {}});
        st->done(HandshakeResult{});
      });
    });
  });
}

}  // namespace braid::security
