import json, re, statistics as st, sys, glob
import os
D = os.environ.get('MBENCH_DIR', '/tmp/mbench2')
rounds = sorted({int(re.search(r'_(\d+)\.json', p).group(1)) for p in glob.glob(D + '/master_after_*.json')})
def master(v, r): return json.load(open(f'{D}/master_{v}_{r}.json'))
def calls(v, r):
    out = {}
    for line in open(f'{D}/master_{v}_{r}.txt'):
        m = re.match(r'(exist|get \(4 KiB, shm\)|put \(4 KiB, shm\)|floor: BatchExistKey RPC, no keys)\s+(\d+)\s+([\d.]+)\s+([\d.]+)', line)
        if m: out[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return out
def transfer(v, r):
    return {(d['op'], d['path'], d['size'], d['batch']): d['p50_us'] for d in json.load(open(f'{D}/transfer_{v}_{r}.json'))}
rows = []
def add(name, f, higher_better):
    b = [f('before', r) for r in rounds]; a = [f('after', r) for r in rounds]
    ratios = [x / y for x, y in zip(a, b)]
    rows.append((name, st.median(b), st.median(a), st.median(ratios), min(ratios), max(ratios), higher_better))
add('master in process, keys/s (b=128)', lambda v, r: master(v, r)['inproc_keys_per_sec'], True)
for t in (1, 2, 4):
    add(f'master gRPC BatchQueryReadOnly, {t} thread(s), keys/s', lambda v, r, t=t: next(g['keys_per_sec'] for g in master(v, r)['grpc'] if g['threads'] == t), True)
add('master bytes/object', lambda v, r: master(v, r)['master_bytes_per_object'], False)
for k in [('floor: BatchExistKey RPC, no keys', 0), ('exist', 1), ('get (4 KiB, shm)', 1), ('put (4 KiB, shm)', 1), ('exist', 128), ('get (4 KiB, shm)', 128), ('put (4 KiB, shm)', 128)]:
    add(f'client {k[0]} batch {k[1]}, p50 us', lambda v, r, k=k: calls(v, r)[k], False)
for k in [('get', 'shm', 1 << 20, 1), ('get', 'tcp', 1 << 20, 1), ('put', 'shm', 1 << 20, 1), ('put', 'tcp', 1 << 20, 1), ('get', 'shm', 65536, 16), ('get', 'tcp', 65536, 16), ('get', 'shm', 1 << 20, 16), ('get', 'tcp', 1 << 20, 16)]:
    size = f'{k[2] >> 20} MiB' if k[2] >= 1 << 20 else f'{k[2] >> 10} KiB'
    add(f'transfer {k[0]} {k[1]} {size} x{k[3]}, p50 us', lambda v, r, k=k: transfer(v, r)[k], False)
print(f'rounds: {len(rounds)} (before = main without the metrics change, after = with it; alternated, before first in each round)\n')
print('| case | before (median) | after (median) | after/before (median of per-round ratios) | min | max |')
print('|---|---:|---:|---:|---:|---:|')
for name, b, a, r, lo, hi, hb in rows:
    print(f'| {name} | {b:,.1f} | {a:,.1f} | {r:.3f} | {lo:.3f} | {hi:.3f} |')
