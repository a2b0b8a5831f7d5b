#!/usr/bin/env python3
"""Plots of the committed benchmark JSON, drawn by gnuplot (Debian's gnuplot-nox):

    python3 benchmarks/plot.py peers docs/benchmarks/raw/<peers>.json docs/benchmarks/peers.png
    python3 benchmarks/plot.py train docs/benchmarks/raw/<train_step>.json docs/benchmarks/train_step.png

peers: per op and shape, forward+backward time of each provider relative to ours (bars above 1 are
slower than ours). train: tokens/s of each provider relative to HF eager, and peak memory.
No third-party Python packages: the data goes to gnuplot as a text table.
"""
import json
import os
import subprocess
import sys
import tempfile


def run_gnuplot(script: str, data: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        data_path = os.path.join(d, "data.txt")
        with open(data_path, "w") as f:
            f.write(data)
        subprocess.run(["gnuplot"], input=script.replace("DATA", data_path), text=True, check=True)


def peers(src: str, out: str) -> None:
    doc = json.load(open(src))
    meta, rows = doc["meta"], doc["rows"]
    provs = ["eager", "torch.compile", "liger_kernel", "ours+compile"]
    lines = ["label " + " ".join(p.replace(" ", "_") for p in provs)]
    for r in rows:
        ours = r.get("ours", {}).get("ms")
        if not ours:
            continue
        vals = []
        for p in provs:
            ms = r.get(p, {}).get("ms")
            vals.append(f"{min(ms / ours, 4.0):.3f}" if ms else "NaN")  # clipped: eager is 10x+
        lines.append(f"\"{r['op']}\\n{r['shape']}\" " + " ".join(vals))
    title = f"time relative to ours (fwd+bwd, bf16; >1 = slower than ours) - {meta['device']}, {meta['date']}, {meta['commit']}"
    script = f"""set terminal pngcairo size 1600,600 font ",10" noenhanced
set bmargin 6
set output "{out}"
set title "{title}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30 font ",8"
set yrange [0:4.2]
set grid ytics
set key top left
set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black"
plot for [i=2:{len(provs) + 1}] "DATA" using i:xtic(1) title columnheader(i)
"""
    run_gnuplot(script, "\n".join(lines) + "\n")


def train(src: str, out: str) -> None:
    doc = json.load(open(src))
    meta, rows = doc["meta"], doc["rows"]
    base = {r["model"]: r["tokens_per_s"] for r in rows if r.get("provider") == "hf" and "tokens_per_s" in r}
    lines = ["label speedup peak_gb"]
    for r in rows:
        if "tokens_per_s" not in r or r["model"] not in base:
            continue
        lines.append(f"\"{r['model']}\\n{r['provider']}\" {r['tokens_per_s'] / base[r['model']]:.3f} {r['peak_gb']}")
    script = f"""set terminal pngcairo size 1200,500 font ",10" noenhanced
set bmargin 5
set output "{out}"
set title "training step: tokens/s vs HF eager (bars), peak GB (points) - {meta['device']}, {meta['date']}, {meta['commit']}"
set style data histograms
set style fill solid 0.8 border -1
set ytics nomirror
set y2tics
set ylabel "x HF eager tokens/s"
set y2label "peak GB"
set yrange [0:*]
set y2range [0:*]
set grid ytics
plot "DATA" using 2:xtic(1) title "tokens/s vs HF eager", "" using 0:3 axes x1y2 with points pt 7 ps 1.5 title "peak GB"
"""
    run_gnuplot(script, "\n".join(lines) + "\n")


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] not in ("peers", "train"):
        print(__doc__, file=sys.stderr)
        return 2
    {"peers": peers, "train": train}[sys.argv[1]](sys.argv[2], sys.argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
