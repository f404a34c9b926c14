// Wire compatibility of the trigger_source change (issue #5, router-prefetch
// RFC "Rollout safety"): PromotionTask.trigger_source (5) and from_prefetch
// (6) ride HeartbeatResponse from master to holder as soon as binaries roll,
// even with the feature off. A mixed cluster is safe only if
//   - an old process parses what a new one sends (new -> old), keeps the
//     fields it does not know, and relays them unchanged;
//   - a new process reads what an old one sends with defaults meaning the
//     old behaviour (old -> new: trigger_source ON_HIT, from_prefetch false);
//   - no field of the old schema was renumbered or retyped.
// The old side is the frozen tests/wire/kvpool_pre_trigger_source.proto.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvpool.pb.h"
#include "kvpool_pre_client_id.pb.h"
#include "kvpool_pre_deadline.pb.h"
#include "kvpool_pre_promotion_room.pb.h"
#include "kvpool_pre_room_presence.pb.h"
#include "kvpool_pre_trigger_source.pb.h"
#include "master/object_store.h"  // TriggerSource (header-only enum)

namespace kvpool {
namespace {

namespace cur = ::kvpool::rpc;
namespace old = ::kvpool::rpc::pre_trigger_source;
namespace pre_dl = ::kvpool::rpc::pre_deadline;
namespace pre_room = ::kvpool::rpc::pre_promotion_room;
namespace pre_presence = ::kvpool::rpc::pre_room_presence;
namespace pre_cid = ::kvpool::rpc::pre_client_id;
using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;
using google::protobuf::util::MessageDifferencer;

constexpr int kTriggerSourceField = 5;
constexpr int kFromPrefetchField = 6;

template <typename To>
To Reparse(const Message& from) {
  std::string bytes;
  EXPECT_TRUE(from.SerializeToString(&bytes));
  To to;
  EXPECT_TRUE(to.ParseFromString(bytes));
  return to;
}

const UnknownFieldSet& Unknown(const Message& m) {
  return m.GetReflection()->GetUnknownFields(m);
}

// The varint value of unknown field `number`, if the set holds exactly one.
std::optional<uint64_t> UnknownVarint(const UnknownFieldSet& u, int number) {
  std::optional<uint64_t> found;
  for (int i = 0; i < u.field_count(); ++i) {
    const UnknownField& f = u.field(i);
    if (f.number() != number) continue;
    if (f.type() != UnknownField::TYPE_VARINT || found) return std::nullopt;
    found = f.varint();
  }
  return found;
}

// The current message type that carries the frozen message `frozen`.
const Descriptor* CurrentOf(const Descriptor* frozen) {
  return DescriptorPool::generated_pool()->FindMessageTypeByName(
      "kvpool.rpc." + frozen->name());
}

// `m` printed through the fields of `view` only (matched by name), one
// "name(number)=value" per line, nested messages through the matching
// nested view. Lets an old and a new message be compared on what both know.
std::string Dump(const Message& m, const Descriptor* view,
                 const std::string& indent = "") {
  std::string out;
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < view->field_count(); ++i) {
    const FieldDescriptor* fv = view->field(i);
    const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(fv->name());
    out += indent + fv->name();
    if (f == nullptr) {
      out += " <missing>\n";
      continue;
    }
    out += "(";
    out += std::to_string(f->number());
    out += ")";
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    if (f->is_repeated()) {
      out += "[";
      out += std::to_string(n);
      out += "]";
    }
    out += "\n";
    for (int k = 0; k < n; ++k) {
      const int index = f->is_repeated() ? k : -1;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
          fv->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& sub = f->is_repeated() ? r->GetRepeatedMessage(m, f, k)
                                              : r->GetMessage(m, f);
        out += Dump(sub, fv->message_type(), indent + "  ");
      } else {
        std::string v;
        TextFormat::PrintFieldValueToString(m, f, index, &v);
        out += indent + "  = " + v + "\n";
      }
    }
  }
  return out;
}

// Sets every field of `m` (two elements per repeated field, recursively) to
// a distinct non-default value: wide varints, negative int32, the last value
// of each enum.
void FillAll(Message* m, uint64_t* seed) {
  const Reflection* r = m->GetReflection();
  const Descriptor* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const int n = f->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      const uint64_t s = ++*seed;
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          rep ? r->AddInt32(m, f, -int32_t(s)) : r->SetInt32(m, f, -int32_t(s));
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          rep ? r->AddInt64(m, f, -int64_t(s) << 33)
              : r->SetInt64(m, f, -int64_t(s) << 33);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          rep ? r->AddUInt32(m, f, 0x80000000u + uint32_t(s))
              : r->SetUInt32(m, f, 0x80000000u + uint32_t(s));
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          rep ? r->AddUInt64(m, f, (uint64_t(1) << 63) + s)
              : r->SetUInt64(m, f, (uint64_t(1) << 63) + s);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          rep ? r->AddDouble(m, f, double(s) + 0.5)
              : r->SetDouble(m, f, double(s) + 0.5);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          rep ? r->AddFloat(m, f, float(s) + 0.5f)
              : r->SetFloat(m, f, float(s) + 0.5f);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          rep ? r->AddBool(m, f, true) : r->SetBool(m, f, true);
          break;
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* e = f->enum_type();
          const int v = e->value(e->value_count() - 1)->number();
          rep ? r->AddEnumValue(m, f, v) : r->SetEnumValue(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_STRING: {
          const std::string v = f->name() + "-" + std::to_string(s);
          rep ? r->AddString(m, f, v) : r->SetString(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          FillAll(rep ? r->AddMessage(m, f) : r->MutableMessage(m, f), seed);
          break;
      }
    }
  }
}

// The frozen schema of this file (tests/wire/kvpool_pre_trigger_source.proto).
const FileDescriptor* PreTriggerSourceFile() {
  return old::PromotionTask::descriptor()->file();
}

std::vector<const Descriptor*> FrozenMessages(const FileDescriptor* file) {
  std::vector<const Descriptor*> all;
  for (int i = 0; i < file->message_type_count(); ++i)
    all.push_back(file->message_type(i));
  return all;
}

void ExpectPromotionTask(const old::PromotionTask& o,
                         const cur::PromotionTask& c) {
  EXPECT_EQ(o.tenant(), c.tenant());
  EXPECT_EQ(o.key(), c.key());
  EXPECT_EQ(o.size(), c.size());
  EXPECT_EQ(o.task_id(), c.task_id());
}

void ExpectOffloadTask(const old::OffloadTask& o, const cur::OffloadTask& c) {
  EXPECT_EQ(o.tenant(), c.tenant());
  EXPECT_EQ(o.key(), c.key());
  EXPECT_EQ(o.segment_id(), c.segment_id());
  EXPECT_EQ(o.offset(), c.offset());
  EXPECT_EQ(o.size(), c.size());
  EXPECT_EQ(o.version(), c.version());
}

void AddPromotion(cur::HeartbeatResponse* r, const std::string& key,
                  uint64_t task_id, cur::TriggerSource src, bool prefetch) {
  cur::PromotionTask* p = r->add_promotion_tasks();
  p->set_tenant("tenant-a");
  p->set_key(key);
  p->set_size((uint64_t(1) << 32) + task_id);  // > 4 GiB: a wide varint
  p->set_task_id(task_id);
  p->set_trigger_source(src);
  p->set_from_prefetch(prefetch);
}

// What a new master sends in phase ① and later: on-hit, exist and router
// promotions, plus offload tasks.
cur::HeartbeatResponse NewHeartbeatResponse() {
  cur::HeartbeatResponse r;
  r.set_error_code(0);
  for (int i = 0; i < 2; ++i) {
    cur::OffloadTask* o = r.add_offload_tasks();
    o->set_tenant("tenant-a");
    o->set_key("offload-" + std::to_string(i));
    o->set_segment_id(7 + i);
    o->set_offset(uint64_t(i) << 20);
    o->set_size(4096 + i);
    o->set_version(1000 + i);
  }
  AddPromotion(&r, "on-hit", 11, cur::ON_HIT, false);
  AddPromotion(&r, "on-hit-prefetch", 12, cur::ON_HIT, true);
  AddPromotion(&r, "exist", 13, cur::EXIST, true);
  AddPromotion(&r, "router", 14, cur::ROUTER, true);
  return r;
}

// ---- new -> old -------------------------------------------------------

TEST(WireCompatTest, NewHeartbeatResponseParsedByOldSchema) {
  const cur::HeartbeatResponse sent = NewHeartbeatResponse();
  const old::HeartbeatResponse got = Reparse<old::HeartbeatResponse>(sent);

  EXPECT_EQ(got.error_code(), sent.error_code());
  ASSERT_EQ(got.offload_tasks_size(), sent.offload_tasks_size());
  for (int i = 0; i < got.offload_tasks_size(); ++i) {
    SCOPED_TRACE("offload " + std::to_string(i));
    ExpectOffloadTask(got.offload_tasks(i), sent.offload_tasks(i));
    EXPECT_EQ(Unknown(got.offload_tasks(i)).field_count(), 0);
  }
  ASSERT_EQ(got.promotion_tasks_size(), sent.promotion_tasks_size());
  for (int i = 0; i < got.promotion_tasks_size(); ++i) {
    SCOPED_TRACE("promotion " + sent.promotion_tasks(i).key());
    const cur::PromotionTask& s = sent.promotion_tasks(i);
    const old::PromotionTask& g = got.promotion_tasks(i);
    ExpectPromotionTask(g, s);
    // The old parser keeps what it does not know. proto3 sends no default
    // values, so ON_HIT / false are simply absent.
    const UnknownFieldSet& u = Unknown(g);
    EXPECT_EQ(UnknownVarint(u, kTriggerSourceField),
              s.trigger_source() == cur::ON_HIT
                  ? std::nullopt
                  : std::optional<uint64_t>(s.trigger_source()));
    EXPECT_EQ(UnknownVarint(u, kFromPrefetchField),
              s.from_prefetch() ? std::optional<uint64_t>(1) : std::nullopt);
    EXPECT_EQ(u.field_count(), (s.trigger_source() != cur::ON_HIT ? 1 : 0) +
                                   (s.from_prefetch() ? 1 : 0));
  }
  EXPECT_EQ(Unknown(got).field_count(), 0);
}

TEST(WireCompatTest, RelayThroughOldProcessLosesNothing) {
  const cur::HeartbeatResponse sent = NewHeartbeatResponse();
  old::HeartbeatResponse hop = Reparse<old::HeartbeatResponse>(sent);

  const cur::HeartbeatResponse back = Reparse<cur::HeartbeatResponse>(hop);
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(sent, back)) << diff;
  ASSERT_EQ(back.promotion_tasks_size(), 4);
  EXPECT_EQ(back.promotion_tasks(0).trigger_source(), cur::ON_HIT);
  EXPECT_FALSE(back.promotion_tasks(0).from_prefetch());
  EXPECT_EQ(back.promotion_tasks(1).trigger_source(), cur::ON_HIT);
  EXPECT_TRUE(back.promotion_tasks(1).from_prefetch());
  EXPECT_EQ(back.promotion_tasks(2).trigger_source(), cur::EXIST);
  EXPECT_TRUE(back.promotion_tasks(2).from_prefetch());
  EXPECT_EQ(back.promotion_tasks(3).trigger_source(), cur::ROUTER);
  EXPECT_TRUE(back.promotion_tasks(3).from_prefetch());

  // An old process that copies a task into its own queue, edits a field it
  // knows and sends it on still carries the new fields.
  old::PromotionTask copy;
  copy.CopyFrom(hop.promotion_tasks(3));
  copy.set_task_id(99);
  const cur::PromotionTask relayed = Reparse<cur::PromotionTask>(copy);
  EXPECT_EQ(relayed.task_id(), 99u);
  EXPECT_EQ(relayed.key(), "router");
  EXPECT_EQ(relayed.trigger_source(), cur::ROUTER);
  EXPECT_TRUE(relayed.from_prefetch());
}

// In phase ① (switch off) a new master sends only on-hit promotions: those
// must be byte-for-byte what an old master sent.
TEST(WireCompatTest, OnHitPromotionIsByteIdenticalToOldSchema) {
  cur::HeartbeatResponse n;
  old::HeartbeatResponse o;
  for (uint64_t id = 1; id <= 3; ++id) {
    const std::string key = std::string("k").append(std::to_string(id));
    AddPromotion(&n, key, id, cur::ON_HIT, false);
    old::PromotionTask* p = o.add_promotion_tasks();
    p->set_tenant("tenant-a");
    p->set_key(key);
    p->set_size((uint64_t(1) << 32) + id);
    p->set_task_id(id);
  }
  std::string nb, ob;
  ASSERT_TRUE(n.SerializeToString(&nb));
  ASSERT_TRUE(o.SerializeToString(&ob));
  EXPECT_EQ(nb, ob);
}

// ---- old -> new -------------------------------------------------------

TEST(WireCompatTest, OldHeartbeatResponseParsedByNewSchema) {
  old::HeartbeatResponse sent;
  sent.set_error_code(-3);
  old::OffloadTask* o = sent.add_offload_tasks();
  o->set_tenant("t");
  o->set_key("off");
  o->set_segment_id(3);
  o->set_offset(uint64_t(1) << 40);
  o->set_size(1 << 20);
  o->set_version(42);
  for (uint64_t id = 1; id <= 2; ++id) {
    old::PromotionTask* p = sent.add_promotion_tasks();
    p->set_tenant("t");
    p->set_key("promo-" + std::to_string(id));
    p->set_size((uint64_t(1) << 33) + id);
    p->set_task_id(id << 50);
  }

  const cur::HeartbeatResponse got = Reparse<cur::HeartbeatResponse>(sent);
  EXPECT_EQ(got.error_code(), -3);
  ASSERT_EQ(got.offload_tasks_size(), 1);
  ExpectOffloadTask(sent.offload_tasks(0), got.offload_tasks(0));
  ASSERT_EQ(got.promotion_tasks_size(), 2);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("promotion " + std::to_string(i));
    ExpectPromotionTask(sent.promotion_tasks(i), got.promotion_tasks(i));
    // Pre-change masters only ever sent on-hit promotions.
    EXPECT_EQ(got.promotion_tasks(i).trigger_source(), cur::ON_HIT);
    EXPECT_FALSE(got.promotion_tasks(i).from_prefetch());
    EXPECT_EQ(Unknown(got.promotion_tasks(i)).field_count(), 0);
  }
  EXPECT_EQ(Unknown(got).field_count(), 0);
}

TEST(WireCompatTest, OldPromotionTaskParsedByNewSchema) {
  old::PromotionTask sent;
  sent.set_tenant("t");
  sent.set_key("k");
  sent.set_size(123);
  sent.set_task_id(456);
  const cur::PromotionTask got = Reparse<cur::PromotionTask>(sent);
  ExpectPromotionTask(sent, got);
  EXPECT_EQ(got.trigger_source(), cur::ON_HIT);
  EXPECT_FALSE(got.from_prefetch());
  EXPECT_EQ(Unknown(got).field_count(), 0);
}

// ---- PullPromotionTasksResponse -------------------------------------------

// An old node never calls PullPromotionTasks, but the tasks it carries are
// the same PromotionTask: their bytes, as embedded on the wire, must read as
// the old PromotionTask and come back intact.
TEST(WireCompatTest, PullPromotionTasksCarriesOldCompatiblePromotionTask) {
  cur::PullPromotionTasksResponse resp;
  resp.set_error_code(0);
  const cur::TriggerSource sources[] = {cur::ON_HIT, cur::EXIST, cur::ROUTER};
  uint64_t id = 100;
  for (cur::TriggerSource src : sources) {
    for (bool prefetch : {false, true}) {
      cur::PromotionTask* t = resp.add_tasks();
      t->set_tenant("tenant-b");
      t->set_key(cur::TriggerSource_Name(src) + (prefetch ? "-p" : ""));
      t->set_size(id * 4096);
      t->set_task_id(++id);
      t->set_trigger_source(src);
      t->set_from_prefetch(prefetch);
    }
  }
  std::string bytes;
  ASSERT_TRUE(resp.SerializeToString(&bytes));

  UnknownFieldSet wire;
  ASSERT_TRUE(wire.ParseFromString(bytes));
  int seen = 0;
  for (int i = 0; i < wire.field_count(); ++i) {
    const UnknownField& f = wire.field(i);
    if (f.number() != 2) continue;
    ASSERT_EQ(f.type(), UnknownField::TYPE_LENGTH_DELIMITED);
    ASSERT_LT(seen, resp.tasks_size());
    const cur::PromotionTask& sent = resp.tasks(seen);
    SCOPED_TRACE("task " + sent.key());
    old::PromotionTask o;
    ASSERT_TRUE(o.ParseFromString(f.length_delimited()));
    ExpectPromotionTask(o, sent);
    const cur::PromotionTask back = Reparse<cur::PromotionTask>(o);
    EXPECT_TRUE(MessageDifferencer::Equals(back, sent));
    EXPECT_EQ(back.trigger_source(), sent.trigger_source());
    EXPECT_EQ(back.from_prefetch(), sent.from_prefetch());
    ++seen;
  }
  EXPECT_EQ(seen, resp.tasks_size());
}

// ---- field-number guard -----------------------------------------------

// Every field of every message of the frozen schema `file` exists in the
// current message of the same name with the same number, wire type,
// cardinality and message type, and every value of its enums keeps its
// number. Reusable for the next frozen schema (docs/wire.md).
void ExpectFrozenFieldsKept(const FileDescriptor* file) {
  const std::string current_package = "kvpool.rpc.";
  for (int e = 0; e < file->enum_type_count(); ++e) {
    const auto* oe = file->enum_type(e);
    SCOPED_TRACE(oe->full_name());
    const auto* ce = DescriptorPool::generated_pool()->FindEnumTypeByName(
        current_package + oe->name());
    ASSERT_NE(ce, nullptr) << "enum removed or renamed";
    for (int v = 0; v < oe->value_count(); ++v) {
      const auto* cv = ce->FindValueByName(oe->value(v)->name());
      ASSERT_NE(cv, nullptr) << oe->value(v)->name() << " removed or renamed";
      EXPECT_EQ(cv->number(), oe->value(v)->number()) << cv->name();
    }
  }
  for (const Descriptor* od : FrozenMessages(file)) {
    SCOPED_TRACE(od->full_name());
    const Descriptor* cd = CurrentOf(od);
    ASSERT_NE(cd, nullptr) << "message removed or renamed";
    for (int i = 0; i < od->field_count(); ++i) {
      const FieldDescriptor* of = od->field(i);
      SCOPED_TRACE(of->name());
      const FieldDescriptor* cf = cd->FindFieldByName(of->name());
      ASSERT_NE(cf, nullptr) << "field removed or renamed";
      EXPECT_EQ(cf->number(), of->number());
      EXPECT_EQ(cf->type(), of->type())
          << cf->type_name() << " vs " << of->type_name();
      EXPECT_EQ(cf->is_repeated(), of->is_repeated());
      if (of->type() == FieldDescriptor::TYPE_MESSAGE) {
        EXPECT_EQ(cf->message_type()->name(), of->message_type()->name());
      }
      if (of->type() == FieldDescriptor::TYPE_ENUM) {
        EXPECT_EQ(cf->enum_type()->name(), of->enum_type()->name());
      }
      // The number is not taken over by another field either.
      EXPECT_EQ(cd->FindFieldByNumber(of->number()), cf);
    }
  }
}

TEST(WireCompatTest, FrozenFieldsKeepNumberAndType) {
  ASSERT_EQ(FrozenMessages(PreTriggerSourceFile()).size(), 6u);
  ExpectFrozenFieldsKept(PreTriggerSourceFile());
}

TEST(WireCompatTest, PromotionTaskFieldNumbers) {
  const Descriptor* c = cur::PromotionTask::descriptor();
  const Descriptor* o = old::PromotionTask::descriptor();
  for (const char* name : {"tenant", "key", "size", "task_id"}) {
    SCOPED_TRACE(name);
    ASSERT_NE(c->FindFieldByName(name), nullptr);
    ASSERT_NE(o->FindFieldByName(name), nullptr);
    EXPECT_EQ(c->FindFieldByName(name)->number(),
              o->FindFieldByName(name)->number());
    EXPECT_EQ(c->FindFieldByName(name)->type(),
              o->FindFieldByName(name)->type());
  }
  // The additions themselves, now deployed, are frozen too.
  const FieldDescriptor* ts = c->FindFieldByName("trigger_source");
  const FieldDescriptor* fp = c->FindFieldByName("from_prefetch");
  ASSERT_NE(ts, nullptr);
  ASSERT_NE(fp, nullptr);
  EXPECT_EQ(ts->number(), kTriggerSourceField);
  EXPECT_EQ(ts->type(), FieldDescriptor::TYPE_ENUM);
  EXPECT_EQ(fp->number(), kFromPrefetchField);
  EXPECT_EQ(fp->type(), FieldDescriptor::TYPE_BOOL);
  EXPECT_EQ(o->FindFieldByNumber(kTriggerSourceField), nullptr);
  EXPECT_EQ(o->FindFieldByNumber(kFromPrefetchField), nullptr);
  // Defaults mean the old behaviour: the zero value is ON_HIT, the only kind
  // of promotion a pre-change master sent.
  EXPECT_EQ(cur::TriggerSource_descriptor()->FindValueByNumber(0)->name(),
            "ON_HIT");
  EXPECT_EQ(cur::ON_HIT, 0);
  EXPECT_EQ(cur::EXIST, 1);
  EXPECT_EQ(cur::ROUTER, 2);
  EXPECT_EQ(cur::PromotionTask().trigger_source(), cur::ON_HIT);
  EXPECT_FALSE(cur::PromotionTask().from_prefetch());
}

// The master fills the wire field with static_cast from its own enum
// (src/master/master_grpc_service.cc): the numbers must stay identical.
TEST(WireCompatTest, MasterTriggerSourceMatchesWireEnum) {
  EXPECT_EQ(static_cast<int>(TriggerSource::kOnHit), cur::ON_HIT);
  EXPECT_EQ(static_cast<int>(TriggerSource::kExist), cur::EXIST);
  EXPECT_EQ(static_cast<int>(TriggerSource::kRouter), cur::ROUTER);
  EXPECT_EQ(TriggerSource{}, TriggerSource::kOnHit);
}

// ---- every frozen message, both directions, every field -------------------

// For every message of the frozen schema `file`: a current message with
// every field set reads in the old schema with the same known values and
// comes back whole through it; an old message with every field set reads in
// the current schema with the same values and every new field at its
// default. Reusable for the next frozen schema (docs/wire.md).
void ExpectRoundTripsBothWays(const FileDescriptor* file) {
  for (const Descriptor* od : FrozenMessages(file)) {
    SCOPED_TRACE(od->full_name());
    const Descriptor* cd = CurrentOf(od);
    ASSERT_NE(cd, nullptr);
    const Message* old_proto =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(od);
    const Message* cur_proto =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(cd);
    ASSERT_NE(old_proto, nullptr);
    ASSERT_NE(cur_proto, nullptr);
    std::string bytes;
    uint64_t seed = 0;

    // new -> old -> new: all fields, new ones included.
    std::unique_ptr<Message> n(cur_proto->New());
    FillAll(n.get(), &seed);
    ASSERT_TRUE(n->SerializeToString(&bytes));
    std::unique_ptr<Message> o(old_proto->New());
    ASSERT_TRUE(o->ParseFromString(bytes));
    EXPECT_EQ(Dump(*o, od), Dump(*n, od));
    ASSERT_TRUE(o->SerializeToString(&bytes));
    std::unique_ptr<Message> back(cur_proto->New());
    ASSERT_TRUE(back->ParseFromString(bytes));
    std::string diff;
    MessageDifferencer d;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(*n, *back)) << diff;

    // old -> new: known fields equal, new fields at their defaults.
    std::unique_ptr<Message> o2(old_proto->New());
    FillAll(o2.get(), &seed);
    ASSERT_TRUE(o2->SerializeToString(&bytes));
    std::unique_ptr<Message> n2(cur_proto->New());
    ASSERT_TRUE(n2->ParseFromString(bytes));
    EXPECT_EQ(Dump(*n2, od), Dump(*o2, od));
    EXPECT_EQ(Unknown(*n2).field_count(), 0);
    for (int i = 0; i < cd->field_count(); ++i) {
      const FieldDescriptor* cf = cd->field(i);
      if (od->FindFieldByName(cf->name()) != nullptr) continue;
      SCOPED_TRACE("new field " + cf->name());
      if (cf->is_repeated()) {
        EXPECT_EQ(n2->GetReflection()->FieldSize(*n2, cf), 0);
      } else {
        EXPECT_FALSE(n2->GetReflection()->HasField(*n2, cf));
      }
    }
  }
}

TEST(WireCompatTest, AllFrozenMessagesRoundTripBothWays) {
  ExpectRoundTripsBothWays(PreTriggerSourceFile());
}

// ---- an unknown TriggerSource from a newer master ----------------------

TEST(WireCompatTest, UnknownTriggerSourceValueIsKept) {
  // A newer master with a fourth trigger source (value 7) that this build
  // does not know. Built on the old message so no setter is involved.
  old::PromotionTask newer;
  newer.set_tenant("t");
  newer.set_key("k");
  newer.set_size(4096);
  newer.set_task_id(77);
  newer.GetReflection()->MutableUnknownFields(&newer)->AddVarint(
      kTriggerSourceField, 7);
  newer.GetReflection()->MutableUnknownFields(&newer)->AddVarint(
      kFromPrefetchField, 1);

  // proto3 enums are open: the current schema keeps the raw value.
  const cur::PromotionTask got = Reparse<cur::PromotionTask>(newer);
  EXPECT_EQ(static_cast<int>(got.trigger_source()), 7);
  EXPECT_FALSE(cur::TriggerSource_IsValid(got.trigger_source()));
  EXPECT_TRUE(cur::TriggerSource_Name(got.trigger_source()).empty());
  EXPECT_TRUE(got.from_prefetch());
  EXPECT_EQ(got.tenant(), "t");
  EXPECT_EQ(got.key(), "k");
  EXPECT_EQ(got.size(), 4096u);
  EXPECT_EQ(got.task_id(), 77u);
  EXPECT_EQ(Unknown(got).field_count(), 0);

  // ... and relays it unchanged.
  const old::PromotionTask relayed = Reparse<old::PromotionTask>(got);
  EXPECT_EQ(UnknownVarint(Unknown(relayed), kTriggerSourceField),
            std::optional<uint64_t>(7));

  // The holder (src/node/ssd_tier*.cc) never reads trigger_source: every
  // PromotionTask it gets runs the one promotion chain, whose requests
  // (PromotionAllocStart, NotifyPromotion) carry only tenant, key, size and
  // task_id. A task with value 7 is therefore promoted exactly like an
  // on-hit one. Holder code that starts to read the field must map values
  // for which TriggerSource_IsValid() is false to ON_HIT (docs/wire.md).
}

// ---- the deadline fields (issue #14) -------------------------------------
// PromotionTask.deadline_in_ms (7) rides master -> holder; expired (6) rides
// holder -> master; BatchPrefetchToMemoryRequest.deadline_in_ms (3) rides
// router -> master. Each side of a mixed cluster must read the other.

constexpr int kTaskDeadlineField = 7;
constexpr int kRequestDeadlineField = 3;

TEST(WireCompatTest, DeadlineFrozenFieldsKeepNumberAndType) {
  const FileDescriptor* f = pre_dl::PromotionTask::descriptor()->file();
  ASSERT_EQ(FrozenMessages(f).size(), 3u);
  ExpectFrozenFieldsKept(f);
  ExpectRoundTripsBothWays(f);
}

TEST(WireCompatTest, OldHolderKeepsAndRelaysTheTaskDeadline) {
  cur::PromotionTask n;
  n.set_tenant("t");
  n.set_key("k");
  n.set_size(1 << 20);
  n.set_task_id(7);
  n.set_trigger_source(cur::ROUTER);
  n.set_from_prefetch(true);
  n.set_deadline_in_ms(250);
  const auto o = Reparse<pre_dl::PromotionTask>(n);
  EXPECT_EQ(o.key(), "k");
  EXPECT_EQ(o.task_id(), 7u);
  EXPECT_EQ(o.trigger_source(), pre_dl::ROUTER);
  // An old holder ignores the deadline (it promotes as before), keeps it.
  EXPECT_EQ(UnknownVarint(Unknown(o), kTaskDeadlineField),
            std::optional<uint64_t>(250));
  EXPECT_EQ(Reparse<cur::PromotionTask>(o).deadline_in_ms(), 250);
}

TEST(WireCompatTest, OldMasterTasksAndNotifiesMeanNoDeadline) {
  pre_dl::PromotionTask o;
  o.set_key("k");
  o.set_task_id(1);
  const auto t = Reparse<cur::PromotionTask>(o);
  EXPECT_EQ(t.deadline_in_ms(), 0);  // never expires at the holder
  pre_dl::PromotionNotifyRequest on;
  on.set_key("k");
  on.set_success(false);
  EXPECT_FALSE(Reparse<cur::PromotionNotifyRequest>(on).expired());
}

TEST(WireCompatTest, TriggerWithoutDeadlineIsByteIdenticalToOldRouter) {
  cur::BatchPrefetchToMemoryRequest n;
  pre_dl::BatchPrefetchToMemoryRequest o;
  for (auto* k : {"a", "b"}) {
    n.add_keys(k);
    o.add_keys(k);
  }
  n.set_tenant("t");
  o.set_tenant("t");
  std::string nb, ob;
  ASSERT_TRUE(n.SerializeToString(&nb));
  ASSERT_TRUE(o.SerializeToString(&ob));
  EXPECT_EQ(nb, ob);
  // With a deadline, an old master reads the same keys and ignores it.
  n.set_deadline_in_ms(120);
  const auto got = Reparse<pre_dl::BatchPrefetchToMemoryRequest>(n);
  EXPECT_EQ(got.keys_size(), 2);
  EXPECT_EQ(UnknownVarint(Unknown(got), kRequestDeadlineField),
            std::optional<uint64_t>(120));
}

// ---- the executor's promotion room (issue #14) ----------------------------
// HeartbeatRequest.max_promotion_tasks (6) rides node -> master: a holder
// running the pipelined executor asks for that many promotion tasks per
// beat. Unset means the master's promotion_max_per_heartbeat, as before.

constexpr int kPromotionRoomField = 6;

TEST(WireCompatTest, PromotionRoomFrozenFieldsKeepNumberAndType) {
  const FileDescriptor* f = pre_room::HeartbeatRequest::descriptor()->file();
  ASSERT_EQ(FrozenMessages(f).size(), 1u);
  ExpectFrozenFieldsKept(f);
  ExpectRoundTripsBothWays(f);
}

TEST(WireCompatTest, OldMasterReadsANewNodesBeatAndIgnoresItsRoom) {
  cur::HeartbeatRequest n;
  n.set_node_id("holder");
  n.set_wait_ms(1000);
  n.set_max_offload_tasks(256);
  n.set_dram_acked_seq(42);
  n.set_known_epoch(3);
  n.set_max_promotion_tasks(128);
  const auto o = Reparse<pre_room::HeartbeatRequest>(n);
  EXPECT_EQ(o.node_id(), "holder");
  EXPECT_EQ(o.wait_ms(), 1000u);
  EXPECT_EQ(o.max_offload_tasks(), 256u);
  EXPECT_EQ(o.dram_acked_seq(), 42u);
  EXPECT_EQ(o.known_epoch(), 3u);
  // Unknown to it: it hands over per its own knob, as before.
  EXPECT_EQ(UnknownVarint(Unknown(o), kPromotionRoomField),
            std::optional<uint64_t>(128));
}

TEST(WireCompatTest, OldNodesBeatAsksForNoRoom) {
  pre_room::HeartbeatRequest o;
  o.set_node_id("holder");
  o.set_max_offload_tasks(256);
  const auto n = Reparse<cur::HeartbeatRequest>(o);
  EXPECT_EQ(n.max_offload_tasks(), 256u);
  EXPECT_FALSE(n.has_max_promotion_tasks());  // the master's knob alone
  // A node that asks for no room sends the old bytes.
  cur::HeartbeatRequest same;
  same.set_node_id("holder");
  same.set_max_offload_tasks(256);
  std::string nb, ob;
  ASSERT_TRUE(same.SerializeToString(&nb));
  ASSERT_TRUE(o.SerializeToString(&ob));
  EXPECT_EQ(nb, ob);
}

// ---- presence of the room (issue #14) --------------------------------------
// max_promotion_tasks became `optional` so that a full queue can state room
// 0 (no tasks by this beat) apart from "not stated" (the knob). The previous
// schema had the same number and varint type without presence.

TEST(WireCompatTest, RoomPresenceFrozenFieldsKeepNumberAndType) {
  const FileDescriptor* f =
      pre_presence::HeartbeatRequest::descriptor()->file();
  ASSERT_EQ(FrozenMessages(f).size(), 1u);
  ExpectFrozenFieldsKept(f);
  ExpectRoundTripsBothWays(f);
}

TEST(WireCompatTest, AStatedRoomOfZeroIsSentAndAnOlderMasterReadsZero) {
  cur::HeartbeatRequest n;
  n.set_node_id("holder");
  n.set_max_promotion_tasks(0);
  std::string bytes;
  ASSERT_TRUE(n.SerializeToString(&bytes));
  cur::HeartbeatRequest back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_TRUE(back.has_max_promotion_tasks());
  EXPECT_EQ(back.max_promotion_tasks(), 0u);
  // An older master cannot tell it from "not stated": it hands over per its
  // knob, as it did for this node before.
  const auto o = Reparse<pre_presence::HeartbeatRequest>(n);
  EXPECT_EQ(o.node_id(), "holder");
  EXPECT_EQ(o.max_promotion_tasks(), 0u);
  // Not stating it sends the older node's bytes for room 0.
  cur::HeartbeatRequest unset;
  unset.set_node_id("holder");
  pre_presence::HeartbeatRequest old_zero;
  old_zero.set_node_id("holder");
  std::string nb, ob;
  ASSERT_TRUE(unset.SerializeToString(&nb));
  ASSERT_TRUE(old_zero.SerializeToString(&ob));
  EXPECT_EQ(nb, ob);
}

TEST(WireCompatTest, AnOlderNodesRoomReadsAsStatedAndItsZeroAsNot) {
  pre_presence::HeartbeatRequest o;
  o.set_node_id("holder");
  o.set_max_promotion_tasks(128);
  auto n = Reparse<cur::HeartbeatRequest>(o);
  EXPECT_TRUE(n.has_max_promotion_tasks());
  EXPECT_EQ(n.max_promotion_tasks(), 128u);
  // Its "0" (the sequential worker, or a full queue) was never sent: the
  // master's knob, as before.
  o.set_max_promotion_tasks(0);
  n = Reparse<cur::HeartbeatRequest>(o);
  EXPECT_FALSE(n.has_max_promotion_tasks());
}

// ---- the client's id on its puts (issue #41) ------------------------------
// PutStartRequest.client_id (7) and BatchPutStartRequest.client_id (2): the
// master releases the puts of a client that falls silent. An old master
// ignores the id; an old client's puts carry none (the put timeouts only).

TEST(WireCompatTest, ClientIdFrozenFieldsKeepNumberAndType) {
  const FileDescriptor* f = pre_cid::PutStartRequest::descriptor()->file();
  ASSERT_EQ(FrozenMessages(f).size(), 3u);
  ExpectFrozenFieldsKept(f);
  ExpectRoundTripsBothWays(f);
}

TEST(WireCompatTest, AnOldMasterReadsANewClientsPutAndIgnoresItsId) {
  cur::BatchPutStartRequest n;
  n.set_client_id(std::string(16, '\x07'));
  auto* item = n.add_items();
  item->set_tenant("t");
  item->set_key("k");
  item->set_size(4096);
  item->set_upsert(true);
  item->add_excluded_nodes("node-b");
  const auto o = Reparse<pre_cid::BatchPutStartRequest>(n);
  ASSERT_EQ(o.items_size(), 1);
  EXPECT_EQ(o.items(0).key(), "k");
  EXPECT_EQ(o.items(0).size(), 4096u);
  EXPECT_TRUE(o.items(0).upsert());
  EXPECT_EQ(o.items(0).excluded_nodes(0), "node-b");
  EXPECT_EQ(Unknown(o).field_count(), 1);  // the id, nothing else
}

TEST(WireCompatTest, AnOldClientsPutNamesNoClient) {
  pre_cid::BatchPutStartRequest o;
  auto* item = o.add_items();
  item->set_key("k");
  item->set_size(100);
  const auto n = Reparse<cur::BatchPutStartRequest>(o);
  EXPECT_TRUE(n.client_id().empty());
  EXPECT_TRUE(n.items(0).client_id().empty());
  EXPECT_TRUE(ClientId::FromBytes(n.client_id()).empty());
}

}  // namespace
}  // namespace kvpool
