// Batched READ throughput of the TCP data plane against a raw loopback copy
// (one connection, one thread per side, large blocking send/recv), which is
// the ceiling the data plane aims to reach within 70%. The raw copy runs with
// default socket buffers and with the data plane's 4 MiB ones, and the faster
// counts. Raw and data plane runs alternate and the median ratio is reported,
// so a noisy shared machine skews both sides alike.
//
// Then plaintext against TLS (a throwaway certificate made with the openssl
// command line) for 64 KiB and 1 MiB values.
//
//   transport_bench [seconds_per_run] [rounds]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "tests/tls_test_files.h"
#include "transport/segment_table.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"

namespace kvpool {
namespace {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Receiver pulls `chunk`-sized reads for `seconds`; returns GB/s.
double RawLoopback(size_t chunk, double seconds, int socket_buffer) {
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  if (socket_buffer > 0) {
    acceptor.set_option(asio::socket_base::send_buffer_size(socket_buffer));
    acceptor.set_option(asio::socket_base::receive_buffer_size(socket_buffer));
  }
  std::vector<uint8_t> src(chunk, 1);
  std::thread sender([&] {
    tcp::socket s(io);
    acceptor.accept(s);
    s.set_option(tcp::no_delay(true));
    asio::error_code ec;
    // Whole chunks per system call (Asio's default caps each at 64 KiB).
    auto whole = [](const asio::error_code& e, size_t) -> size_t {
      return e ? 0 : size_t{1} << 30;
    };
    while (!ec) asio::write(s, asio::buffer(src), whole, ec);
  });
  tcp::socket s(io);
  s.open(tcp::v4());
  if (socket_buffer > 0) {
    s.set_option(asio::socket_base::send_buffer_size(socket_buffer));
    s.set_option(asio::socket_base::receive_buffer_size(socket_buffer));
  }
  s.connect(acceptor.local_endpoint());
  std::vector<uint8_t> dst(chunk);
  uint64_t bytes = 0;
  const auto start = Clock::now();
  while (Seconds(Clock::now() - start) < seconds) {
    asio::read(s, asio::buffer(dst), [](const asio::error_code& e, size_t) {
      return e ? size_t{0} : size_t{1} << 30;
    });
    bytes += chunk;
  }
  const double elapsed = Seconds(Clock::now() - start);
  s.close();
  sender.join();
  return bytes / elapsed / 1e9;
}

// `tls` (if not null) makes both sides TLS.
double DataPlaneRead(size_t value_size, size_t batch, double seconds,
                     const TlsTestFiles* tls = nullptr) {
  std::vector<uint8_t> segment(value_size * batch, 2);
  SegmentTable table;
  table.Add(1, {segment.data(), segment.size()});
  TcpDataServerOptions server_options{.io_threads = 2};
  TcpDataClientOptions client_options;
  if (tls != nullptr) {
    server_options.tls_cert_file = (*tls)("server.pem");
    server_options.tls_key_file = (*tls)("server.key");
    client_options.tls_ca_file = (*tls)("ca.pem");
  }
  TcpDataServer server(&table, "bench-node", server_options);
  if (!server.Start("127.0.0.1", 0).ok()) std::abort();
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  TcpDataClient client(client_options);
  std::vector<uint8_t> dst(value_size * batch);
  std::vector<ReadOp> ops(batch);
  uint64_t bytes = 0;
  const auto start = Clock::now();
  while (Seconds(Clock::now() - start) < seconds) {
    for (size_t i = 0; i < batch; ++i) {
      ops[i] = {1, i * value_size, value_size, dst.data() + i * value_size};
    }
    Status s = client.Read(endpoint, "bench-node", ops);
    if (!s.ok() || ops[0].result != ErrorCode::OK) {
      std::fprintf(stderr, "read failed: %s\n", s.ToString().c_str());
      std::abort();
    }
    bytes += value_size * batch;
  }
  return bytes / Seconds(Clock::now() - start) / 1e9;
}

}  // namespace
}  // namespace kvpool

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  for (size_t value : {size_t{1} << 20, size_t{4} << 20}) {
    for (size_t batch : {1, 16}) {
      std::vector<double> ratios, dps, raws;
      for (int r = 0; r < rounds; ++r) {
        const double raw =
            std::max(kvpool::RawLoopback(value * batch, seconds, 0),
                     kvpool::RawLoopback(value * batch, seconds, 4 << 20));
        const double dp = kvpool::DataPlaneRead(value, batch, seconds);
        ratios.push_back(dp / raw);
        dps.push_back(dp);
        raws.push_back(raw);
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::printf(
          "value %4zu KiB batch %2zu: data plane %5.2f GB/s, raw %5.2f GB/s, "
          "median ratio %3.0f%%\n",
          value >> 10, batch, median(dps), median(raws), 100 * median(ratios));
    }
  }

  const kvpool::TlsTestFiles tls;
  if (!tls.ok()) {
    std::printf("TLS: skipped (the openssl command line failed)\n");
    return 0;
  }
  for (size_t value : {size_t{64} << 10, size_t{1} << 20}) {
    for (size_t batch : {1, 16}) {
      std::vector<double> plain, secure;
      for (int r = 0; r < rounds; ++r) {
        plain.push_back(kvpool::DataPlaneRead(value, batch, seconds));
        secure.push_back(kvpool::DataPlaneRead(value, batch, seconds, &tls));
      }
      std::sort(plain.begin(), plain.end());
      std::sort(secure.begin(), secure.end());
      const double p = plain[plain.size() / 2], t = secure[secure.size() / 2];
      std::printf(
          "value %4zu KiB batch %2zu: plaintext %5.2f GB/s, TLS %5.2f GB/s "
          "(%3.0f%%)\n",
          value >> 10, batch, p, t, 100 * t / p);
    }
  }
  return 0;
}
