import csv,sys,collections
rows=list(csv.reader(open(sys.argv[1])))
# find header
hi=[i for i,r in enumerate(rows) if r and r[0]=="ID"][0]
h=rows[hi]; data=[dict(zip(h,r)) for r in rows[hi+1:] if len(r)==len(h)]
print(len(data),"kernels")
# print last N kernel launches (the final graph replay)
N=int(sys.argv[2])
for d in data[-N:]:
    print(d["ID"], d["Kernel Name"][:60], d.get("Block Size",""), d.get("Grid Size",""), d["Metric Value"])
tot=sum(float(d["Metric Value"].replace(",","")) for d in data[-N:])
print("sum of last",N,":",tot, data[-1]["Metric Unit"])
