"""The `x floor` intervals of stored default runs, recomputed two ways from their samples
(`read_runs`, `read_run_numbers`): with each run's floor near it taken as known (the
bootstrap over the runs alone, the harness before the floor's visits were drawn again) and
with the floor's visits drawn again too (the harness since). Prints each row's stored
interval and the redrawn one, then, for each pair of files, how many rows' intervals meet.

    python3 docs/bench/floor_intervals.py docs/bench/halo2-lib-k18-default-floor-tie-{1,2,3,4}.json

Its random draws are not the harness's, so its intervals differ from the harness's by a
little; the estimates are the same.
"""
import json,sys,random,statistics
from collections import defaultdict
SMALL=256<<20
def median(v):
    s=sorted(v); n=len(s)
    return s[n//2] if n%2 else (s[n//2-1]+s[n//2])/2
def lower_median(v):
    s=sorted(v); return s[(len(s)-1)//2] if s else float('inf')
def floor_near(by_run, by_way):
    # by_run: dict run -> list of visits (in order)
    out={}
    keys=sorted(by_run)
    for run in keys:
        near=[by_run[r] for r in keys if run-1<=r<=run+1]
        for fu in (run-2,run+2):
            if len(near)<3 and fu in by_run and fu>=0: near.append(by_run[fu])
        if by_way:
            ways=max(len(v) for v in near)
            fl=min(lower_median([v[w] for v in near if len(v)>w]) for w in range(ways))
        else:
            fl=lower_median([x for v in near for x in v])
        out[run]=fl
    return out
def quant(ms,q):
    ms=sorted(ms); return ms[round((len(ms)-1)*q)]
def near_runs(keys, run):
    near=[r for r in keys if run-1<=r<=run+1]
    for fu in (run-2,run+2):
        if len(near)<3 and fu in keys and fu>=0: near.append(fu)
    return near
def local_resample(by_run,rng):
    # as the harness: each visit replaced by the visit at the same place of a run drawn
    # from the runs near its run (its floor's window); a run without that place keeps its own
    keys=sorted(by_run); out={}
    for run in keys:
        near=near_runs(keys,run)
        new=[]
        for w,own in enumerate(by_run[run]):
            r=rng.choice(near)
            new.append(by_run[r][w] if len(by_run[r])>w else own)
        out[run]=new
    return out
def redrawn(load, floors, by_ways, rng):
    """The load over its floors near each run: the estimate and a 95% interval whose draws
    take the floors' visits again as well as the runs. load: {run: s}; floors: [{run: [s]}]."""
    def floor_sum(fl):
        res=None
        for f,bw in zip(fl,by_ways):
            n=floor_near(f,bw)
            res=n if res is None else {r:res[r]+n[r] for r in res if r in n}
        return res
    fs=floor_sum(floors)
    runs=[r for r in load if r in fs]
    ratios=[load[r]/fs[r] for r in runs]
    est=median(ratios); ms=[]
    for _ in range(2000):
        fl=floor_sum([local_resample(f,rng) for f in floors])
        rr=[rng.choice(runs) for _ in runs]
        ms.append(median([load[r]/fl[r] for r in rr]))
    return est,quant(ms,.025),quant(ms,.975)
def rows_of(path):
    d=json.load(open(path)); s=d['sizes'][0]; past=d['reads_past_page_cache']
    rows=s['rows']; out={}
    floors={}
    for r in rows:
        if r['backend']=='floor':
            by=defaultdict(list)
            for run,x in zip(r['read_run_numbers'],r['read_runs']): by[run].append(x)
            floors[(r['kind'],r['state'],r['mode'])]=(dict(by),r['file_bytes'])
    for r in rows:
        if r['backend']=='floor' or r.get('read_vs_floor') is None: continue
        load={run:x for run,x in zip(r['read_run_numbers'],r['read_runs'])}
        mode=r['backend']+' '+r['mode'] if r['validation']!='pinned' else 'rawbytes RawBytes'
        if r['kind']=='cold-start':
            fk=[('params',r['state'],mode),('pk',r['state'],mode)]
        else: fk=[(r['kind'],r['state'],mode)]
        if not all(k in floors for k in fk): print('missing',fk,file=sys.stderr); continue
        fl=[floors[k][0] for k in fk]
        bw=[r['state']=='cold' and (not past or floors[k][1]<SMALL) for k in fk]
        out[(r['kind'],r['backend'],r['validation'],r['state'])]=(load,fl,bw,r['read_vs_floor'])
    return out
if __name__=='__main__':
    files=sys.argv[1:]
    res=[]
    for f in files:
        rng=random.Random(1)
        rs=rows_of(f); cur={}
        for k,(load,fl,bw,stored) in rs.items():
            cur[k]=(stored,None,redrawn(load,fl,bw,rng))
        res.append(cur)
    keys=sorted(set(res[0]))
    def fmt(t): return '%.2f[%.2f,%.2f]'%t
    def agree(a,b): return not (a[2]<b[1] or b[2]<a[1])
    for k in keys:
        line=' '.join(k)
        cells=[]
        for c in res:
            if k not in c: cells.append(None); continue
            st,now,new=c[k]
            cells.append(((st['estimate'],st['low'],st['high']),now,new))
        print('%-40s'%line, ' | '.join('%s %s hw%.0f%%'%(fmt(c[0]),fmt(c[2]),50*(c[2][2]-c[2][1])/c[2][0]) if c else '-' for c in cells))
    import itertools
    for i,j in itertools.combinations(range(len(res)),2):
        a=b=cnt=0
        for k in keys:
            if k in res[i] and k in res[j]:
                cnt+=1
                si=res[i][k]; sj=res[j][k]
                st=lambda x:(x[0]['estimate'],x[0]['low'],x[0]['high'])
                a+=agree(st(si),st(sj)); b+=agree(si[2],sj[2])
        print('files',i+1,j+1,'rows',cnt,'meeting: stored',a,'redrawn',b)
