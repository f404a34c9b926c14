// fuzz_master_rpc: every request type of the master's gRPC service
// (proto/kvpool.proto, src/master/master_grpc_service.h), handed to the
// handlers of an in-process MasterGrpcService in front of a MasterService
// (no sockets, no authorizer: every request reaches the logic). Each input
// gets a fresh master on a FakeClock with a small cluster already in it:
// three nodes and four segments (node-c's re-mounted and waiting for its
// DRAM directory), objects put and completed, a put and an upsert in
// progress, an SSD copy, SSD-only keys on two nodes (some with promotions
// queued, one staged, some with none yet) and pending offloads. Nothing is
// shared between inputs.
//
// Input: byte 0 = mode. Bits 5-6 choose a config variant (bit 5: tight
// limits; bit 6: other policies: random placement, offload at eviction,
// no capabilities, holders acknowledged before a put answers...). Bit 7
// clear: bits 0-4 are the request type and the rest of the input is that
// request message. Bit 7 set: the rest is a sequence of up to 12 records
// [type byte][length byte][message], the type being bits 0-5 of its byte
// modulo 33. Types 0-28 are the RPCs in the order of Rpcs() below; 29-31
// are steps of the world instead of RPCs (the clock advances and
// housekeeping runs; an eviction pass; the nodes heartbeat and run the
// tasks they are handed, per the record's bytes); 32 is MountExtraSegment
// (the RPC added after the others; records only, so that every existing
// input keeps its meaning).
//
// Structure: a string field of one byte naming a key, tenant or node is
// replaced by one of the names the cluster knows (kKeys, kTenants, kNodes),
// so mutations reach existing objects, tasks and nodes often.
//
// Invariants checked after every call (docs/fuzzing.md):
//  1. The handler returns OK (auth is off; no batch can reach the 65536
//     bound in 4 KiB), and every error code in the reply is one of the
//     codes of include/kvpool/status.h.
//  2. Replies are well formed: one result per item of a batch; a put's
//     replicas are PROCESSING MEMORY ranges of its size on distinct
//     segments, a get's are COMPLETE with MEMORY first; every MEMORY
//     descriptor lies inside a mounted segment of its node (and carries a
//     capability when the segment has a key); every LOCAL_DISK one names a
//     known node. Exist answers OK exactly for keys with a COMPLETE
//     replica; a removed key is gone; a completed put is readable; a
//     mounted segment is there with its size, an unmounted one is not.
//     An extra segment (MountExtraSegment) is mounted closed, as an extra
//     segment of a node the master knows, with its size and path; opened,
//     it is open (unless mounted as a remount, whose leases must run out
//     first); a refused mount or open changes no segment. No put or
//     promotion is ever granted a range in a closed segment.
//  3. The master's state: every segment's used bytes <= its size; every
//     object (all are found by name: the harness knows every name a
//     request could have created) has a replica and a size, its MEMORY
//     replicas lie inside mounted segments and no two overlap, their bytes
//     (rounded to the allocator's 64) add up to at most the segment's used
//     bytes; its LOCAL_DISK replicas name known nodes; the number of
//     objects found equals Stats().objects; promotions admitted ==
//     completed + failed + cancelled + expired + in flight; tenants <=
//     max_tenants.
//  4. At the end of the input, once every object is removed (forced),
//     every put revoked and the clock has run past every lease, grace and
//     timeout with the nodes heartbeating: no object, no tenant, no
//     promotion in flight, no graveyard range, no held byte, and every
//     segment's used bytes back to 0 (no range leaked).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/test/default_reactor_test_peer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "kvpool.grpc.pb.h"
#include "master/master_grpc_service.h"
#include "master/master_service.h"

namespace {

using namespace kvpool;
namespace pb = google::protobuf;

std::string g_context;  // the call being checked, for the failure message

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s (%s)\n", what.c_str(),
               g_context.c_str());
  std::abort();
}

// ---- the names the cluster knows; one-byte strings are mapped onto them.

const char* const kKeys[] = {"k0", "k1", "k2", "k3", "p0",
                             "u0", "d0", "d1", "d2", "d3"};
const char* const kTenants[] = {"", "t1", "default", "t2"};
const char* const kNodes[] = {"node-a", "node-b", "node-c", "node-x"};

enum class NameKind { kNone, kKey, kTenant, kNode };

NameKind KindOf(const std::string& field) {
  if (field == "key" || field == "keys") return NameKind::kKey;
  if (field == "tenant") return NameKind::kTenant;
  if (field == "node_id" || field == "preferred_segment" ||
      field == "preferred_segments" || field == "excluded_nodes")
    return NameKind::kNode;
  return NameKind::kNone;
}

std::string Known(NameKind k, uint8_t b) {
  switch (k) {
    case NameKind::kKey:
      return kKeys[b % std::size(kKeys)];
    case NameKind::kTenant:
      return kTenants[b % std::size(kTenants)];
    default:
      return kNodes[b % std::size(kNodes)];
  }
}

void Remap(pb::Message* m) {
  const pb::Descriptor* d = m->GetDescriptor();
  const pb::Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(*m, f); ++j)
          Remap(r->MutableRepeatedMessage(m, f, j));
      } else if (r->HasField(*m, f)) {
        Remap(r->MutableMessage(m, f));
      }
      continue;
    }
    if (f->type() != pb::FieldDescriptor::TYPE_STRING) continue;
    const NameKind k = KindOf(f->name());
    if (k == NameKind::kNone) continue;
    if (f->is_repeated()) {
      for (int j = 0; j < r->FieldSize(*m, f); ++j) {
        const std::string v = r->GetRepeatedString(*m, f, j);
        if (v.size() == 1) r->SetRepeatedString(m, f, j, Known(k, v[0]));
      }
    } else {
      const std::string v = r->GetString(*m, f);
      if (v.size() == 1) r->SetString(m, f, Known(k, v[0]));
    }
  }
}

std::string Norm(const std::string& tenant) {
  return tenant.empty() ? std::string(kDefaultTenant) : tenant;
}

// Every (tenant, key) and node id a request names: the objects a request
// can create are among them, so the harness can find every object.
struct Names {
  std::set<std::pair<std::string, std::string>> objects;
  std::set<std::string> nodes;
};

void Collect(const pb::Message& m, Names* n) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  std::string tenant;
  if (const pb::FieldDescriptor* t = d->FindFieldByName("tenant"))
    tenant = Norm(r->GetString(m, t));
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(m, f); ++j)
          Collect(r->GetRepeatedMessage(m, f, j), n);
      } else if (r->HasField(m, f)) {
        Collect(r->GetMessage(m, f), n);
      }
      continue;
    }
    if (f->type() != pb::FieldDescriptor::TYPE_STRING) continue;
    const NameKind k = KindOf(f->name());
    std::vector<std::string> vals;
    if (f->is_repeated()) {
      for (int j = 0; j < r->FieldSize(m, f); ++j)
        vals.push_back(r->GetRepeatedString(m, f, j));
    } else {
      vals.push_back(r->GetString(m, f));
    }
    for (auto& v : vals) {
      if (k == NameKind::kKey) n->objects.emplace(tenant, v);
      if (k == NameKind::kNode) n->nodes.insert(v);
    }
  }
}

// Every error code anywhere in a reply is a defined one.
void CheckCodes(const pb::Message& m) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  auto known = [](int32_t v) {
    if (std::strcmp(ErrorCodeName(static_cast<ErrorCode>(v)),
                    "UNKNOWN_ERROR") == 0)
      Fail("reply carries an undefined error code " + std::to_string(v));
  };
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(m, f); ++j)
          CheckCodes(r->GetRepeatedMessage(m, f, j));
      } else if (r->HasField(m, f)) {
        CheckCodes(r->GetMessage(m, f));
      }
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32 &&
               (f->name() == "error_code" || f->name() == "error_codes")) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(m, f); ++j)
          known(r->GetRepeatedInt32(m, f, j));
      } else {
        known(r->GetInt32(m, f));
      }
    }
  }
}

// ---- the world: a fresh master per input

MasterConfig MakeConfig(uint8_t variant) {
  MasterConfig c;
  c.enable_offload = true;
  c.promotion_on_hit = true;
  c.promotion_admission_threshold = 1;
  c.enable_prefetch_trigger = true;
  c.promotion_max_per_heartbeat = 4;
  // Real-time waits, off but in variant 2 (each costs a real millisecond
  // there): a put waiting for offloads to make room; a remove, upsert or put
  // waiting for holders that never acknowledge.
  c.holder_ack_timeout_ms = 0;
  c.put_offload_wait_ms = 0;
  // Few slots: zeroing the production table (8 MiB) per input would bound
  // the run to tens of inputs a second, and keys sharing a slot is a case
  // worth exercising.
  c.version_floor_slots = 64;
  if (variant & 1) {
    c.max_tenants = 2;
    c.max_key_bytes = 64;
    c.max_tenant_name_bytes = 8;
    c.offloading_queue_limit = 2;
    c.promotion_queue_limit = 3;
  }
  if (variant & 2) {
    c.allocation_strategy = "random";
    c.offload_on_evict = true;
    c.offload_force_evict = true;
    c.data_capabilities = false;
    c.prefetch_strict_buffer = false;
    c.prefetch_consumed_lease_ms = 100;
    c.put_waits_for_holders = true;
    c.holder_ack_timeout_ms = 1;
    c.put_offload_wait_ms = 1;
    c.allow_evict_soft_pinned_objects = false;
    c.eviction_high_watermark_ratio = 0.5;
  }
  return c;
}

struct World {
  explicit World(uint8_t variant)
      : config(MakeConfig(variant)),
        svc(std::make_unique<MasterService>(config, &clock)),
        grpc(std::make_unique<MasterGrpcService>(svc.get())) {
    for (const char* n : kNodes) names.nodes.insert(n);
    for (const char* t : kTenants)
      for (const char* k : kKeys) names.objects.emplace(Norm(t), k);
  }
  MasterConfig config;
  FakeClock clock;
  std::unique_ptr<MasterService> svc;
  std::unique_ptr<MasterGrpcService> grpc;
  Names names;
  // Extra segments mounted by the input: id -> mounted with `remount`.
  std::map<uint32_t, bool> extras;
};

void SetUpCluster(World& w) {
  MasterService& s = *w.svc;
  auto mount = [&](const std::string& node, SegmentKind kind, uint64_t size,
                   bool pulls, bool remount, bool keeps) {
    SegmentInfo i;
    i.node_id = node;
    i.kind = kind;
    i.capacity = size;
    i.host_id = "host-" + node;
    i.shm_path = "/kvpool-" + node;
    i.data_endpoint = node + ":7000";
    if (!s.MountSegment(i, /*ssd_enabled=*/node != "node-c", pulls, remount,
                        keeps)
             .ok())
      Fail("setup: mount");
  };
  mount("node-a", SegmentKind::kMain, 1 << 20, false, false, false);  // 1
  mount("node-b", SegmentKind::kMain, 1 << 20, true, false, true);    // 2
  mount("node-b", SegmentKind::kPrefetchBuffer, 256 << 10, true, false,
        true);  // 3
  auto put = [&](const std::string& t, const std::string& k, uint64_t size,
                 PutOptions o, bool end) {
    // A variant's limits may refuse a setup put; the world is what is left.
    if (s.PutStart(t, k, size, o).ok() && end) s.PutEnd(t, k).IgnoreError();
  };
  PutOptions on_a;
  on_a.preferred_node = "node-a";
  put("", "k0", 4096, on_a, true);
  PutOptions two;
  two.replica_num = 2;
  put("", "k1", 65536, two, true);
  PutOptions soft;
  soft.soft_pin = true;
  put("", "k2", 1000, soft, true);
  PutOptions hard;
  hard.hard_pin = true;
  hard.preferred_node = "node-b";
  put("", "k3", 100, hard, true);
  put("t1", "k0", 512, {}, true);
  put("", "p0", 2048, {}, false);
  put("", "u0", 300, on_a, true);
  PutOptions up;
  up.upsert = true;
  put("", "u0", 600, up, false);
  // node-a copies k0 to its SSD (the offload PutEnd queued).
  NodeTasks tasks;
  s.Heartbeat("node-a", 0, 64, &tasks).IgnoreError();  // no tasks if refused
  for (const auto& t : tasks.offloads) {
    if (t.key == "k0" && t.tenant == kDefaultTenant)
      s.NotifyOffload("node-a", {{"", "k0", t.version, ErrorCode::OK}});
  }
  // SSD-only keys; promotions queued (task 1: router d0, 2: on-hit d1, both
  // still in node-a's mailbox; 3: exist t1/d0) and one staged (d1). d2 (on
  // node-b, which has a prefetch buffer) and d3 (node-a) have none yet.
  s.RegisterDiskObjects(
      "node-a", {{"", "d0", 8192, 0}, {"", "d1", 300, 0}, {"", "d3", 1500, 0}});
  s.RegisterDiskObjects("node-b", {{"t1", "d0", 4096, 0}, {"", "d2", 2500, 0}});
  (void)s.BatchPrefetchToMemory("", {"d0"}, 0);
  (void)s.GetReplicaList("", "d1");
  (void)s.PromotionAllocStart("node-a", "", "d1", 300, 2);
  (void)s.RegisterPrefetchTask("node-b", "t1", {"d0"});
  (void)s.GetReplicaList("", "k0");  // a reader's lease
  // A node re-mounted after a master restart, its directory not yet in.
  mount("node-c", SegmentKind::kMain, 512 << 10, false, true, true);  // 4
}

// ---- checks of the state

struct Range {
  unsigned __int128 begin, end;
};

void CheckState(World& w) {
  MasterService& s = *w.svc;
  const MasterStats st = s.Stats();
  std::map<uint32_t, SegmentSnapshot> segs;
  for (const auto& seg : st.segments) {
    if (seg.used > seg.info.capacity)
      Fail("segment " + std::to_string(seg.info.id) +
           " has more bytes in use than its size");
    segs[seg.info.id] = seg;
  }
  uint64_t found = 0;
  std::map<uint32_t, std::vector<Range>> ranges;
  for (const auto& [tenant, key] : w.names.objects) {
    const QueryResult q = s.QueryReadOnly(tenant, key);
    if (q.code != ErrorCode::OK) continue;
    ++found;
    if (q.size == 0) Fail("an object of size 0");
    if (q.replicas.empty()) Fail("an object without replicas");
    for (const ReplicaDesc& r : q.replicas) {
      if (r.kind == ReplicaKind::kLocalDisk) {
        if (!r.holder) Fail("a LOCAL_DISK replica on an unknown node");
        continue;
      }
      if (r.kind != ReplicaKind::kMemory) Fail("a replica of no kind");
      if (!r.segment) Fail("a MEMORY replica on an unmounted segment");
      if (r.offset > r.segment->capacity ||
          q.size > r.segment->capacity - r.offset)
        Fail("a MEMORY replica past its segment's end");
      const unsigned __int128 b = r.offset;
      ranges[r.segment->id].push_back(Range{b, b + ((q.size + 63) / 64) * 64});
    }
  }
  if (found != st.objects)
    Fail("Stats() counts " + std::to_string(st.objects) +
         " objects, the names find " + std::to_string(found));
  for (auto& [id, rs] : ranges) {
    std::sort(rs.begin(), rs.end(),
              [](const Range& a, const Range& b) { return a.begin < b.begin; });
    unsigned __int128 sum = 0;
    for (size_t i = 0; i < rs.size(); ++i) {
      if (i > 0 && rs[i].begin < rs[i - 1].end)
        Fail("two MEMORY replicas overlap in segment " + std::to_string(id));
      sum += rs[i].end - rs[i].begin;
    }
    auto seg = segs.find(id);
    if (seg == segs.end()) Fail("a replica's segment is not in Stats()");
    if (sum > seg->second.used)
      Fail("segment " + std::to_string(id) +
           " counts fewer used bytes than its replicas hold");
  }
  const PromotionCounters p = s.promotion_counters();
  if (p.admitted !=
      p.completed + p.failed + p.cancelled + p.expired + p.in_flight)
    Fail("promotion counters do not add up");
  if (s.tenant_count() > static_cast<size_t>(w.config.max_tenants))
    Fail("more tenants than max_tenants");
}

// A replica descriptor of a reply. `signed_op`: the reply grants an op
// (get, put, promotion), so a MEMORY range of a segment with a key carries
// a capability.
void CheckDescriptor(World& w, const rpc::ReplicaDescriptor& d,
                     bool signed_op) {
  if (d.kind() != rpc::MEMORY && d.kind() != rpc::LOCAL_DISK)
    Fail("descriptor of an undefined kind");
  if (d.status() != rpc::PROCESSING && d.status() != rpc::COMPLETE)
    Fail("descriptor of an undefined status");
  if (d.kind() == rpc::LOCAL_DISK) {
    if (!w.svc->nodes().IndexOf(d.disk_node_id()))
      Fail("LOCAL_DISK descriptor of an unknown node");
    return;
  }
  if (!d.has_memory()) Fail("MEMORY descriptor without a location");
  const auto& m = d.memory();
  if (m.segment_id() > UINT32_MAX) Fail("segment id past 32 bits");
  auto seg = w.svc->segments().Info(static_cast<uint32_t>(m.segment_id()));
  if (!seg) Fail("MEMORY descriptor of an unmounted segment");
  if (m.length() == 0 || m.offset() > seg->capacity ||
      m.length() > seg->capacity - m.offset())
    Fail("MEMORY descriptor outside its segment");
  if (m.segment_size() != 0 && m.segment_size() != seg->capacity)
    Fail("MEMORY descriptor with another segment size");
  if (!m.node_id().empty() && m.node_id() != seg->node_id)
    Fail("MEMORY descriptor of another node");
  if (signed_op && seg->cap_key && m.capability().empty())
    Fail("MEMORY descriptor without the capability its segment needs");
}

// A range newly granted for writing (a put, a promotion) is never in a
// closed segment: one an extra segment's node does not serve yet, or whose
// earlier leases have not run out.
void CheckOpen(World& w, const rpc::ReplicaDescriptor& d) {
  if (d.kind() == rpc::MEMORY &&
      w.svc->segments().IsClosed(
          static_cast<uint32_t>(d.memory().segment_id())))
    Fail("a range granted in a closed segment");
}

bool HasComplete(const QueryResult& q) {
  if (q.code != ErrorCode::OK) return false;
  for (const auto& r : q.replicas) {
    if (r.status == ReplicaStatus::kComplete) return true;
  }
  return false;
}

// ---- the RPCs

// Input types: 0-28 the first RPCs of Rpcs(), 29-31 steps of the world, 32
// MountExtraSegment (Rpcs()[29]; reached from sequences only).
constexpr size_t kFirstStepType = 29;
constexpr size_t kMountExtraType = 32;
constexpr size_t kTypes = 33;

size_t RpcIndex(size_t type) { return type < kFirstStepType ? type : type - 3; }

struct Rpc {
  const char* name;
  std::function<std::unique_ptr<pb::Message>()> make;
  std::function<grpc::Status(MasterGrpcService&, const pb::Message&,
                             pb::Message*)>
      call;
  std::function<std::unique_ptr<pb::Message>()> make_reply;
};

template <typename Req, typename Resp>
Rpc Sync(const char* name,
         grpc::Status (MasterGrpcService::*method)(grpc::ServerContext*,
                                                   const Req*, Resp*)) {
  return Rpc{
      name, [] { return std::make_unique<Req>(); },
      [method](MasterGrpcService& g, const pb::Message& req, pb::Message* out) {
        grpc::ServerContext ctx;
        return (g.*method)(&ctx, static_cast<const Req*>(&req),
                           static_cast<Resp*>(out));
      },
      [] { return std::make_unique<Resp>(); }};
}

Rpc QueryRpc() {
  return Rpc{
      "BatchQueryReadOnly",
      [] { return std::make_unique<rpc::BatchKeyRequest>(); },
      [](MasterGrpcService& g, const pb::Message& req, pb::Message* out) {
        grpc::CallbackServerContext ctx;
        grpc::testing::DefaultReactorTestPeer peer(&ctx);
        grpc::ServerUnaryReactor* r = g.BatchQueryReadOnly(
            &ctx, static_cast<const rpc::BatchKeyRequest*>(&req),
            static_cast<rpc::BatchQueryReadOnlyResponse*>(out));
        if (r != peer.reactor() || !peer.test_status_set())
          Fail("BatchQueryReadOnly did not finish its reactor");
        return peer.test_status();
      },
      [] { return std::make_unique<rpc::BatchQueryReadOnlyResponse>(); }};
}

using G = MasterGrpcService;
const std::vector<Rpc>& Rpcs() {
  static const std::vector<Rpc> rpcs = {
      Sync("MountSegment", &G::MountSegment),                          // 0
      Sync("UnmountSegment", &G::UnmountSegment),                      // 1
      Sync("Heartbeat", &G::Heartbeat),                                // 2
      Sync("PullPromotionTasks", &G::PullPromotionTasks),              // 3
      Sync("PutStart", &G::PutStart),                                  // 4
      Sync("BatchPutStart", &G::BatchPutStart),                        // 5
      Sync("PutEnd", &G::PutEnd),                                      // 6
      Sync("BatchPutEnd", &G::BatchPutEnd),                            // 7
      Sync("PutRevoke", &G::PutRevoke),                                // 8
      Sync("BatchPutRevoke", &G::BatchPutRevoke),                      // 9
      Sync("GetReplicaList", &G::GetReplicaList),                      // 10
      Sync("BatchGetReplicaList", &G::BatchGetReplicaList),            // 11
      Sync("ExistKey", &G::ExistKey),                                  // 12
      Sync("BatchExistKey", &G::BatchExistKey),                        // 13
      Sync("Remove", &G::Remove),                                      // 14
      Sync("RemoveAll", &G::RemoveAll),                                // 15
      Sync("BatchRemove", &G::BatchRemove),                            // 16
      QueryRpc(),                                                      // 17
      Sync("GetClusterStats", &G::GetClusterStats),                    // 18
      Sync("NotifyOffload", &G::NotifyOffload),                        // 19
      Sync("RegisterMemoryObjects", &G::RegisterMemoryObjects),        // 20
      Sync("RegisterDiskObjects", &G::RegisterDiskObjects),            // 21
      Sync("RemoveDiskReplicas", &G::RemoveDiskReplicas),              // 22
      Sync("PromotionAllocStart", &G::PromotionAllocStart),            // 23
      Sync("NotifyPromotion", &G::NotifyPromotion),                    // 24
      Sync("BatchPromotionAllocStart", &G::BatchPromotionAllocStart),  // 25
      Sync("BatchPromotionNotify", &G::BatchPromotionNotify),          // 26
      Sync("RegisterPrefetchTask", &G::RegisterPrefetchTask),          // 27
      Sync("BatchPrefetchToMemory", &G::BatchPrefetchToMemory),        // 28
      // Type 32 (29-31 are the steps of the world).
      Sync("MountExtraSegment", &G::MountExtraSegment),  // 29
  };
  return rpcs;
}

template <typename T>
const T& As(const pb::Message& m) {
  return static_cast<const T&>(m);
}

void SameCount(int got, int want, const char* what) {
  if (got != want)
    Fail(std::string(what) + ": " + std::to_string(got) + " results for " +
         std::to_string(want) + " items");
}

// Checks of one reply against its request and the state right after.
void CheckReply(World& w, size_t type, const pb::Message& req,
                const pb::Message& resp, const MasterStats& before) {
  MasterService& s = *w.svc;
  CheckCodes(resp);
  switch (type) {
    case 0: {  // MountSegment
      const auto& q = As<rpc::MountSegmentRequest>(req);
      const auto& r = As<rpc::MountSegmentResponse>(resp);
      if (r.error_code() != 0) break;
      auto seg = s.segments().Info(static_cast<uint32_t>(r.segment_id()));
      if (!seg || seg->capacity != q.size() || seg->node_id != q.node_id())
        Fail("a mounted segment is not there as asked");
      if (!r.capability_key().empty() &&
          r.capability_key().size() != cap::kKeySize)
        Fail("a capability key of the wrong size");
      break;
    }
    case 1: {  // UnmountSegment
      const auto& q = As<rpc::UnmountSegmentRequest>(req);
      if (As<rpc::UnmountSegmentResponse>(resp).error_code() == 0 &&
          s.segments().IsMounted(static_cast<uint32_t>(q.segment_id())))
        Fail("an unmounted segment is still mounted");
      break;
    }
    case 4: {  // PutStart
      const auto& q = As<rpc::PutStartRequest>(req);
      const auto& r = As<rpc::PutStartResponse>(resp);
      if (r.error_code() != 0) {
        if (r.replicas_size() != 0) Fail("a refused put with replicas");
        break;
      }
      const int want = q.config().replica_num() == 0
                           ? 1
                           : static_cast<int>(q.config().replica_num());
      if (r.replicas_size() < 1 || r.replicas_size() > want)
        Fail("a put with the wrong number of replicas");
      std::set<uint64_t> seen;
      for (const auto& d : r.replicas()) {
        CheckDescriptor(w, d, true);
        if (d.kind() != rpc::MEMORY || d.status() != rpc::PROCESSING ||
            d.memory().length() != q.size())
          Fail("a put's replica is not a PROCESSING range of its size");
        if (!seen.insert(d.memory().segment_id()).second)
          Fail("two replicas of a put on one segment");
        CheckOpen(w, d);
      }
      break;
    }
    case 5:  // BatchPutStart
      SameCount(As<rpc::BatchPutStartResponse>(resp).items_size(),
                As<rpc::BatchPutStartRequest>(req).items_size(),
                "BatchPutStart");
      for (const auto& item : As<rpc::BatchPutStartResponse>(resp).items()) {
        for (const auto& d : item.replicas()) {
          CheckDescriptor(w, d, true);
          CheckOpen(w, d);
        }
      }
      break;
    case 6: {  // PutEnd
      const auto& q = As<rpc::KeyRequest>(req);
      if (As<rpc::KeyStatus>(resp).error_code() == 0 &&
          !HasComplete(s.QueryReadOnly(q.tenant(), q.key())))
        Fail("a completed put is not readable");
      break;
    }
    case 7:
    case 9:
    case 16: {  // BatchPutEnd, BatchPutRevoke, BatchRemove
      const int keys = type == 16 ? As<rpc::BatchRemoveRequest>(req).keys_size()
                                  : As<rpc::BatchKeyRequest>(req).keys_size();
      SameCount(As<rpc::BatchKeyStatus>(resp).error_codes_size(), keys,
                "batch of keys");
      break;
    }
    case 10:
    case 11: {  // GetReplicaList, BatchGetReplicaList
      std::vector<const rpc::GetReplicaListResponse*> items;
      if (type == 10) {
        items.push_back(&As<rpc::GetReplicaListResponse>(resp));
      } else {
        const auto& r = As<rpc::BatchGetReplicaListResponse>(resp);
        SameCount(r.items_size(), As<rpc::BatchKeyRequest>(req).keys_size(),
                  "BatchGetReplicaList");
        for (const auto& i : r.items()) items.push_back(&i);
      }
      for (const auto* g : items) {
        if (g->master_incarnation() != s.incarnation())
          Fail("a get reply of another incarnation");
        if (g->error_code() != 0) {
          if (g->replicas_size() != 0) Fail("a failed get with replicas");
          continue;
        }
        if (g->size() == 0 || g->replicas_size() == 0 || g->lease_ttl_ms() == 0)
          Fail("a get without size, replicas or lease");
        bool disk_seen = false;
        for (const auto& d : g->replicas()) {
          CheckDescriptor(w, d, true);
          if (d.status() != rpc::COMPLETE) Fail("a get of a PROCESSING range");
          if (d.kind() == rpc::LOCAL_DISK) disk_seen = true;
          if (d.kind() == rpc::MEMORY && disk_seen)
            Fail("a get lists MEMORY after LOCAL_DISK");
          if (d.kind() == rpc::MEMORY && d.memory().length() != g->size())
            Fail("a get's range is not the object's size");
        }
      }
      break;
    }
    case 12:
    case 13: {  // ExistKey, BatchExistKey
      const auto& q = As<rpc::ExistKeyRequest>(req);
      const auto& r = As<rpc::ExistKeyResponse>(resp);
      SameCount(r.error_codes_size(), q.keys_size(), "ExistKey");
      for (int i = 0; i < q.keys_size(); ++i) {
        const bool ok = r.error_codes(i) == 0;
        if (ok != HasComplete(s.QueryReadOnly(q.tenant(), q.keys(i))))
          Fail("exist disagrees with the object's replicas");
      }
      break;
    }
    case 14: {  // Remove
      const auto& q = As<rpc::RemoveRequest>(req);
      if (As<rpc::KeyStatus>(resp).error_code() == 0 &&
          s.QueryReadOnly(q.tenant(), q.key()).code !=
              ErrorCode::OBJECT_NOT_FOUND)
        Fail("a removed key is still there");
      break;
    }
    case 15: {  // RemoveAll
      const auto& r = As<rpc::RemoveAllResponse>(resp);
      if (r.error_code() == 0 && r.removed() > before.objects)
        Fail("remove_all removed more objects than there were");
      break;
    }
    case 17: {  // BatchQueryReadOnly
      const auto& q = As<rpc::BatchKeyRequest>(req);
      const auto& r = As<rpc::BatchQueryReadOnlyResponse>(resp);
      SameCount(r.items_size(), q.keys_size(), "BatchQueryReadOnly");
      for (const auto& item : r.items()) {
        if (item.error_code() != 0 && item.replicas_size() != 0)
          Fail("a failed lookup with replicas");
        for (const auto& d : item.replicas()) {
          CheckDescriptor(w, d, false);
          if (d.kind() == rpc::MEMORY && d.memory().length() != item.size())
            Fail("a lookup's range is not the object's size");
        }
      }
      std::set<uint64_t> listed;
      for (const auto& seg : r.segments()) {
        if (!listed.insert(seg.segment_id()).second)
          Fail("a segment described twice");
      }
      for (const auto& item : r.items())
        for (const auto& d : item.replicas())
          if (d.kind() == rpc::MEMORY && !listed.count(d.memory().segment_id()))
            Fail("a lookup's segment is not described");
      break;
    }
    case 18: {  // GetClusterStats
      const auto& r = As<rpc::ClusterStatsResponse>(resp);
      const MasterStats now = s.Stats();
      if (r.objects() != now.objects ||
          r.segments_size() != static_cast<int>(now.segments.size()))
        Fail("cluster stats differ from Stats()");
      for (const auto& seg : r.segments())
        if (seg.used() > seg.capacity()) Fail("stats: used > capacity");
      break;
    }
    case 19:
      SameCount(As<rpc::NotifyOffloadResponse>(resp).error_codes_size(),
                As<rpc::NotifyOffloadRequest>(req).results_size(),
                "NotifyOffload");
      break;
    case 20: {
      const auto& r = As<rpc::RegisterMemoryObjectsResponse>(resp);
      SameCount(r.error_codes_size(),
                r.error_code() == 0
                    ? As<rpc::RegisterMemoryObjectsRequest>(req).objects_size()
                    : 0,
                "RegisterMemoryObjects");
      break;
    }
    case 21:
      SameCount(As<rpc::RegisterDiskObjectsResponse>(resp).error_codes_size(),
                As<rpc::RegisterDiskObjectsRequest>(req).objects_size(),
                "RegisterDiskObjects");
      break;
    case 22:
      SameCount(As<rpc::RemoveDiskReplicasResponse>(resp).error_codes_size(),
                As<rpc::RemoveDiskReplicasRequest>(req).objects_size(),
                "RemoveDiskReplicas");
      break;
    case 23:
    case 25: {  // PromotionAllocStart, BatchPromotionAllocStart
      std::vector<std::pair<const rpc::PromotionAllocStartRequest*,
                            const rpc::PromotionAllocStartResponse*>>
          items;
      if (type == 23) {
        items.emplace_back(&As<rpc::PromotionAllocStartRequest>(req),
                           &As<rpc::PromotionAllocStartResponse>(resp));
      } else {
        const auto& q = As<rpc::BatchPromotionAllocStartRequest>(req);
        const auto& r = As<rpc::BatchPromotionAllocStartResponse>(resp);
        SameCount(r.items_size(), q.items_size(), "BatchPromotionAllocStart");
        for (int i = 0; i < q.items_size(); ++i)
          items.emplace_back(&q.items(i), &r.items(i));
      }
      for (const auto& [q, r] : items) {
        if (r->error_code() != 0) continue;
        CheckDescriptor(w, r->replica(), true);
        CheckOpen(w, r->replica());
        if (r->replica().kind() != rpc::MEMORY ||
            r->replica().status() != rpc::PROCESSING ||
            r->replica().memory().length() != q->size())
          Fail("a promotion's range is not a PROCESSING range of its size");
      }
      break;
    }
    case 26:
      SameCount(As<rpc::BatchPromotionNotifyResponse>(resp).error_codes_size(),
                As<rpc::BatchPromotionNotifyRequest>(req).items_size(),
                "BatchPromotionNotify");
      break;
    case 27:
      SameCount(As<rpc::RegisterPrefetchTaskResponse>(resp).results_size(),
                As<rpc::RegisterPrefetchTaskRequest>(req).keys_size(),
                "RegisterPrefetchTask");
      break;
    case 28: {
      const auto& q = As<rpc::BatchPrefetchToMemoryRequest>(req);
      const auto& r = As<rpc::BatchPrefetchToMemoryResponse>(resp);
      if (r.error_code() != 0) {
        if (r.statuses_size() != 0) Fail("a refused prefetch with statuses");
        break;
      }
      SameCount(r.statuses_size(), q.keys_size(), "BatchPrefetchToMemory");
      for (int st : r.statuses())
        if (st < rpc::IN_MEMORY || st > rpc::NOT_FOUND)
          Fail("an undefined prefetch status");
      break;
    }
    case kMountExtraType: {
      const auto& q = As<rpc::MountExtraSegmentRequest>(req);
      const auto& r = As<rpc::MountSegmentResponse>(resp);
      const auto idx = s.nodes().IndexOf(q.node_id());
      const bool known_node = idx && s.nodes().Info(*idx) != nullptr;
      // An id the open call may name: an extra segment of this node.
      auto is_extra_of_node = [&](uint64_t id) {
        if (id == 0 || id > UINT32_MAX) return false;
        auto seg = s.segments().Info(static_cast<uint32_t>(id));
        return seg && seg->extra && seg->node_id == q.node_id();
      };
      if (r.error_code() != 0) {
        if (s.Stats().segments.size() != before.segments.size())
          Fail("a refused MountExtraSegment changed the segments");
        if (r.segment_id() != 0) Fail("a refused MountExtraSegment has an id");
        if (q.open_segment_id() == 0 && q.size() != 0 &&
            q.shm_path().size() <= 4096 && known_node)
          Fail("a valid extra segment of a known node was refused");
        if (q.open_segment_id() != 0 && is_extra_of_node(q.open_segment_id()))
          Fail("the open of an extra segment of the node was refused");
        break;
      }
      if (q.open_segment_id() != 0) {
        // The second call: opens one of the node's extra segments.
        if (r.segment_id() != q.open_segment_id())
          Fail("an opened extra segment answers another id");
        if (!is_extra_of_node(r.segment_id()))
          Fail("opened a segment that is not an extra one of the node");
        auto it = w.extras.find(static_cast<uint32_t>(r.segment_id()));
        if (it != w.extras.end() && !it->second &&
            s.segments().IsClosed(static_cast<uint32_t>(r.segment_id())))
          Fail("an opened extra segment is still closed");
        break;
      }
      if (!known_node) Fail("an extra segment of an unknown node");
      if (r.segment_id() == 0 || r.segment_id() > UINT32_MAX)
        Fail("an extra segment without a valid id");
      const auto id = static_cast<uint32_t>(r.segment_id());
      auto seg = s.segments().Info(id);
      if (!seg || !seg->extra || seg->capacity != q.size() ||
          seg->node_id != q.node_id() || seg->shm_path != q.shm_path() ||
          seg->kind != SegmentKind::kMain)
        Fail("a mounted extra segment is not there as asked");
      if (!s.segments().IsClosed(id))
        Fail("an extra segment mounted open (before its node serves it)");
      if (!r.capability_key().empty())
        Fail("an extra segment's reply carries a key");
      if (s.Stats().segments.size() != before.segments.size() + 1)
        Fail("MountExtraSegment mounted other than one segment");
      w.extras[id] = q.remount();
      break;
    }
    default:
      break;
  }
}

// ---- steps of the world (types 29-31)

std::vector<std::string> NodeList(World& w) {
  return std::vector<std::string>(w.names.nodes.begin(), w.names.nodes.end());
}

// The nodes beat (acknowledging their DRAM events if `ack`) and, per
// `how`, answer the tasks they are handed: bit 1 offloads done, bit 2
// offloads failed, bit 3 promotions landed, bit 4 promotions failed
// (bit 5: reported as expired).
void Beat(World& w, uint8_t how) {
  MasterService& s = *w.svc;
  for (const std::string& node : NodeList(w)) {
    auto idx = s.nodes().IndexOf(node);
    if (!idx) continue;
    NodeTasks t;
    const uint64_t acked = (how & 1) ? s.nodes().LastDramSeq(*idx) : 0;
    // A world step: a node the input unmounted is refused, as it should be.
    s.Heartbeat(node, 0, 64, &t, acked).IgnoreError();
    std::vector<PromotionTaskMsg> pulled;
    s.PullPromotionTasks(node, 64, &pulled).IgnoreError();
    for (auto& p : pulled) t.promotions.push_back(std::move(p));
    std::vector<OffloadResultIn> results;
    for (const auto& o : t.offloads) {
      if (how & 2)
        results.push_back({o.tenant, o.key, o.version, ErrorCode::OK});
      else if (how & 4)
        results.push_back(
            {o.tenant, o.key, o.version, ErrorCode::NO_AVAILABLE_HANDLE});
    }
    if (!results.empty()) s.NotifyOffload(node, results);
    for (const auto& p : t.promotions) {
      if (how & 8) {
        auto r =
            s.PromotionAllocStart(node, p.tenant, p.key, p.size, p.task_id);
        (void)s.NotifyPromotion(node, p.tenant, p.key, p.task_id, r.ok());
      } else if (how & 16) {
        (void)s.NotifyPromotion(node, p.tenant, p.key, p.task_id, false,
                                (how & 32) != 0);
      }
    }
  }
}

void Step(World& w, size_t type, const std::string& arg) {
  auto byte = [&](size_t i) -> unsigned {
    return i < arg.size() ? static_cast<uint8_t>(arg[i]) : 0;
  };
  MasterService& s = *w.svc;
  if (type == 29) {
    // The clock runs `reps` steps of up to 655 s, housekeeping after each;
    // the liveness clock counts at most 200 ms a step, so nodes die only
    // after many short steps.
    const int64_t step_ms = int64_t(byte(0) | byte(1) << 8) * 10;
    const unsigned reps = 1 + byte(2) % 64;
    for (unsigned i = 0; i < reps; ++i) {
      w.clock.Advance(step_ms);
      s.Housekeep();
    }
  } else if (type == 30) {
    s.EvictIfNeeded();
    s.EvictBytes(
        uint64_t(byte(0) | byte(1) << 8) * 64,
        (byte(2) & 1) ? SegmentKind::kPrefetchBuffer : SegmentKind::kMain);
  } else {
    Beat(w, static_cast<uint8_t>(byte(0)));
  }
}

void RunOne(World& w, size_t type, const uint8_t* msg, size_t len) {
  const std::string bytes(reinterpret_cast<const char*>(msg), len);
  if (type >= kFirstStepType && type < kMountExtraType) {
    g_context = "step " + std::to_string(type);
    Step(w, type, bytes);
    CheckState(w);
    return;
  }
  const Rpc& rpc = Rpcs()[RpcIndex(type)];
  g_context = rpc.name;
  auto req = rpc.make();
  // A request gRPC could not parse (e.g. a string that is not UTF-8) never
  // reaches a handler.
  if (!req->ParseFromString(bytes)) return;
  Remap(req.get());
  if (type == 2) {
    // The long poll would only sleep (real time): no waiting.
    static_cast<rpc::HeartbeatRequest*>(req.get())->set_wait_ms(0);
  }
  Collect(*req, &w.names);
  const MasterStats before = w.svc->Stats();
  auto resp = rpc.make_reply();
  const grpc::Status st = rpc.call(*w.grpc, *req, resp.get());
  if (!st.ok())
    Fail("handler returned gRPC status " + std::to_string(st.error_code()) +
         ": " + st.error_message());
  static const bool trace = std::getenv("FUZZ_MASTER_RPC_TRACE") != nullptr;
  if (trace) {
    std::fprintf(stderr, "%s\n  %s\n  -> %s\n", rpc.name,
                 req->ShortDebugString().c_str(),
                 resp->ShortDebugString().c_str());
  }
  CheckReply(w, type, *req, *resp, before);
  CheckState(w);
}

// Invariant 4: everything removed and every deadline passed, nothing is
// left allocated.
void Quiesce(World& w) {
  MasterService& s = *w.svc;
  g_context = "end of input";
  for (const auto& [tenant, key] : w.names.objects) {
    (void)s.PutRevoke(tenant, key);
    (void)s.Remove(tenant, key, /*force=*/true);
  }
  for (int i = 0; i < 12; ++i) {
    w.clock.Advance(120 * 1000);
    Beat(w, 1);
    s.Housekeep();
  }
  CheckState(w);
  const MasterStats st = s.Stats();
  if (st.objects != 0) Fail("objects left after removing every name");
  if (s.tenant_count() != 0) Fail("tenants left with nothing in them");
  if (s.promotion_counters().in_flight != 0)
    Fail("promotions in flight after every task's deadline");
  if (s.segments().graveyard_size() != 0)
    Fail("graveyard ranges after every deadline");
  if (s.segments().HeldBytes(SegmentKind::kMain) != 0 ||
      s.segments().HeldBytes(SegmentKind::kPrefetchBuffer) != 0)
    Fail("held bytes after every node acknowledged its events");
  for (const auto& seg : st.segments) {
    if (seg.used != 0)
      Fail("segment " + std::to_string(seg.info.id) + " leaks " +
           std::to_string(seg.used) + " bytes");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  // A request that is not valid UTF-8 fails to parse; protobuf logs each.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  World w((mode >> 5) & 3);
  g_context = "setup";
  SetUpCluster(w);
  CheckState(w);
  if (!(mode & 0x80)) {
    RunOne(w, mode & 31, data + 1, size - 1);
  } else {
    size_t pos = 1;
    for (int n = 0; n < 12 && pos < size; ++n) {
      const size_t type = (data[pos] & 63) % kTypes;
      const size_t body = std::min(pos + 2, size);
      const size_t len =
          pos + 1 < size ? std::min<size_t>(data[pos + 1], size - body) : 0;
      RunOne(w, type, data + body, len);
      pos = body + len;
    }
  }
  Quiesce(w);
  return 0;
}
