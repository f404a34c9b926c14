// Batched READ throughput of the TCP data plane against a raw loopback copy
// (one connection, one thread per side, large blocking send/recv), which is
// the ceiling the data plane aims to reach within 70%.
//
//   transport_bench [seconds_per_case]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

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
double RawLoopback(size_t chunk, double seconds) {
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::vector<uint8_t> src(chunk, 1);
  std::thread sender([&] {
    tcp::socket s(io);
    acceptor.accept(s);
    s.set_option(tcp::no_delay(true));
    asio::error_code ec;
    while (!ec) asio::write(s, asio::buffer(src), ec);
  });
  tcp::socket s(io);
  s.connect(acceptor.local_endpoint());
  std::vector<uint8_t> dst(chunk);
  uint64_t bytes = 0;
  const auto start = Clock::now();
  while (Seconds(Clock::now() - start) < seconds) {
    asio::read(s, asio::buffer(dst));
    bytes += chunk;
  }
  const double elapsed = Seconds(Clock::now() - start);
  s.close();
  sender.join();
  return bytes / elapsed / 1e9;
}

double DataPlaneRead(size_t value_size, size_t batch, double seconds) {
  std::vector<uint8_t> segment(value_size * batch, 2);
  SegmentTable table;
  table.Add(1, {segment.data(), segment.size()});
  TcpDataServer server(&table, 2);
  if (!server.Start("127.0.0.1", 0).ok()) std::abort();
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  TcpDataClient client;
  std::vector<uint8_t> dst(value_size * batch);
  std::vector<ReadOp> ops(batch);
  uint64_t bytes = 0;
  const auto start = Clock::now();
  while (Seconds(Clock::now() - start) < seconds) {
    for (size_t i = 0; i < batch; ++i) {
      ops[i] = {1, i * value_size, value_size, dst.data() + i * value_size};
    }
    Status s = client.Read(endpoint, ops);
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
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  for (size_t value : {size_t{1} << 20, size_t{4} << 20}) {
    const double raw = kvpool::RawLoopback(value, seconds);
    for (size_t batch : {1, 16}) {
      const double dp = kvpool::DataPlaneRead(value, batch, seconds);
      std::printf(
          "value %4zu KiB batch %2zu: data plane %6.2f GB/s, raw %6.2f GB/s "
          "(%3.0f%%)\n",
          value >> 10, batch, dp, raw, 100 * dp / raw);
    }
  }
  return 0;
}
