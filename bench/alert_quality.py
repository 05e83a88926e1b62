#!/usr/bin/python3
"""How often `framegate regressions` is right: a labelled benchmark of alert quality.

Every night of every history below is a real `framegate run` measurement of the 12-cell
matrix (bench/data/alert_aa_nights.json, recorded by bench/alert_record.py on this machine
with nothing changed between nights), resampled, with known changes injected. Each night
is written into a real SQLite store through framegate's own write path (`framegate db
test-import` of a run.json, as `framegate run` records it) and the real `framegate
regressions --json -` is asked, as a nightly CI would be, the morning after. framegate's
column is that binary's answer; the two baselines are computed here from the same values:
  fixed-5%  a night worse than the night before by more than 5% (latency, rel_l2), 0.5 dB
            (min PSNR), 0.005 (SSIM), or failing after a pass;
  t-test    Welch's t-test, the last 3 nights against the 10 before, one-sided p < 0.01
            (Bencher's default), or failing after a pass.

Histories ("worlds"), 40 nights each, one day apart; nights 0-9 are history only:
  aa-real       the recorded nights in recorded order: every alert is false;
  aa-resampled  nights drawn with replacement (whole nights: the 12 cells of a night
                share its load), 20 replicas of the matrix (240 series);
  injected-N    the same, each series with one change (below) from a night t0 drawn in
                18..28 (creeping: 14..22), or none;
  environment   the run's fingerprint changes at night 25 (LibTorch and BLAS; in the
                second, the GPU driver) and a third of the series move +50%, a third -30%.
Kinds (target: alert = a confirmed regression is the right answer):
  latency +2/+5/+10/+20/+50/+100%, creeping +1%/night x 10, rel_l2 +10% / x2, min PSNR -0.5 /
  -3 dB, status FAIL from t0: alert;  latency -20% (improvement), one-night outliers
  (+30%, +100% latency; one FAIL), flaky (FAIL with p = 0.4 every night), none:
  no alert;  environment: labelled environment, never a regression.
Scoring per series: an alert episode starts on a night the series alerts and did not the
night before. Episodes from t0 on are true on an alert kind, every other episode is false.
Recall@3: the change alerted on night t0, t0+1 or t0+2 (delay 0-2); delay: the median
nights from t0 to the first alert. Latency steps are also pooled by size relative to the
cell's own night-to-night noise (sigma: 1.4826 x MAD of the recorded nightly medians).

  /usr/bin/python3 bench/alert_quality.py --bin build/bin/framegate [--replicas 20]
      [--fixture bench/data/alert_aa_nights_2026-11-28.json --template bench/data/alert_template_run_2026-11-28.json]
"""
import argparse
import copy
import datetime
import hashlib
import json
import math
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile

from scipy import stats

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURE = REPO / "bench" / "data" / "alert_aa_nights.json"
TEMPLATE = REPO / "bench" / "data" / "alert_template_run.json"
NIGHTS = 40
FIRST_JUDGED = 10
ENV_NIGHT = 25

# name, target, numeric kinds need a finite, non-zero metric (not fp32's identical frames)
KINDS = [
    ("none", "none"), ("latency +2%", "alert"), ("latency +5%", "alert"), ("latency +10%", "alert"),
    ("latency +20%", "alert"), ("latency +50%", "alert"), ("latency +100%", "alert"), ("creeping +1%/night x10", "alert"),
    ("rel_l2 +10%", "alert"), ("rel_l2 x2", "alert"), ("min_psnr -0.5 dB", "alert"),
    ("min_psnr -3 dB", "alert"), ("status FAIL", "alert"), ("latency -20% (improvement)", "none"),
    ("outlier +30% one night", "none"), ("outlier +100% one night", "none"), ("FAIL one night", "none"),
    ("flaky", "none"),
]
NUMERIC = {"rel_l2 +10%", "rel_l2 x2", "min_psnr -0.5 dB", "min_psnr -3 dB"}
# The environment worlds' latency change from ENV_NIGHT on, relative, by kind.
ENV_STEP = {"environment +50%": 0.5, "environment -30%": -0.3, "environment, no effect": 0.0}


def cell_id(cell):
    """Cell::Id(): the first 16 hex digits of the SHA-256 of the canonical string."""
    text = "v1|pipeline=reference:{size}|device={device}|policy={policy}|seed={seed}".format(**cell)
    for name in ("fault", "sampler", "steps", "guidance"):
        value = cell.get(name)
        text += f"|{name}=" + (f"{value:g}" if isinstance(value, float) else str(value if value is not None else ""))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def apply_kind(kind, t, t0, v, rng):
    """Night t's values v (a dict, changed in place) of a series with `kind` from t0."""
    if kind.startswith("latency ") and t >= t0:
        s = {"latency +2%": .02, "latency +5%": .05, "latency +10%": .1, "latency +20%": .2,
             "latency +50%": .5, "latency +100%": 1.0, "latency -20% (improvement)": -.2}[kind]
        v["repeats"] = [x * (1 + s) for x in v["repeats"]]
    elif kind.startswith("creeping") and t >= t0:
        v["repeats"] = [x * (1 + 0.01 * min(t - t0 + 1, 10)) for x in v["repeats"]]
    elif kind.startswith("outlier") and t == t0:
        s = 0.3 if "30" in kind else 1.0
        v["repeats"] = [x * (1 + s) for x in v["repeats"]]
    elif kind == "rel_l2 +10%" and t >= t0:
        v["rel_l2"] *= 1.1
    elif kind == "rel_l2 x2" and t >= t0:
        v["rel_l2"] *= 2
    elif kind.startswith("min_psnr") and t >= t0:
        v["min_psnr"] -= 0.5 if "0.5" in kind else 3
    elif kind == "status FAIL" and t >= t0:
        v["status"] = "FAIL"
    elif kind == "FAIL one night" and t == t0:
        v["status"] = "FAIL"
    elif kind == "flaky" and t >= t0 and rng.random() < 0.4:
        v["status"] = "FAIL"


class World:
    """One history: series (cell x replica), each with its nights' values and its label."""

    def __init__(self, name, fixture, replicas, rng, night_order=None, kinds=None, env=None):
        self.name, self.fixture, self.env = name, fixture, env
        self.series = []  # dicts: cell, replica, kind, t0, values[t]
        ncells = len(fixture["cells"])
        draws = []
        for r in range(replicas):
            order = night_order or [rng.randrange(len(fixture["nights"])) for _ in range(NIGHTS)]
            draws.append(order)
        for r in range(replicas):
            for c in range(ncells):
                kind, t0 = "none", NIGHTS
                if kinds:
                    numeric_ok = fixture["cells"][c]["policy"] != "fp32"
                    choices = [k for k in kinds if numeric_ok or k not in NUMERIC]
                    kind = rng.choice(choices)
                    t0 = rng.randint(14, 22) if kind.startswith("creeping") else rng.randint(18, 28)
                    if kind == "flaky":
                        t0 = 0  # a flaky cell is flaky all along
                if env:
                    kind, t0 = list(ENV_STEP)[c % 3], ENV_NIGHT
                values = []
                for t in range(NIGHTS):
                    night = fixture["nights"][draws[r][t % len(draws[r])]]
                    v = {"status": night["status"][c], "repeats": list(night["repeats"][c]),
                         "min_psnr": night["min_psnr"][c], "mean_ssim": night["mean_ssim"][c],
                         "rel_l2": night["rel_l2"][c]}
                    if env and t >= t0:
                        v["repeats"] = [x * (1 + ENV_STEP[kind]) for x in v["repeats"]]
                    else:
                        apply_kind(kind, t, t0, v, rng)
                    values.append(v)
                self.series.append({"cell": c, "replica": r, "kind": kind, "t0": t0, "values": values})

    def run_json(self, template, t, world_index):
        """Night t as a run.json (`run --json`'s format) from the recorded template."""
        day = datetime.date(2030, 1, 1) + datetime.timedelta(days=t)
        run = copy.deepcopy(template)
        info = run["run"]
        info["run_id"] = f"{day:%Y%m%d}T020000Z-{world_index:04x}{t:04x}"
        info["started_at"] = f"{day:%Y-%m-%d}T02:00:00Z"
        info["finished_at"] = f"{day:%Y-%m-%d}T02:10:00Z"
        info["state"] = "finished"
        info["git_sha"] = f"{t:012x}"  # a new commit every night
        info["tags"] = "nightly"
        driver = ""
        if self.env and t >= ENV_NIGHT:
            if self.env == "libtorch":
                info["libtorch_version"], info["blas"] = "2.6.0", "/usr/lib/x86_64-linux-gnu/libmkl_rt.so.2"
            else:
                driver = "560.35"
        replicas = 1 + max(s["replica"] for s in self.series)
        run["devices"] = [{"device": f"cuda:{r}", "name": "bench GPU", "capability": "9.0",
                           "memory_bytes": 0, "driver": driver or "550.54"} for r in range(replicas)]
        base_cells = template["cells"]
        cells = []
        for s in self.series:
            cell = copy.deepcopy(base_cells[s["cell"]])
            v = s["values"][t]
            cell["device"] = f"cuda:{s['replica']}"
            cell["cell_id"] = cell_id(cell)
            s["cell_id"] = cell["cell_id"]
            cell["status"] = v["status"]
            cell["reason"] = "injected" if v["status"] == "FAIL" else ""
            cell["timings"]["generation_seconds"] = v["repeats"]
            if cell.get("metrics"):
                for name in ("min_psnr", "mean_ssim", "rel_l2"):
                    cell["metrics"][name] = v[name]
            cells.append(cell)
        run["cells"] = cells
        return run


def framegate_alerts(binary, world, template, world_index, work):
    """{(series index, night): set of labels} from the real binary, night by night."""
    db = str(work / f"{world.name}.db")
    by_cell = {}
    out = {}
    for t in range(NIGHTS):
        path = work / f"{world.name}-{t:02d}.json"
        path.write_text(json.dumps(world.run_json(template, t, world_index)))
        if t == 0:
            by_cell = {s["cell_id"]: i for i, s in enumerate(world.series)}
        subprocess.run([binary, "db", "test-import", "--db", db, str(path)], check=True,
                       stdout=subprocess.DEVNULL)
        path.unlink()
        if t < FIRST_JUDGED:
            continue
        proc = subprocess.run([binary, "regressions", "--db", db, "--json", "-"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
        if proc.returncode not in (0, 1):
            sys.exit(f"framegate regressions failed ({proc.returncode}) on {db}")
        for cid, labels in parse_alerts(json.loads(proc.stdout)).items():
            out[(by_cell[cid], t)] = labels
    return out


def parse_alerts(report):
    """cell id -> labels: "regression" (confirmed: counts for exit 1), "environment", ..."""
    labels = {}
    if "alerts" in report:  # the per-series alert list
        for a in report["alerts"]:
            label = a["kind"] if a["kind"] != "regression" or a.get("confirmed", True) else "pending"
            labels.setdefault(a["cell_id"], set()).add(label)
    else:  # grouped findings: a finding not pending is a regression
        for f in report["findings"]:
            for cid in f["cell_ids"]:
                labels.setdefault(cid, set()).add("pending" if f["pending"] else "regression")
    for f in report.get("flaky", []):
        labels.setdefault(f["cell_id"], set()).add("flaky")
    return labels


def latency(v):
    return statistics.median(v["repeats"])


def tracks(v):
    """Values oriented so that larger is worse; None when absent."""
    psnr = v["min_psnr"]
    return {"latency": latency(v), "rel_l2": v["rel_l2"],
            "min_psnr": None if psnr is None else -min(psnr, 100.0),
            "mean_ssim": None if v["mean_ssim"] is None else -v["mean_ssim"]}


FIXED = {"latency": ("rel", .05), "rel_l2": ("rel", .05), "min_psnr": ("abs", .5), "mean_ssim": ("abs", .005)}


def fixed_alert(values, t):
    prev, cur = values[t - 1], values[t]
    if cur["status"] != "PASS" and prev["status"] == "PASS":
        return True
    if cur["status"] != "PASS" or prev["status"] != "PASS":
        return False
    a, b = tracks(prev), tracks(cur)
    for name, (mode, limit) in FIXED.items():
        if a[name] is None or b[name] is None:
            continue
        bound = limit * abs(a[name]) if mode == "rel" else limit
        if b[name] - a[name] > bound:
            return True
    return False


def ttest_alert(values, t, last=3, before=10, alpha=0.01):
    if values[t]["status"] != "PASS" and values[t - 1]["status"] == "PASS":
        return True
    window = [v for v in values[max(0, t - last - before + 1):t + 1] if v["status"] == "PASS"]
    if len(window) < last + 3 or values[t]["status"] != "PASS":
        return False
    for name in FIXED:
        xs = [tracks(v)[name] for v in window]
        if any(x is None for x in xs):
            continue
        a, b = xs[:-last], xs[-last:]
        if statistics.pvariance(a) == 0 and statistics.pvariance(b) == 0:
            if min(b) > max(a):
                return True
            continue
        p = stats.ttest_ind(b, a, equal_var=False, alternative="greater").pvalue
        if p < alpha:
            return True
    return False


def baseline_alerts(world, rule):
    out = {}
    for i, s in enumerate(world.series):
        for t in range(FIRST_JUDGED, NIGHTS):
            if rule(s["values"], t):
                out[(i, t)] = {"regression"}
    return out


class Tally:
    def __init__(self):
        self.series = self.detected = self.within3 = self.tp = self.fp = self.env_labelled = 0
        self.delays = []

    def add(self, s, alerts, index):
        target = "environment" if s["kind"].startswith("environment") else dict(KINDS)[s["kind"]]
        self.series += 1
        first = None
        env_seen = False
        for t in range(FIRST_JUDGED, NIGHTS):
            labels = alerts.get((index, t), set())
            if "environment" in labels and s["t0"] <= t <= s["t0"] + 2:
                env_seen = True
            if "regression" not in labels or "regression" in alerts.get((index, t - 1), set()):
                continue
            if target == "alert" and t >= s["t0"]:
                self.tp += 1
                first = t if first is None else first
            else:
                self.fp += 1
        if first is not None:
            self.detected += 1
            self.delays.append(first - s["t0"])
            self.within3 += first - s["t0"] <= 2
        self.env_labelled += env_seen

    def row(self, target):
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")
        if target == "alert":
            recall = self.within3 / self.series if self.series else float("nan")
            f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
            delay = statistics.median(self.delays) if self.delays else float("nan")
            return f"{precision:5.2f} {recall:5.2f} {f1:5.2f} {delay:4.1f}"
        if target == "environment":
            return f"env {self.env_labelled:3d}/{self.series:<3d} reg {self.fp:3d}"
        return f"false alarms {self.fp:3d}".ljust(22)


def noise_sigma(fixture):
    """Per cell: 1.4826 x MAD of the recorded nightly medians, relative to their median."""
    out = []
    for c in range(len(fixture["cells"])):
        xs = [statistics.median(n["repeats"][c]) for n in fixture["nights"]]
        m = statistics.median(xs)
        out.append(1.4826 * statistics.median(abs(x - m) for x in xs) / m)
    return out


STEP_SIZE = {"latency +2%": .02, "latency +5%": .05, "latency +10%": .1, "latency +20%": .2, "latency +50%": .5,
             "latency +100%": 1.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(REPO / "build" / "bin" / "framegate"))
    ap.add_argument("--replicas", type=int, default=20)
    ap.add_argument("--injected-worlds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--json", default="", help="also write every tally as JSON here")
    ap.add_argument("--fixture", default=str(FIXTURE), help="the recorded A/A nights (alert_record.py --fixture)")
    ap.add_argument("--template", default=str(TEMPLATE), help="the run.json every night is made from")
    args = ap.parse_args()
    fixture = json.loads(pathlib.Path(args.fixture).read_text())
    template = json.loads(pathlib.Path(args.template).read_text())
    rng = random.Random(args.seed)
    sigma = noise_sigma(fixture)
    n_recorded = len(fixture["nights"])
    worlds = [World("aa-real", fixture, 1, rng, night_order=list(range(n_recorded)))]
    worlds.append(World("aa-resampled", fixture, args.replicas, rng))
    for k in range(args.injected_worlds):
        worlds.append(World(f"injected-{k}", fixture, args.replicas, rng, kinds=[k for k, _ in KINDS]))
    worlds.append(World("environment-libtorch", fixture, args.replicas, rng, env="libtorch"))
    worlds.append(World("environment-driver", fixture, args.replicas, rng, env="driver"))

    methods = {"framegate": {}, "fixed-5%": {}, "t-test": {}}
    with tempfile.TemporaryDirectory(prefix="framegate-alerts-") as tmp:
        for w_index, world in enumerate(worlds):
            methods["framegate"][world.name] = framegate_alerts(args.bin, world, template, w_index,
                                                                pathlib.Path(tmp))
            methods["fixed-5%"][world.name] = baseline_alerts(world, fixed_alert)
            methods["t-test"][world.name] = baseline_alerts(world, ttest_alert)
            print(f"{world.name}: {len(world.series)} series x {NIGHTS - FIRST_JUDGED} judged nights",
                  file=sys.stderr, flush=True)

    rows = {}  # row name -> method -> Tally
    targets = {}
    def tally(row, target, method, s, alerts, i):
        targets[row] = target
        rows.setdefault(row, {}).setdefault(method, Tally()).add(s, alerts, i)

    for method, by_world in methods.items():
        for world in worlds:
            alerts = by_world[world.name]
            for i, s in enumerate(world.series):
                if world.name.startswith("aa"):
                    tally(f"A/A {world.name[3:]} ({len(world.series)} series)", "none", method, s, alerts, i)
                    continue
                if world.env:
                    tally(f"{s['kind']} ({world.env})", "environment", method, s, alerts, i)
                    size = abs(ENV_STEP[s["kind"]])
                    if size > 0:
                        tally("environment moved >= 3 sigma" if size >= 3 * sigma[s["cell"]]
                              else "environment moved < 3 sigma", "environment", method, s, alerts, i)
                    continue
                target = dict(KINDS)[s["kind"]]
                tally(s["kind"], target, method, s, alerts, i)
                if s["kind"] in STEP_SIZE:
                    big = STEP_SIZE[s["kind"]] >= 3 * sigma[s["cell"]]
                    tally("latency steps >= 3 sigma" if big else "latency steps < 3 sigma", "alert", method, s,
                          alerts, i)
                    if STEP_SIZE[s["kind"]] >= 5 * sigma[s["cell"]]:
                        tally("latency steps >= 5 sigma", "alert", method, s, alerts, i)
            if not world.name.startswith("aa") and not world.env:
                for i, s in enumerate(world.series):
                    tally("all injected series", "alert" if dict(KINDS)[s["kind"]] == "alert" else "mixed",
                          method, s, alerts, i)

    names = list(methods)
    print(f"fixture: {n_recorded} recorded nights x {len(fixture['cells'])} cells; noise sigma per cell "
          f"(relative): {min(sigma):.3f}..{max(sigma):.3f} (median {statistics.median(sigma):.3f})")
    print(f"{'kind':34s} {'series':>6s}  " + "  ".join(f"{n + ': P     R@3   F1  delay':30s}" for n in names))
    order = [k for k, _ in KINDS]
    def position(row):
        for i, k in enumerate(order):
            if row == k:
                return (1, i)
        return (0 if row.startswith("A/A") else 2 if row.startswith("latency steps") or row.startswith("all") else 3,
                row)
    for row in sorted(rows, key=position):
        by_method = rows[row]
        target = targets[row]
        cells = []
        for n in names:
            t = by_method[n]
            if target == "mixed":
                p = t.tp / (t.tp + t.fp) if t.tp + t.fp else float("nan")
                cells.append(f"P {p:5.2f} ({t.tp} true, {t.fp} false)".ljust(30))
            else:
                cells.append(t.row(target).ljust(30))
        print(f"{row:34s} {by_method[names[0]].series:6d}  " + "  ".join(cells))
    if args.json:
        out = {row: {n: vars(t) for n, t in by.items()} for row, by in rows.items()}
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
