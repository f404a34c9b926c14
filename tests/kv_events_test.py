"""Interop test of KV events (docs/kv_events.md) with a real client.

A subscriber that uses only Debian's python3-zmq and python3-msgpack, and
decodes by vLLM's documented KV-events schema (written here from its
documentation: EventBatch = [ts, events, data_parallel_rank], each event a
tagged array in the field order of BlockStored / BlockRemoved /
AllBlocksCleared), follows a kvpool-master and a kvpool-node (processes on
127.0.0.1, free ports, stopped by PID) through a scripted sequence: puts,
offloads to SSD, evictions from DRAM, a promotion by each trigger (on-hit,
exist, router), a remove and a remove_all. It checks that every event of the
script arrives, in order, after the master's reset (batch 0, which opens its
stream; every batch carries the stream's epoch), and that a gap -- the
subscriber disconnects while events are published -- is seen as a sequence
jump and filled from the replay socket. Failover and restart:
kv_events_failover_test.py.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import msgpack
import zmq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python",
                                "tests"))
from kvpool_testing import BIN_DIR, MasterProcess, wait_until  # noqa: E402

import kvpool  # noqa: E402

TOPIC = b"kv-events"
MiB = 1 << 20
END_OF_REPLAY = (1 << 64) - 1  # seq -1 as 8 unsigned bytes


# ---- vLLM's schema, from its documentation (kvpool's extras appended) ----
STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids",
                 "block_size", "lora_id", "medium")
REMOVED_FIELDS = ("block_hashes", "medium")
EXTRA_FIELDS = ("kind", "tenant", "key", "size", "ts", "trigger", "ssd_copy")
# A block event names its holder node after them.
BLOCK_FIELDS = ("node",)
# A reset (an AllBlocksCleared of kind "reset") names its stream after them.
RESET_FIELDS = ("leader", "epoch")
SCHEMA = {
    "BlockStored": STORED_FIELDS,
    "BlockRemoved": REMOVED_FIELDS,
    "AllBlocksCleared": (),
}


def decode_batch(payload):
    """[ts, events, data_parallel_rank, dropped_before, epoch]
    -> (ts, [event dict], epoch)."""
    batch = msgpack.unpackb(payload, raw=False)
    ts, events = batch[0], batch[1]
    out = []
    for ev in events:
        tag = ev[0]
        fields = SCHEMA[tag]
        e = {"type": tag}
        e.update(zip(fields, ev[1:1 + len(fields)]))
        # kvpool's fields follow the standard ones.
        extras = ev[1 + len(fields):]
        e.update(zip(EXTRA_FIELDS, extras))
        e.update(zip(RESET_FIELDS if tag == "AllBlocksCleared" else
                     BLOCK_FIELDS, extras[len(EXTRA_FIELDS):]))
        out.append(e)
    return ts, out, batch[4] if len(batch) > 4 else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Subscriber:
    """Follows the PUB socket; on a sequence jump asks the replay socket for
    what it missed (a DEALER framed as vLLM's REQ: "", seq)."""

    def __init__(self, ctx, endpoint, replay_endpoint):
        self.ctx, self.endpoint = ctx, endpoint
        self.replay = ctx.socket(zmq.DEALER)
        self.replay.connect(replay_endpoint)
        self.batches = {}  # seq -> events
        self.epochs = {}  # seq -> the batch's epoch
        self.last_seq = -1
        self.gaps = []  # (first missing, first received) of live jumps
        self.replayed = 0
        self.sub = None
        self.connect()

    def connect(self):
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
        self.sub.connect(self.endpoint)

    def disconnect(self):
        self.sub.close(linger=0)
        self.sub = None

    def close(self):
        if self.sub is not None:
            self.disconnect()
        self.replay.close(linger=0)

    def ask_replay(self, first):
        """{seq: events} of every buffered batch from `first` on."""
        self.replay.send_multipart([b"", first.to_bytes(8, "big")])
        out = {}
        while True:
            assert self.replay.poll(5000), "no answer from the replay socket"
            frames = self.replay.recv_multipart()
            assert frames[0] == b"" and len(frames) == 3, frames
            seq = int.from_bytes(frames[1], "big")
            if not frames[2]:
                assert seq == END_OF_REPLAY
                return out
            out[seq] = decode_batch(frames[2])[1:]

    def fill(self, first):
        for seq, (events, epoch) in self.ask_replay(first).items():
            if seq not in self.batches:
                self.batches[seq], self.epochs[seq] = events, epoch
                self.replayed += 1

    def pump(self, timeout_ms):
        """Takes the messages that arrive within timeout_ms."""
        got = False
        while self.sub.poll(timeout_ms if not got else 0):
            topic, seq_bytes, payload = self.sub.recv_multipart()
            assert topic == TOPIC
            assert len(seq_bytes) == 8
            seq = int.from_bytes(seq_bytes, "big")
            if seq > self.last_seq + 1:
                if self.last_seq >= 0:
                    self.gaps.append((self.last_seq + 1, seq))
                self.fill(self.last_seq + 1)
            _, self.batches[seq], self.epochs[seq] = decode_batch(payload)
            self.last_seq = max(self.last_seq, seq)
            got = True
        return got

    def events(self):
        """Every event received so far, by sequence number."""
        out = []
        for seq in sorted(self.batches):
            out.extend(self.batches[seq])
        return out

    def wait_for(self, predicate, timeout=30.0, what=""):
        deadline = time.monotonic() + timeout
        while not predicate(self.events()):
            assert time.monotonic() < deadline, "timed out waiting for " + what
            self.pump(50)


def key_events(events, key):
    return [e for e in events if e.get("key") == key.encode()]


def has(events, key, kind, **fields):
    return any(e["kind"] == kind and all(e.get(f) == v
                                         for f, v in fields.items())
               for e in key_events(events, key))


class KvEventsTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="kvpool-kvevents-")
        self.endpoint = "tcp://127.0.0.1:%d" % free_port()
        self.replay_endpoint = "tcp://127.0.0.1:%d" % free_port()
        self.master = MasterProcess(
            "--kv_events_endpoint=" + self.endpoint,
            "--kv_events_replay_endpoint=" + self.replay_endpoint,
            "--kv_events_topic=" + TOPIC.decode(),
            "--enable_offload", "--promotion_on_hit",
            "--promotion_admission_threshold=0", "--enable_prefetch_trigger",
            "--eviction_high_watermark_ratio=0.8", "--eviction_ratio=0.1")
        node_metrics = free_port()
        self.node = subprocess.Popen(
            [os.path.join(BIN_DIR, "kvpool-node"),
             "--master_server_address=" + self.master.address,
             "--global_segment_size=16MiB", "--prefetch_buffer_segment=8MiB",
             "--metrics_port=%d" % node_metrics, "--node_id=events-node",
             "--heartbeat_interval_ms=100", "--enable_ssd_offload",
             "--ssd_offload_path=" + os.path.join(self.tmp.name, "ssd"),
             "--ssd_capacity_bytes=256MiB"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def node_up():
            try:
                with urllib.request.urlopen(
                        "http://127.0.0.1:%d/status" % node_metrics,
                        timeout=2) as r:
                    return b"events-node" in r.read()
            except OSError:
                return self.node.poll() is not None
        self.assertTrue(wait_until(node_up, timeout=30))
        self.assertIsNone(self.node.poll(), "kvpool-node exited")
        self.ctx = zmq.Context()

    def tearDown(self):
        self.ctx.destroy(linger=0)
        if self.node.poll() is None:
            self.node.terminate()
            try:
                self.node.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.node.kill()
                self.node.wait()
        self.master.stop()
        self.tmp.cleanup()

    def join(self, sub, store, name):
        """Puts probe keys until one is seen live: the subscription is on."""
        for i in range(200):
            store.put("%s-%d" % (name, i), b"p")
            if sub.pump(50) and any(
                    e.get("key", b"").startswith(name.encode())
                    for e in sub.events()):
                return
        self.fail("subscription never took effect")

    def test_scripted_sequence_in_order_with_a_gap_filled_by_replay(self):
        sub = Subscriber(self.ctx, self.endpoint, self.replay_endpoint)
        store = kvpool.Store(self.master.address, enable_ssd_prefetch=True)
        try:
            self.join(sub, store, "probe-a")
            value = b"v" * MiB
            keys = ["hit", "exist", "router"]
            for k in keys:
                store.put(k, value)
            # Proactive offload (at put end): an SSD copy of each.
            sub.wait_for(lambda ev: all(has(ev, k, "offloaded") for k in keys),
                         what="offloads")
            # Fill DRAM until the three are evicted (they are the oldest,
            # and have their SSD copy).
            for i in range(64):
                if all(has(sub.events(), k, "evicted") for k in keys):
                    break
                store.put("fill-%d" % i, value)
                sub.pump(20)
            sub.wait_for(lambda ev: all(has(ev, k, "evicted") for k in keys),
                         what="evictions")

            # The gap: the subscriber is away while the on-hit promotion
            # is published.
            sub.disconnect()
            self.assertEqual(store.get("hit"), value)  # SSD read, promotes

            def in_memory(key):
                info = store.get_tier_info(key)
                return info is not None and info.best_tier == "memory"
            self.assertTrue(wait_until(lambda: in_memory("hit"), timeout=30))
            seen_before = sub.last_seq

            def promotion_published():
                return any(e.get("key") == b"hit" and e["kind"] == "promoted"
                           for events, _ in sub.ask_replay(seen_before + 1)
                           .values() for e in events)
            self.assertTrue(wait_until(promotion_published, timeout=30))
            sub.connect()
            self.join(sub, store, "probe-b")
            self.assertTrue(sub.gaps, "no sequence jump seen")
            self.assertEqual(sub.gaps[0][0], seen_before + 1)
            self.assertGreater(sub.replayed, 0)

            self.assertTrue(store.is_exist("exist", prefetch_to_memory=True))
            sub.wait_for(lambda ev: has(ev, "exist", "promoted"),
                         what="exist promotion")
            # Router triggers wait while DRAM is over its watermark: the
            # fill goes first (remove by regex: one BlockRemoved per key).
            self.assertGreater(store.remove_by_regex("fill-.*", force=True), 0)
            statuses = store.batch_prefetch_to_memory(["router"])
            self.assertEqual(statuses[0].name, "QUEUED")
            sub.wait_for(lambda ev: has(ev, "router", "promoted"),
                         what="router promotion")
            self.assertTrue(store.remove("hit", force=True))
            sub.wait_for(lambda ev: has(ev, "hit", "removed", medium="SSD"),
                         what="remove")
            store.remove_all(force=True)
            sub.wait_for(lambda ev: any(e["kind"] == "cleared"
                                        for e in ev), what="remove_all")
        finally:
            store.close()
            sub.close()

        # Nothing is missing: the batches are numbered 0..last, no hole.
        self.assertEqual(sorted(sub.batches), list(range(sub.last_seq + 1)))
        events = sub.events()
        # The stream begins with the master's reset, alone in batch 0, and
        # every batch names the stream's epoch (docs/kv_events.md,
        # "Failover and restart").
        reset = sub.batches[0]
        self.assertEqual(len(reset), 1)
        self.assertEqual((reset[0]["type"], reset[0]["kind"],
                          reset[0]["tenant"], reset[0]["leader"]),
                         ("AllBlocksCleared", "reset", b"",
                          self.master.address))
        self.assertGreater(reset[0]["epoch"], 0)
        self.assertEqual(set(sub.epochs.values()), {reset[0]["epoch"]})
        events = events[1:]
        for e in events:
            if e["type"] == "AllBlocksCleared":
                continue
            self.assertEqual(e["block_hashes"], [e["block_hashes"][0]])
            self.assertIsInstance(e["block_hashes"][0], int)
            self.assertEqual(e["tenant"], b"default")
            # One node holds every copy: each block event names it.
            self.assertEqual(e["node"], "events-node")
        # Each key's events, in order, as the script made them.
        def kinds(key):
            return [(e["type"], e["medium"], e["kind"], e["trigger"],
                     e["ssd_copy"]) for e in key_events(events, key)]
        stored = ("BlockStored", "DRAM", "stored", None, False)
        offloaded = ("BlockStored", "SSD", "offloaded", None, False)
        evicted = ("BlockRemoved", "DRAM", "evicted", None, True)
        self.assertEqual(kinds("hit"), [
            stored, offloaded, evicted,
            ("BlockStored", "DRAM", "promoted", "on_hit", True),
            ("BlockRemoved", "DRAM", "removed", None, False),
            ("BlockRemoved", "SSD", "removed", None, False)])
        self.assertEqual(kinds("exist")[:3], [stored, offloaded, evicted])
        self.assertEqual(kinds("exist")[3][2:4], ("promoted", "exist"))
        self.assertEqual(kinds("router")[:3], [stored, offloaded, evicted])
        self.assertEqual(
            kinds("router")[3],
            ("BlockStored", "PREFETCH_BUFFER", "promoted", "router", True))
        # The steps in the order the script ran them.
        def index(pred):
            return next(i for i, e in enumerate(events) if pred(e))
        steps = [
            index(lambda e: e.get("key") == b"hit" and e["kind"] == "promoted"),
            index(lambda e: e.get("key") == b"exist" and
                  e["kind"] == "promoted"),
            index(lambda e: e.get("key") == b"router" and
                  e["kind"] == "promoted"),
            index(lambda e: e.get("key") == b"hit" and e["kind"] == "removed"),
            index(lambda e: e["kind"] == "cleared"),
        ]
        self.assertEqual(steps, sorted(steps))
        cleared = events[steps[-1]]
        self.assertEqual((cleared["kind"], cleared["tenant"]),
                         ("cleared", b"default"))


if __name__ == "__main__":
    unittest.main()
