# sweep_table.py CSV - staging_sweep.sh's CSV as a table (GB/s per configuration).
import collections, csv, sys

rows = list(csv.DictReader(open(sys.argv[1])))
table = collections.OrderedDict()
for r in rows:
    k = (r['s_chunk'], r['s_lanes'], r['s_threads'], r['s_stream'], r['s_part'], r.get('s_first', '0'), r.get('s_zc', '0'))
    table.setdefault(k, {})[(r['cipher'][-3:], int(r['update_bytes']))] = float(r['gbps'])
print("chunkK lanes thr nt partK first zcK | CTR 1M   4M   64M | GCM 1M   4M   64M")
for k, v in table.items():
    g = lambda c, s: "%5.1f" % v.get((c, s), 0)
    print("%6d %5s %3s %2s %5d %5d %4d | %s %s %s | %s %s %s" % (int(k[0]) // 1024, k[1], k[2], k[3], int(k[4]) // 1024, int(k[5]) // 1024, int(k[6]) // 1024,
          g('CTR', 1 << 20), g('CTR', 4 << 20), g('CTR', 64 << 20), g('GCM', 1 << 20), g('GCM', 4 << 20), g('GCM', 64 << 20)))
