"""KV events across a master failover and a master restart (issue #45,
item 5; docs/kv_events.md, "Failover and restart").

A subscriber keeps a tier map -- (tenant, key) -> the media that hold it --
by applying the stream as docs/kv_events.md says: BlockStored adds a medium,
BlockRemoved takes it away, AllBlocksCleared of kind "cleared" forgets a
tenant and one of kind "reset" forgets everything and starts a new stream;
another master's batches of an older epoch than the stream it follows are
ignored, and a new stream it joined late is read from its start through the
replay socket.

Processes on 127.0.0.1 (free ports, stopped by PID): etcd and two HA
masters, or one master, and two nodes with SSD tiers. Values are put,
copied to SSD, some evicted from DRAM, some removed; the subscriber's map
must equal the master's (read by a tier lookup of every key). Then the
master dies together with one of the nodes (a host lost whole), the other
node re-registers its DRAM and SSD copies with the new leader (or the
restarted master), and the map must come to equal the new master's state,
key by key, tier by tier and holder node by holder node (the node kvpool's
events name). Without the reset the subscriber would keep
the dead node's keys.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest
import urllib.request

import msgpack
import zmq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python",
                                "tests"))
from kvpool_testing import BIN_DIR, wait_until  # noqa: E402

import kvpool  # noqa: E402

TOPIC = b"kv-events"
MiB = 1 << 20
END_OF_REPLAY = (1 << 64) - 1
# Where each event keeps its medium, and where kvpool's fields begin.
MEDIUM_AT = {"BlockStored": 6, "BlockRemoved": 2}
EXTRAS_AT = {"BlockStored": 7, "BlockRemoved": 3, "AllBlocksCleared": 1}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc, sig=signal.SIGTERM):
    """Stops a process we started, by its PID."""
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def http_json(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=2) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


class Stream:
    """One master's KV events endpoint: a SUB socket and a DEALER to its
    replay socket."""

    def __init__(self, ctx, endpoint, replay_endpoint):
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
        self.sub.connect(endpoint)
        self.replay = ctx.socket(zmq.DEALER)
        self.replay.connect(replay_endpoint)
        self.received = 0  # batches received live

    def ask_replay(self, first):
        """[(seq, batch)] of every buffered batch from `first` on."""
        self.replay.send_multipart([b"", first.to_bytes(8, "big")])
        out = []
        while True:
            assert self.replay.poll(5000), "no answer from the replay socket"
            _, seq, payload = self.replay.recv_multipart()
            if not payload:
                assert int.from_bytes(seq, "big") == END_OF_REPLAY
                return out
            out.append((int.from_bytes(seq, "big"),
                        msgpack.unpackb(payload, raw=False)))

    def close(self):
        self.sub.close(linger=0)
        self.replay.close(linger=0)


class TierMapFollower:
    """The subscriber of the module docstring, over one Stream per master.
    `tiers`: (tenant, key) -> set of media; `copies`: (tenant, key) -> set
    of (medium, holder node), from the node kvpool's events name."""

    def __init__(self, ctx, endpoints):
        self.streams = [Stream(ctx, e, r) for e, r in endpoints]
        self.tiers = {}
        self.copies = {}
        self.epoch = None  # of the stream followed
        self.followed = None  # its index in self.streams
        self.next_seq = 0
        self.resets = []  # (leader, epoch) of each reset applied
        self.ignored = 0  # batches of an older stream

    def close(self):
        for s in self.streams:
            s.close()

    def pump(self, timeout_ms=50):
        poller = zmq.Poller()
        for s in self.streams:
            poller.register(s.sub, zmq.POLLIN)
        for sock, _ in poller.poll(timeout_ms):
            i = next(i for i, s in enumerate(self.streams) if s.sub is sock)
            while self.streams[i].sub.poll(0):
                topic, seq, payload = self.streams[i].sub.recv_multipart()
                assert topic == TOPIC
                self.streams[i].received += 1
                self.on_batch(i, int.from_bytes(seq, "big"),
                              msgpack.unpackb(payload, raw=False))

    def on_batch(self, i, seq, batch):
        epoch = batch[4] if len(batch) > 4 else None
        if epoch is None:
            # A publisher without streams (before issue #45 item 5): all
            # a subscriber can do is apply what comes.
            self.apply(batch)
            return
        if self.epoch is None or (epoch != self.epoch and (
                i == self.followed or epoch > self.epoch)):
            # A new stream: on the endpoint followed, whatever its epoch
            # (one process binds an endpoint: the master restarted); on
            # another, a later leader.
            self.join(i, epoch)
        elif epoch != self.epoch:
            self.ignored += 1  # a deposed leader's last batches
            return
        if i != self.followed or seq < self.next_seq:
            return  # already applied (from a replay)
        if seq > self.next_seq:  # a gap in this stream: the replay fills it
            self.catch_up(seq)
        assert seq == self.next_seq, (seq, self.next_seq)
        self.apply(batch)
        self.next_seq = seq + 1

    def join(self, i, epoch):
        """A new stream: read it from its reset, batch 0, on."""
        self.epoch, self.followed, self.next_seq = epoch, i, 0
        self.catch_up(None)

    def catch_up(self, upto):
        for seq, batch in self.streams[self.followed].ask_replay(
                self.next_seq):
            if upto is not None and seq >= upto:
                break
            assert seq == self.next_seq, (
                "the replay lost the stream's batches %d..%d: rebuild by "
                "lookups" % (self.next_seq, seq - 1))
            assert batch[4] == self.epoch
            self.apply(batch)
            self.next_seq = seq + 1

    def apply(self, batch):
        for ev in batch[1]:
            tag = ev[0]
            extras = ev[EXTRAS_AT[tag]:]
            kind, tenant, key = extras[0], extras[1], extras[2]
            if tag == "AllBlocksCleared":
                if kind == "reset":
                    self.tiers.clear()
                    self.copies.clear()
                    self.resets.append((extras[7], extras[8]))
                else:
                    self.tiers = {k: v for k, v in self.tiers.items()
                                  if k[0] != tenant}
                    self.copies = {k: v for k, v in self.copies.items()
                                   if k[0] != tenant}
                continue
            # The holder node: kvpool's eighth field of a block event.
            node = extras[7] if len(extras) > 7 else None
            medium = ev[MEDIUM_AT[tag]]
            media = self.tiers.setdefault((tenant, key), set())
            copies = self.copies.setdefault((tenant, key), set())
            if tag == "BlockStored":
                media.add(medium)
                copies.add((medium, node))
            else:
                copies.discard((medium, node))
                # The tier is gone when no node holds a copy in it.
                if not any(m == medium for m, _ in copies):
                    media.discard(medium)
                if not media:
                    del self.tiers[(tenant, key)]
                    del self.copies[(tenant, key)]


def master_tiers(store, keys, holders=None, copies=None):
    """The master's tier map of `keys`, from one tier lookup; the nodes
    that hold each key go to `holders` (a dict) when given, and its
    (medium, node) pairs to `copies`."""
    out = {}
    for key, info in zip(keys, store.batch_get_tier_info(keys)):
        if info is None:
            continue
        done = [r for r in info.replicas if r.complete]
        if done:
            k = (b"default", key.encode())
            out[k] = {"DRAM" if r.kind == "memory" else "SSD" for r in done}
            if holders is not None:
                holders[k] = {r.node_id for r in done}
            if copies is not None:
                copies[k] = {("DRAM" if r.kind == "memory" else "SSD",
                              r.node_id) for r in done}
    return out


class FailoverFixture(unittest.TestCase):
    """Processes and their clean-up; the scenario is run_scenario."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvpool-evha-")
        self.procs = []  # everything started, stopped by PID at the end
        self.ctx = zmq.Context()
        self.cluster = "evha%d" % os.getpid()

    def tearDown(self):
        self.ctx.destroy(linger=0)
        for p in reversed(self.procs):
            stop(p)
        # A node killed with SIGKILL leaves its /dev/shm segment behind.
        for p in self.procs:
            for f in os.listdir("/dev/shm"):
                if f.startswith("kvpool-%d-" % p.pid):
                    os.unlink(os.path.join("/dev/shm", f))
        shutil.rmtree(self.tmp, ignore_errors=True)

    def spawn(self, name, argv):
        log = open(os.path.join(self.tmp, name + ".log"), "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(p)
        return p

    def log_tail(self, name, lines=20):
        try:
            with open(os.path.join(self.tmp, name + ".log"), "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode("utf-8",
                                                               "replace")
        except OSError:
            return ""

    def start_etcd(self):
        client, peer = free_port(), free_port()
        c, p = ("http://127.0.0.1:%d" % client, "http://127.0.0.1:%d" % peer)
        self.spawn("etcd", [
            "/usr/bin/etcd", "--name", "t", "--data-dir",
            os.path.join(self.tmp, "etcd"), "--listen-client-urls", c,
            "--advertise-client-urls", c, "--listen-peer-urls", p,
            "--initial-advertise-peer-urls", p, "--initial-cluster",
            "t=" + p, "--heartbeat-interval", "50", "--election-timeout",
            "500", "--log-level", "warn"])
        self.assertTrue(wait_until(
            lambda: (http_json(client, "/health") or {}).get("health") ==
            "true", timeout=20), "etcd did not start")
        return "127.0.0.1:%d" % client

    def master_argv(self, m, *extra):
        """kvpool-master flags of master `m` (a dict of its ports)."""
        return [os.path.join(BIN_DIR, "kvpool-master"),
                "--rpc_port=%d" % m["rpc"], "--metrics_port=%d" % m["metrics"],
                "--kv_events_endpoint=tcp://127.0.0.1:%d" % m["pub"],
                "--kv_events_replay_endpoint=tcp://127.0.0.1:%d" % m["replay"],
                "--kv_events_topic=" + TOPIC.decode(), "--enable_offload",
                "--default_kv_lease_ttl=1000", "--put_waits_for_holders",
                "--eviction_high_watermark_ratio=0.8",
                "--eviction_ratio=0.1", *extra]

    @staticmethod
    def new_master():
        return {k: free_port() for k in ("rpc", "metrics", "pub", "replay")}

    def start_node(self, name, *master_flags):
        # Plain /dev/shm segments (no huge-page mount): a node killed with
        # SIGKILL leaves a file tearDown can remove.
        return self.spawn(name, [
            os.path.join(BIN_DIR, "kvpool-node"), *master_flags,
            "--segment_huge_pages=false",
            "--global_segment_size=16MiB", "--metrics_port=-1",
            "--node_id=" + name, "--heartbeat_interval_ms=100",
            "--enable_ssd_offload",
            "--ssd_offload_path=" + os.path.join(self.tmp, name + "-ssd"),
            "--ssd_capacity_bytes=256MiB"])

    def wait_equal(self, follower, store, keys, what, expect=None,
                   holders=None, timeout=30.0):
        """Until the follower's map equals the master's (and the master's
        is `expect`, when given); then the two, key by key and tier by
        tier, and node by node."""
        state = {}

        def equal():
            follower.pump(20)
            state["copies"] = {}
            try:
                state["master"] = master_tiers(store, keys, holders,
                                               state["copies"])
            except Exception as e:  # noqa: BLE001 -- a leader in transit
                state["master"] = "lookup failed: %s" % e
                return False
            return (expect is None or state["master"] == expect) and \
                follower.tiers == state["master"] and \
                follower.copies == state["copies"]
        converged = wait_until(equal, timeout=timeout, interval=0)
        master = state["master"]
        if expect is not None and master != expect:
            self.fail("%s: the master's state never became %s:\n%s" % (
                what, sorted(expect.items()), master))
        if not converged:
            copies = state.get("copies", {})
            diff = sorted(
                "%s: subscriber %s, master %s" % (
                    k[1].decode(),
                    sorted(follower.copies.get(k, ()), key=str),
                    sorted(copies.get(k, ()), key=str)
                    if isinstance(master, dict) else master)
                for k in set(follower.tiers) | (
                    set(master) if isinstance(master, dict) else set())
                if not isinstance(master, dict) or
                follower.tiers.get(k) != master.get(k) or
                follower.copies.get(k) != copies.get(k))
            self.fail("%s: the subscriber's map never equalled the master's "
                      "(%d differences):\n  %s" % (
                          what, len(diff), "\n  ".join(diff[:30])))
        for k, media in master.items():
            self.assertEqual(follower.tiers.get(k), media, k)
            self.assertEqual(follower.copies.get(k), state["copies"][k], k)
        self.assertEqual(set(follower.tiers), set(master))
        self.assertEqual(set(follower.copies), set(master))
        return master

    def run_scenario(self, follower, store, lose_master, what):
        """Puts, SSD copies, evictions and removals; the map equals the
        master's; `lose_master()` takes the master and node-b away and
        brings a master back; the map equals the new master's."""
        keys = []
        # Joined: a live batch is applied (the subscription takes effect
        # some time after connect).
        for i in range(200):
            keys.append("probe-%d" % i)
            store.put(keys[-1], b"p")
            follower.pump(20)
            if follower.tiers:
                break
        self.assertTrue(follower.tiers, "the subscription never took effect")
        value = b"v" * MiB
        for i in range(40):  # 40 MiB into two nodes of 16: evictions
            keys.append("k%d" % i)
            store.put(keys[-1], value)
            follower.pump(0)
        for k in keys[-40:-35]:
            self.assertTrue(store.remove(k, force=True))
        holders = {}
        before = self.wait_equal(follower, store, keys, what + ", before",
                                 holders=holders)
        media = [m for m in before.values()]
        self.assertIn({"SSD"}, media, "no value was evicted to SSD only")
        self.assertIn({"DRAM", "SSD"}, media, "no value in both tiers")
        # What node-a holds comes back, in the same tiers; node-b's dies.
        kept = {k: m for k, m in before.items() if holders[k] == {"node-a"}}
        self.assertTrue(kept and len(kept) < len(before), holders)
        resets_before = len(follower.resets)

        lose_master()
        self.wait_equal(follower, store, keys, what + ", after", expect=kept)
        # The new stream began with a reset.
        self.assertEqual(len(follower.resets), resets_before + 1)
        return follower.resets[-1]


class KvEventsFailoverTest(FailoverFixture):

    def test_ha_failover_subscriber_converges_on_the_new_leader(self):
        etcd = self.start_etcd()
        masters = {n: self.new_master() for n in ("a", "b")}
        procs = {}
        for n, m in masters.items():
            procs[n] = self.spawn("master-" + n, self.master_argv(
                m, "--enable_ha", "--etcd_endpoints=" + etcd,
                "--cluster_id=" + self.cluster, "--ha_lease_ttl_sec=1"))

        def leader():
            for n, m in masters.items():
                ha = (http_json(m["metrics"], "/status") or {}).get("ha", {})
                if procs[n].poll() is None and ha.get("role") == "leader":
                    return n, ha["epoch"]
            return None
        self.assertTrue(wait_until(leader, timeout=20), "no leader")
        first, first_epoch = leader()
        standby = "b" if first == "a" else "a"
        follower = TierMapFollower(self.ctx, [
            ("tcp://127.0.0.1:%d" % masters[n]["pub"],
             "tcp://127.0.0.1:%d" % masters[n]["replay"]) for n in "ab"])
        flags = ["--etcd_endpoints=" + etcd, "--cluster_id=" + self.cluster]
        self.start_node("node-a", *flags)
        node_b = self.start_node("node-b", *flags)
        store = kvpool.Store("etcd://%s/%s" % (etcd, self.cluster),
                             rpc_timeout_ms=3000)
        self.assertTrue(wait_until(
            lambda: len(store.stat().segments) == 2, timeout=20),
            self.log_tail("node-b"))

        def lose_master():
            # The host of the leader and node-b dies.
            self.assertEqual(follower.streams["ab".index(standby)].received,
                             0, "a standby published")
            stop(procs[first], signal.SIGKILL)
            stop(node_b, signal.SIGKILL)
            self.assertTrue(wait_until(
                lambda: (leader() or (None,))[0] == standby, timeout=20),
                self.log_tail("master-" + standby))
        try:
            leader_addr, epoch = self.run_scenario(
                follower, store, lose_master, "failover")
        finally:
            store.close()
            follower.close()
        new_epoch = leader()[1]
        self.assertGreater(new_epoch, first_epoch)
        self.assertEqual(epoch, new_epoch)
        self.assertEqual(leader_addr,
                         "127.0.0.1:%d" % masters[standby]["rpc"])

    def test_restart_subscriber_converges_on_the_restarted_master(self):
        m = self.new_master()
        argv = self.master_argv(m)
        master = self.spawn("master", argv)
        address = "127.0.0.1:%d" % m["rpc"]
        self.assertTrue(wait_until(
            lambda: http_json(m["metrics"], "/status") is not None,
            timeout=20), self.log_tail("master"))
        follower = TierMapFollower(self.ctx, [
            ("tcp://127.0.0.1:%d" % m["pub"],
             "tcp://127.0.0.1:%d" % m["replay"])])
        flag = "--master_server_address=" + address
        self.start_node("node-a", flag)
        node_b = self.start_node("node-b", flag)
        store = kvpool.Store(address, rpc_timeout_ms=3000)
        self.assertTrue(wait_until(
            lambda: len(store.stat().segments) == 2, timeout=20))
        epochs = []

        def lose_master():
            epochs.append(follower.epoch)
            stop(master)  # SIGTERM, then restarted on the same ports
            stop(node_b, signal.SIGKILL)
            self.spawn("master", argv)
        try:
            leader_addr, epoch = self.run_scenario(
                follower, store, lose_master, "restart")
        finally:
            store.close()
            follower.close()
        self.assertEqual(leader_addr, address)
        self.assertGreater(epoch, epochs[0])


if __name__ == "__main__":
    unittest.main()
